-- Spend limits in money, and runs forked from another run's conversation.

ALTER TABLE run
    -- USD the run may spend on model calls; null: no money limit (tokens, steps and time still hold).
    ADD COLUMN cost_budget_usd    numeric(18, 8),
    -- A fork continues the conversation of another run as it stood after step `forked_after_seq`.
    -- Those steps are read from the source (and its own source, for a fork of a fork), never copied:
    -- the fork's own steps are numbered from forked_after_seq + 1. A source cannot be deleted while a
    -- fork refers to it, since the fork's log would lose its beginning.
    ADD COLUMN forked_from_run_id uuid REFERENCES run (id) ON DELETE RESTRICT,
    ADD COLUMN forked_after_seq   integer,
    ADD CONSTRAINT run_fork_complete CHECK ((forked_from_run_id IS NULL) = (forked_after_seq IS NULL));

-- Finds the forks of a run (deletion checks them; a source row is locked against a fork being made).
CREATE INDEX run_forked_from_idx ON run (forked_from_run_id) WHERE forked_from_run_id IS NOT NULL;
