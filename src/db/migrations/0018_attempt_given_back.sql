-- An attempt that ends without counting against the abandon limit (a hand-back, a model outage, a wait)
-- keeps its number in `attempts` while the run waits for its next claim, and that claim continues it
-- instead of counting one more. A queued run then counts the attempt its last_error names, and the
-- limit counts exactly what it counted before.
ALTER TABLE run ADD COLUMN attempt_given_back boolean NOT NULL DEFAULT false;

-- `error` is what a finished run ended with. A requeue used to copy its cause there as well as into
-- last_error, so unfinished runs could show an error they did not end with.
UPDATE run SET error = NULL WHERE status IN ('QUEUED', 'RUNNING', 'WAITING') AND error IS NOT NULL;
