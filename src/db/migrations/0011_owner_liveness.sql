-- Owner liveness: every worker holds a session-level advisory lock for as long as its database
-- session lives, under a key drawn from worker_lock_key; a run claimed by it carries that key. When
-- the worker dies its session ends and PostgreSQL drops the lock at once, so live workers see, within
-- a second, which RUNNING runs lost their owner and take them over without waiting for the lease.
-- Null for a run claimed by a worker that relies on the lease alone (behind a transaction pooler).

-- Keys come from a sequence, not chance, so two live workers never share one.
CREATE SEQUENCE worker_lock_key AS integer MINVALUE 1 CYCLE;

ALTER TABLE run ADD COLUMN owner_lock integer;

-- The distinct owners of RUNNING runs, read by a skip scan of this index: a handful of index probes
-- per live worker, however many runs are in flight.
CREATE INDEX run_owner_lock_idx ON run (owner_lock) WHERE status = 'RUNNING' AND owner_lock IS NOT NULL;
