-- Model options per run (thinking, sampling, tool choice, max tokens), over its agent's; null: the agent's.
-- A run whose input was sent as content blocks (text, images, documents) keeps them in `input` as their
-- JSON array (sealed like any input) and says so in input_blocks.

ALTER TABLE run
    ADD COLUMN model_options jsonb,
    ADD COLUMN input_blocks  boolean NOT NULL DEFAULT false;
