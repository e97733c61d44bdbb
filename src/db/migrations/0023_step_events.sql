-- The events that repeat a step row are read from the row instead of written a second time: a MODEL
-- step's step.finished, a TOOL step's step.started and tool.started (from its STARTED row) and its
-- tool.finished and step.finished (from the row done). Each checkpoint wrote one to three event rows
-- beside its step row; now an unfollowed run's checkpoint writes none (streamed text, written only
-- while someone follows the run, is still rows of run_event). src/store/run-events.ts reads both.
--
-- The row takes its events' ids from run_event's sequence, in the statement that writes it, while
-- the run's row is held (as every event write is, migration 0007): ids still increase in commit
-- order within a run. Ids now go up in twos, so a row takes one and owns the next as well: a tool
-- call's two events at its start, and its two at its end. Rows from before keep their events in
-- run_event and have no ids here.
ALTER TABLE run_event ALTER COLUMN id SET INCREMENT BY 2;

ALTER TABLE run_step
    -- TOOL: the id of its step.started; tool.started is the one after.
    ADD COLUMN started_event bigint,
    -- MODEL: the id of its step.finished. TOOL: of its tool.finished; step.finished is the one after.
    ADD COLUMN finished_event bigint,
    -- TOOL: the input tool.started carries (as the model gave it, sealed as event data is).
    ADD COLUMN tool_input json;

-- A streamed model attempt is open until its step is done: the step row says so now, for steps from
-- before as well (they have both).
CREATE OR REPLACE FUNCTION run_event_abandon_open(p_run uuid, p_reason text) RETURNS bigint
LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
DECLARE
    v_seq integer;
    v_last bigint;
BEGIN
    -- Only the run's latest streamed model step can have attempts open (see migration 0014).
    SELECT (e.data ->> 'seq')::int INTO v_seq
    FROM run_event e WHERE e.run_id = p_run AND e.type IN ('step.started', 'text.delta')
    ORDER BY e.id DESC LIMIT 1;
    IF v_seq IS NULL OR EXISTS (SELECT 1 FROM run_step s WHERE s.run_id = p_run AND s.seq = v_seq) THEN
        RETURN NULL;
    END IF;
    WITH added AS (
        INSERT INTO run_event (run_id, type, data)
        SELECT p_run, 'attempt.abandoned', row_to_json(d)
        FROM (SELECT DISTINCT (e.data ->> 'seq')::int AS seq, (e.data ->> 'attempt')::int AS attempt
              FROM run_event e
              WHERE e.run_id = p_run AND e.type IN ('step.started', 'text.delta') AND (e.data ->> 'attempt') IS NOT NULL) a
        CROSS JOIN LATERAL (SELECT a.seq, a.attempt, p_reason AS reason) d
        WHERE NOT EXISTS (SELECT 1 FROM run_step s WHERE s.run_id = p_run AND s.seq = a.seq)
          AND NOT EXISTS (SELECT 1 FROM run_event f WHERE f.run_id = p_run AND f.type = 'attempt.abandoned'
                            AND (f.data ->> 'seq')::int = a.seq AND (f.data ->> 'attempt')::int = a.attempt)
        ORDER BY a.seq, a.attempt
        RETURNING id)
    SELECT max(id) INTO v_last FROM added;
    RETURN v_last;
END $$;
