-- Waiting as a status of a run: for people (approvals, decisions after a crash) and for time (timers,
-- delayed starts). A WAITING run holds no lease and is in no worker's memory; it is claimable again
-- when its run_at comes (a timer, an approval timeout), or is queued when every decision is made.

ALTER TABLE run DROP CONSTRAINT IF EXISTS run_status_check;
ALTER TABLE run ADD CONSTRAINT run_status_check
    CHECK (status IN ('QUEUED', 'RUNNING', 'WAITING', 'SUCCEEDED', 'FAILED', 'CANCELLED', 'TIMED_OUT'));

ALTER TABLE run
    -- What a WAITING run waits for: {kind, since, toolCalls, wakeAt?, expiresAt?} (kept after it wakes,
    -- shown only while the run is WAITING). `since` moves the deadline on by the time waited.
    ADD COLUMN waiting          jsonb,
    -- POST /api/runs with an Idempotency-Key: the key and the SHA-256 of the canonical request.
    ADD COLUMN idempotency_key  text,
    ADD COLUMN request_hash     text;

-- One run per key and tenant. A key older than 24 hours is released (set to null) before it is reused.
CREATE UNIQUE INDEX run_idempotency_key_uk ON run (tenant, idempotency_key) WHERE idempotency_key IS NOT NULL;

-- The claim index with WAITING runs in it. A run waiting for a person has run_at 'infinity' (or the time
-- its approval times out), so it sits past the end of every claim's range scan: ten thousand of them
-- cost a claim nothing. A timer's run_at is its wake-up time, and the first entry past now() is the
-- time an idle worker sets its one timer for.
-- Same name as before, so plans and tools that look for it still find it.
DROP INDEX run_claim_idx;
CREATE INDEX run_claim_idx ON run (run_at) WHERE status IN ('QUEUED', 'RUNNING', 'WAITING');
-- The same for the claim's per-agent ranges.
DROP INDEX run_agent_claim_idx;
CREATE INDEX run_agent_claim_idx ON run (agent, run_at) WHERE status IN ('QUEUED', 'RUNNING', 'WAITING');

-- A decision a person makes about one tool call: an approval the tool asked for before it runs
-- (kind 'approval'), or what to do with a call that is not idempotent and was found started after a
-- crash (kind 'decision'). A row with a null decision is pending. Written in the transaction that
-- makes the run WAITING, so the log and its decisions never disagree.
CREATE TABLE tool_decision (
    run_id      uuid NOT NULL REFERENCES run (id) ON DELETE CASCADE,
    tool_use_id text NOT NULL,
    kind        text NOT NULL CHECK (kind IN ('approval', 'decision')),
    decision    text CHECK (decision IN ('approve', 'deny', 'complete')),
    reason      text,
    -- 'complete': the call's result as the model will see it.
    result      text,
    -- An approval not decided by then is denied with "approval timed out".
    expires_at  timestamptz,
    created_at  timestamptz NOT NULL DEFAULT now(),
    decided_at  timestamptz,
    PRIMARY KEY (run_id, tool_use_id, kind)
);

-- Wake idle workers when a run starts waiting for a time, so each can set its one timer for the
-- nearest due run again (the payload is empty, as for queued runs).
CREATE TRIGGER run_waiting_timer AFTER INSERT OR UPDATE OF status, run_at ON run
    FOR EACH ROW WHEN (NEW.status = 'WAITING' AND NEW.run_at < 'infinity')
    EXECUTE FUNCTION run_notify_queued();
-- A run queued for later (startAt) also moves an idle worker's timer: run_queued fires on INSERT already.

-- The live events of waiting: run.waiting when a run starts to wait (with what it waits for), and
-- run.resumed when it leaves WAITING for the queue or a worker (a decision, a timer, a timeout).
-- Written by the transaction that changes the status, whichever statement does it.
CREATE FUNCTION run_event_waiting() RETURNS trigger LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN
    IF NEW.status = 'WAITING' THEN
        INSERT INTO run_event (run_id, type, data)
        VALUES (NEW.id, 'run.waiting', json_build_object(
            'kind', NEW.waiting ->> 'kind', 'toolCalls', coalesce(NEW.waiting -> 'toolCalls', '[]'::jsonb),
            'wakeAt', NEW.waiting ->> 'wakeAt', 'expiresAt', NEW.waiting ->> 'expiresAt'));
    ELSE
        INSERT INTO run_event (run_id, type, data)
        VALUES (NEW.id, 'run.resumed', json_build_object(
            'kind', OLD.waiting ->> 'kind', 'toolCalls', coalesce(OLD.waiting -> 'toolCalls', '[]'::jsonb)));
    END IF;
    RETURN NULL;
END $$;

CREATE TRIGGER run_event_waiting AFTER UPDATE OF status ON run
    FOR EACH ROW
    WHEN (OLD.status IS DISTINCT FROM NEW.status AND (NEW.status = 'WAITING' OR (OLD.status = 'WAITING' AND NEW.status IN ('QUEUED', 'RUNNING'))))
    EXECUTE FUNCTION run_event_waiting();
