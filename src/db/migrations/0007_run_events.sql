-- The live events of a run (src/events/protocol.ts defines the types and their data): rows written by
-- the worker with the checkpoints they describe, or in small batches for streamed text, and read by
-- any API process from a cursor.
--
-- Ids come from one sequence and are taken while the writer holds the run's row lock (every event
-- write is fenced on the run row, and run.finished is written by a trigger on it), so within a run
-- they increase in commit order: a reader that has seen id n never misses a later-committed id < n.
CREATE TABLE run_event (
    run_id     uuid NOT NULL REFERENCES run (id) ON DELETE CASCADE,
    id         bigint GENERATED ALWAYS AS IDENTITY,
    type       text NOT NULL,
    -- json, not jsonb: kept as written (compact, key order kept), served to readers as stored text.
    data       json NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (run_id, id)
);

-- Announce new events, one notification per run and statement: "<run id> <highest id>".
CREATE FUNCTION run_event_notify() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('durable_agent_run_event', run_id::text || ' ' || max(id)::text) FROM added GROUP BY run_id;
    RETURN NULL;
END $$;

CREATE TRIGGER run_event_added AFTER INSERT ON run_event
    REFERENCING NEW TABLE AS added FOR EACH STATEMENT EXECUTE FUNCTION run_event_notify();

-- The model attempts of a run that streamed (step.started or text.delta with an attempt) and were
-- neither finished (step.finished of their seq) nor abandoned: their text is still pending.
CREATE FUNCTION run_event_open_attempts(p_run uuid) RETURNS TABLE (seq integer, attempt integer)
LANGUAGE sql STABLE SET search_path FROM CURRENT AS $$
    SELECT a.seq, a.attempt
    FROM (SELECT DISTINCT (e.data ->> 'seq')::int AS seq, (e.data ->> 'attempt')::int AS attempt
          FROM run_event e
          WHERE e.run_id = p_run AND e.type IN ('step.started', 'text.delta') AND (e.data ->> 'attempt') IS NOT NULL) a
    WHERE NOT EXISTS (SELECT 1 FROM run_event f WHERE f.run_id = p_run AND f.type = 'step.finished' AND (f.data ->> 'seq')::int = a.seq)
      AND NOT EXISTS (SELECT 1 FROM run_event f WHERE f.run_id = p_run AND f.type = 'attempt.abandoned'
                        AND (f.data ->> 'seq')::int = a.seq AND (f.data ->> 'attempt')::int = a.attempt)
    ORDER BY a.seq, a.attempt
$$;

-- Marks every open attempt abandoned: its text is void.
CREATE FUNCTION run_event_abandon_open(p_run uuid, p_reason text) RETURNS void
LANGUAGE sql SET search_path FROM CURRENT AS $$
    INSERT INTO run_event (run_id, type, data)
    SELECT p_run, 'attempt.abandoned', json_build_object('seq', o.seq, 'attempt', o.attempt, 'reason', p_reason)
    FROM run_event_open_attempts(p_run) o ORDER BY o.seq, o.attempt
$$;

-- A claim: run.started, then whatever the previous owner left streaming is abandoned (it died or
-- lost its lease mid-stream). Returns the highest attempt number each model step has used so far,
-- so the new owner's attempts go on from there.
CREATE FUNCTION run_event_claimed(p_run uuid, p_worker text, p_attempt integer) RETURNS TABLE (seq integer, attempt integer)
LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN
    INSERT INTO run_event (run_id, type, data) VALUES (p_run, 'run.started', json_build_object('worker', p_worker, 'attempt', p_attempt));
    PERFORM run_event_abandon_open(p_run, 'takeover');
    RETURN QUERY
        SELECT (e.data ->> 'seq')::int, max((e.data ->> 'attempt')::int)
        FROM run_event e
        WHERE e.run_id = p_run AND e.type IN ('step.started', 'text.delta', 'attempt.abandoned') AND (e.data ->> 'attempt') IS NOT NULL
        GROUP BY 1;
END $$;

-- run.finished, written by the transaction that ends the run, whichever way it ends (a worker's last
-- checkpoint, a cancel of a queued run, a release that finds a cancel pending …); it comes last, after
-- any attempt still open is abandoned. AFTER triggers fire at the end of the statement, so the events
-- a checkpoint writes in the same statement come first.
CREATE FUNCTION run_event_finished() RETURNS trigger LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN
    PERFORM run_event_abandon_open(NEW.id, 'run-ended');
    INSERT INTO run_event (run_id, type, data)
    VALUES (NEW.id, 'run.finished', json_build_object('status', NEW.status, 'output', NEW.output, 'error', NEW.error, 'stopReason', NEW.stop_reason));
    RETURN NULL;
END $$;

CREATE TRIGGER run_event_finished AFTER UPDATE OF status ON run
    FOR EACH ROW
    WHEN (NEW.status IN ('SUCCEEDED', 'FAILED', 'CANCELLED', 'TIMED_OUT') AND OLD.status IS DISTINCT FROM NEW.status)
    EXECUTE FUNCTION run_event_finished();
