-- A run nobody follows writes its model steps' live events (step.started, streamed text) with the
-- step's checkpoint instead of as they stream: a statement less per model step, more when the answer
-- is slow (measured on the agent-loop bench with 1 s model calls: 1.81 → 1.2 statements per step).
-- When an event hub starts following a run (a new registration, or one renewed after it had
-- expired), the worker driving it hears of it here and writes what it gathered at once, and the rest
-- as it comes. Renewals of a live registration say nothing. A notification the worker missed (its
-- LISTEN connection was down) is made up by its lease renewal, which also says which runs are followed.
CREATE FUNCTION run_event_watch_added() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('durable_agent_run_followed', NEW.run_id::text);
    RETURN NULL;
END $$;

CREATE TRIGGER run_event_watch_added AFTER INSERT ON run_event_watch
    FOR EACH ROW EXECUTE FUNCTION run_event_watch_added();

CREATE TRIGGER run_event_watch_renewed AFTER UPDATE OF expires_at ON run_event_watch
    FOR EACH ROW WHEN (OLD.expires_at <= now()) EXECUTE FUNCTION run_event_watch_added();
