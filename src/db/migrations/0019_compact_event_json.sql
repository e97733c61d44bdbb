-- The events the database writes itself (run.started, attempt.abandoned, run.waiting, run.resumed,
-- run.finished) in the same compact JSON as the worker's (JSON.stringify): readers get the stored text
-- as is, and json_build_object spaces it out ({"worker" : "w", "attempt" : 1}). row_to_json writes
-- compact JSON in the order of its columns; a jsonb value inside one (a waiting run's tool calls) is
-- compacted first, as jsonb's text puts a space after each colon and comma.

-- Whitespace outside string literals removed: in jsonb's text, that is only the separators' spaces.
CREATE FUNCTION json_compact(v jsonb) RETURNS json LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
    SELECT regexp_replace(v::text, '("(?:[^"\\]|\\.)*")|\s+', '\1', 'g')::json
$$;

CREATE OR REPLACE FUNCTION run_event_abandon_open(p_run uuid, p_reason text) RETURNS bigint
LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
DECLARE
    v_from bigint;
    v_seq integer;
    v_last bigint;
BEGIN
    -- Only the run's latest streamed model step can have attempts open (see migration 0014).
    SELECT e.id, (e.data ->> 'seq')::int INTO v_from, v_seq
    FROM run_event e WHERE e.run_id = p_run AND e.type IN ('step.started', 'text.delta')
    ORDER BY e.id DESC LIMIT 1;
    IF v_seq IS NULL
       OR EXISTS (SELECT 1 FROM run_event f
                  WHERE f.run_id = p_run AND f.id > v_from AND f.type = 'step.finished' AND (f.data ->> 'seq')::int = v_seq) THEN
        RETURN NULL;
    END IF;
    WITH added AS (
        INSERT INTO run_event (run_id, type, data)
        SELECT p_run, 'attempt.abandoned', row_to_json(d)
        FROM (SELECT DISTINCT (e.data ->> 'seq')::int AS seq, (e.data ->> 'attempt')::int AS attempt
              FROM run_event e
              WHERE e.run_id = p_run AND e.type IN ('step.started', 'text.delta') AND (e.data ->> 'attempt') IS NOT NULL) a
        CROSS JOIN LATERAL (SELECT a.seq, a.attempt, p_reason AS reason) d
        WHERE NOT EXISTS (SELECT 1 FROM run_event f WHERE f.run_id = p_run AND f.type = 'step.finished' AND (f.data ->> 'seq')::int = a.seq)
          AND NOT EXISTS (SELECT 1 FROM run_event f WHERE f.run_id = p_run AND f.type = 'attempt.abandoned'
                            AND (f.data ->> 'seq')::int = a.seq AND (f.data ->> 'attempt')::int = a.attempt)
        ORDER BY a.seq, a.attempt
        RETURNING id)
    SELECT max(id) INTO v_last FROM added;
    RETURN v_last;
END $$;

CREATE OR REPLACE FUNCTION run_event_claimed(p_run uuid, p_worker text, p_attempt integer) RETURNS TABLE (seq integer, attempt integer)
LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
DECLARE
    v_last bigint;
BEGIN
    INSERT INTO run_event (run_id, type, data)
    SELECT p_run, 'run.started', row_to_json(d) FROM (SELECT p_worker AS worker, p_attempt AS attempt) d
    RETURNING id INTO v_last;
    PERFORM run_event_announce(p_run, coalesce(run_event_abandon_open(p_run, 'takeover'), v_last));
    RETURN QUERY
        SELECT (e.data ->> 'seq')::int, max((e.data ->> 'attempt')::int)
        FROM run_event e
        WHERE e.run_id = p_run AND e.type IN ('step.started', 'text.delta', 'attempt.abandoned') AND (e.data ->> 'attempt') IS NOT NULL
        GROUP BY 1;
END $$;

CREATE OR REPLACE FUNCTION run_event_finished() RETURNS trigger LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
DECLARE
    v_last bigint;
BEGIN
    PERFORM run_event_abandon_open(NEW.id, 'run-ended'); -- announced with run.finished, which comes after
    INSERT INTO run_event (run_id, type, data)
    SELECT NEW.id, 'run.finished', row_to_json(d)
    FROM (SELECT NEW.status AS status, NEW.output AS output, NEW.error AS error, NEW.stop_reason AS "stopReason") d
    RETURNING id INTO v_last;
    PERFORM run_event_announce(NEW.id, v_last);
    RETURN NULL;
END $$;

CREATE OR REPLACE FUNCTION run_event_waiting() RETURNS trigger LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
DECLARE
    v_last bigint;
BEGIN
    IF NEW.status = 'WAITING' THEN
        INSERT INTO run_event (run_id, type, data)
        SELECT NEW.id, 'run.waiting', row_to_json(d)
        FROM (SELECT NEW.waiting ->> 'kind' AS kind, json_compact(coalesce(NEW.waiting -> 'toolCalls', '[]'::jsonb)) AS "toolCalls",
                     NEW.waiting ->> 'wakeAt' AS "wakeAt", NEW.waiting ->> 'expiresAt' AS "expiresAt") d
        RETURNING id INTO v_last;
    ELSE
        INSERT INTO run_event (run_id, type, data)
        SELECT NEW.id, 'run.resumed', row_to_json(d)
        FROM (SELECT OLD.waiting ->> 'kind' AS kind, json_compact(coalesce(OLD.waiting -> 'toolCalls', '[]'::jsonb)) AS "toolCalls") d
        RETURNING id INTO v_last;
    END IF;
    PERFORM run_event_announce(NEW.id, v_last);
    RETURN NULL;
END $$;
