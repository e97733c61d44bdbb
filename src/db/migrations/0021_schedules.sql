-- Schedules: runs made from a cron expression, one per slot whatever the number of processes.

CREATE TABLE schedule (
    id                      uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    tenant                  text        NOT NULL,
    name                    text        NOT NULL,
    cron                    text        NOT NULL,
    timezone                text        NOT NULL DEFAULT 'UTC',
    agent                   text        NOT NULL,
    -- What each run is created with: input, model, tokenBudget, costBudgetUsd, timeoutSeconds, maxSteps,
    -- metadata (input and metadata sealed when encryption is on).
    run_options             jsonb       NOT NULL,
    overlap                 text        NOT NULL DEFAULT 'skip' CHECK (overlap IN ('skip', 'allow')),
    catch_up                text        NOT NULL DEFAULT 'latest' CHECK (catch_up IN ('none', 'latest', 'all')),
    catch_up_window_seconds integer,
    jitter_seconds          integer     NOT NULL DEFAULT 0,
    start_at                timestamptz,
    end_at                  timestamptz,
    paused                  boolean     NOT NULL DEFAULT false,
    -- 'code': declared with defineSchedule and kept in step with the code at start; 'api': made by a request.
    source                  text        NOT NULL DEFAULT 'api' CHECK (source IN ('api', 'code')),
    -- The next slot to make; null once there is none (past end_at).
    next_run_at             timestamptz,
    -- A process making the schedule's due slots holds it this long (a crash lets it go).
    locked_until            timestamptz,
    lock_token              uuid,
    last_run_id             uuid,
    last_run_at             timestamptz,
    skipped_missed          bigint      NOT NULL DEFAULT 0,
    skipped_overlap         bigint      NOT NULL DEFAULT 0,
    last_skip_reason        text,
    last_skip_at            timestamptz,
    created_at              timestamptz NOT NULL DEFAULT now(),
    updated_at              timestamptz NOT NULL DEFAULT now(),
    UNIQUE (tenant, name)
);
-- The due schedules, earliest first: what every process's next wake-up and claim read.
CREATE INDEX schedule_due_idx ON schedule (next_run_at) WHERE NOT paused AND next_run_at IS NOT NULL;

-- A run made for a slot names its schedule and the slot's time. The slot's key is the schedule's tenant
-- and NAME, not its id: a schedule deleted and made again under the same name never makes a second run
-- for a slot that already had one. The unique index decides, whichever process makes the run.
ALTER TABLE run
    ADD COLUMN schedule_id   uuid,
    ADD COLUMN schedule_name text,
    ADD COLUMN scheduled_for timestamptz;
CREATE UNIQUE INDEX run_schedule_slot_idx ON run (tenant, schedule_name, scheduled_for) WHERE scheduled_for IS NOT NULL;
CREATE INDEX run_schedule_idx ON run (schedule_id, created_at DESC, id DESC) WHERE schedule_id IS NOT NULL;
-- A schedule's runs still active: what overlap 'skip' asks at every firing.
CREATE INDEX run_schedule_active_idx ON run (schedule_id)
    WHERE schedule_id IS NOT NULL AND status IN ('QUEUED', 'RUNNING', 'WAITING');

-- Announce a schedule made, changed or deleted, so every process's scheduler looks at its next slot again
-- (a slot made only moves a next slot later: no process needs to hear of it).
CREATE FUNCTION schedule_notify_changed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('durable_agent_schedule_changed', '');
    RETURN NULL;
END $$;
CREATE TRIGGER schedule_changed AFTER INSERT OR DELETE OR UPDATE OF cron, timezone, paused, start_at, end_at
    ON schedule FOR EACH STATEMENT EXECUTE FUNCTION schedule_notify_changed();
