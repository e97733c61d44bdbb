-- Announce each run that reaches a terminal status, with its id as payload, so a caller waiting for
-- that run (rt.runs.wait) wakes at once instead of polling. `UPDATE OF status` keeps the trigger off
-- the checkpoints, which never set the status.
CREATE FUNCTION run_notify_finished() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('durable_agent_run_finished', NEW.id::text);
    RETURN NULL;
END $$;

CREATE TRIGGER run_finished AFTER UPDATE OF status ON run
    FOR EACH ROW
    WHEN (NEW.status IN ('SUCCEEDED', 'FAILED', 'CANCELLED', 'TIMED_OUT') AND OLD.status IS DISTINCT FROM NEW.status)
    EXECUTE FUNCTION run_notify_finished();
