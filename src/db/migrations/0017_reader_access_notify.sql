-- An open event stream outlives the request that authenticated it: the API process serving it must
-- hear when the stream's key is revoked (by `keys revoke`, from any process) or its run deleted (by
-- request or by retention), and end the stream. Both are announced here, from whichever statement
-- did it; the API also re-checks its open streams on reconnect and on its slow poll, so a notification
-- lost while its LISTEN connection was down is made up.

-- Payload: the key's id. Revoking twice keeps the first time (api-keys.ts), so only the first announces.
CREATE FUNCTION api_key_notify_revoked() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('durable_agent_key_revoked', OLD.id);
    RETURN NULL;
END $$;

CREATE TRIGGER api_key_revoked AFTER UPDATE OF revoked_at ON api_key
    FOR EACH ROW WHEN (OLD.revoked_at IS NULL AND NEW.revoked_at IS NOT NULL)
    EXECUTE FUNCTION api_key_notify_revoked();

-- Keys are never deleted by the project; one deleted by hand stops working all the same.
CREATE TRIGGER api_key_deleted AFTER DELETE ON api_key
    FOR EACH ROW EXECUTE FUNCTION api_key_notify_revoked();

-- Payload: the run's id; only for a run some event hub follows (a purge of runs nobody reads costs no
-- NOTIFY, see migration 0013). BEFORE: the run's rows in run_event_watch go with it (ON DELETE
-- CASCADE), so an AFTER trigger would no longer see who followed it. A NOTIFY is sent at commit only,
-- so a delete rolled back announces nothing.
CREATE FUNCTION run_notify_deleted() RETURNS trigger LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN
    IF EXISTS (SELECT 1 FROM run_event_watch w WHERE w.run_id = OLD.id) THEN
        PERFORM pg_notify('durable_agent_run_deleted', OLD.id::text);
    END IF;
    RETURN OLD;
END $$;

CREATE TRIGGER run_deleted BEFORE DELETE ON run
    FOR EACH ROW EXECUTE FUNCTION run_notify_deleted();
