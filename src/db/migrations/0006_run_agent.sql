-- A run belongs to an agent (by name, as defined in code), and may continue the conversation of an
-- earlier run.

-- Runs recorded before this column existed were all driven by the one agent their database was
-- served with: the built-in demo agent, or the single agent a program gave its runtime. The runtime
-- that migrates names that agent in the setting below (its first agent); without it (the bare
-- `migrate` command) they are the demo agent's. A non-volatile default is evaluated once, here, and
-- kept as the value of every existing row: no table rewrite, however many runs there are. The
-- default that stays is the demo agent, the agent of a run that names none (the store always names it).
ALTER TABLE run ADD COLUMN agent text NOT NULL
    DEFAULT coalesce(nullif(current_setting('durable_agent_migration.legacy_agent', true), ''), 'demo');
ALTER TABLE run ALTER COLUMN agent SET DEFAULT 'demo';

-- The version label of the agent definition the run was created under (null when it had none).
ALTER TABLE run ADD COLUMN agent_version text;

-- The finished run whose conversation this one continues. Nothing of it is copied: replay follows the
-- chain. Deleting a run that another continues is refused (retention deletes a chain from its newest
-- run back), so a conversation never loses its beginning.
ALTER TABLE run ADD COLUMN previous_run_id uuid REFERENCES run (id);
-- Who continues a run: the foreign key's check on delete, and the deletions' "is it continued?" probe.
CREATE INDEX run_previous_idx ON run (previous_run_id) WHERE previous_run_id IS NOT NULL;

-- A worker claims only the runs of the agents it serves: the live runs of one agent in due order are
-- one range of this index, so a queue full of another agent's runs costs a claim nothing.
CREATE INDEX run_agent_claim_idx ON run (agent, run_at) WHERE status IN ('QUEUED', 'RUNNING');
-- Listing one agent's runs, newest first (GET /api/runs?agent=).
CREATE INDEX run_agent_created_idx ON run (agent, created_at DESC, id DESC);
