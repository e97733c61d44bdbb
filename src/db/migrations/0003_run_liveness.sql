-- Why a run's last attempt ended without finishing it, requeues that do not count as attempts, and
-- cancel requests announced to the worker driving the run.

ALTER TABLE run
    -- The cause of the last attempt that ended without finishing the run (a crash of the driver, a
    -- database failure, a model outage), when it happened and which attempt it was.
    ADD COLUMN last_error         text,
    ADD COLUMN last_error_at      timestamptz,
    ADD COLUMN last_error_attempt integer,
    -- Times the run went back to the queue because its model provider kept failing. Counted apart
    -- from `attempts`: an outage is bounded by the run's deadline, not by the abandon limit.
    ADD COLUMN provider_requeues  integer NOT NULL DEFAULT 0,
    -- The lease this claim took over after it lapsed (null when the run was claimed from the queue).
    -- A worker that lived to see it lost that lease (it had stalled, it was not killed by the run)
    -- takes the attempt back by presenting the lease's token.
    ADD COLUMN lapsed_lease_token uuid;

-- Tell the worker driving a run that a cancel was requested; the payload is the run id, so only that
-- worker acts on it. Queued runs are cancelled on the spot and need no one to be told.
CREATE FUNCTION run_notify_cancel() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('durable_agent_run_cancel', NEW.id::text);
    RETURN NULL;
END $$;

CREATE TRIGGER run_cancel_requested AFTER UPDATE OF cancel_requested ON run
    FOR EACH ROW WHEN (NEW.cancel_requested AND NOT OLD.cancel_requested AND NEW.status = 'RUNNING')
    EXECUTE FUNCTION run_notify_cancel();
