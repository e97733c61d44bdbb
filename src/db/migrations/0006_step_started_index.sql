-- The dashboard's overview reads the steps of the last hour and day (tokens, cost, latency percentiles).
-- started_at is written once, when the row is inserted, and grows with time: new entries land at the
-- right edge of this index, and finishing a step changes no indexed column, so that update can stay HOT.
CREATE INDEX run_step_started_idx ON run_step (started_at);
