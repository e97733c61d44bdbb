-- The dashboard's overview reads the steps of the last hour and day (tokens, cost, latency percentiles).
-- started_at is written once, when the row is inserted, and grows with time: new entries land at the
-- right edge of this index, and finishing a step changes no indexed column, so that update can stay HOT.
CREATE INDEX run_step_started_idx ON run_step (started_at);

-- Runs by status, counted over every run (the overview, and the agent_runs gauge at every scrape): an
-- index-only scan of the status alone is a fraction of the size of run_status_created_idx. Status
-- changes are not HOT updates anyway (run_status_created_idx has the status), so this costs a run two
-- or three index entries over its life, and nothing per step.
CREATE INDEX run_status_idx ON run (status);
