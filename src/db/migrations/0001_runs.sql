-- Runs and their steps: the durable log of every agent run.

CREATE TABLE run (
    id               uuid PRIMARY KEY,
    status           text NOT NULL DEFAULT 'QUEUED'
                     CHECK (status IN ('QUEUED', 'RUNNING', 'SUCCEEDED', 'FAILED', 'CANCELLED', 'TIMED_OUT')),
    input            text NOT NULL,
    model            text NOT NULL,
    token_budget     integer NOT NULL CHECK (token_budget > 0),
    tokens_used      bigint NOT NULL DEFAULT 0,
    cost_usd         numeric(18, 8) NOT NULL DEFAULT 0,
    max_steps        integer NOT NULL CHECK (max_steps > 0),
    deadline_at      timestamptz NOT NULL,
    run_at           timestamptz NOT NULL DEFAULT now(),
    locked_by        text,
    locked_until     timestamptz,
    -- New at every claim: the fence. A driver whose lease lapsed and was claimed again writes nothing.
    lease_token      uuid,
    cancel_requested boolean NOT NULL DEFAULT false,
    attempts         integer NOT NULL DEFAULT 0,
    metadata         jsonb NOT NULL DEFAULT '{}',
    output           text,
    -- The last model step's stop reason when the run ended on one (max_tokens: the output is cut short).
    stop_reason      text,
    error            text,
    created_at       timestamptz NOT NULL DEFAULT now(),
    updated_at       timestamptz NOT NULL DEFAULT now(),
    finished_at      timestamptz
)
-- Room on each page so the frequent updates of a running run (tokens, lease) are HOT: no index writes.
WITH (fillfactor = 70);

-- Only live runs are in the claim index, so claiming stays an index scan however many runs have finished.
CREATE INDEX run_claim_idx ON run (run_at) WHERE status IN ('QUEUED', 'RUNNING');
-- Listing newest first, with and without a status filter (keyset pagination on (created_at, id)).
CREATE INDEX run_created_idx ON run (created_at DESC, id DESC);
CREATE INDEX run_status_created_idx ON run (status, created_at DESC, id DESC);

CREATE TABLE run_step (
    run_id                      uuid NOT NULL REFERENCES run (id) ON DELETE CASCADE,
    seq                         integer NOT NULL CHECK (seq > 0),
    kind                        text NOT NULL CHECK (kind IN ('MODEL', 'TOOL')),
    status                      text NOT NULL CHECK (status IN ('STARTED', 'DONE', 'ERROR')),
    tool_name                   text,
    tool_use_id                 text,
    -- MODEL: request parameters only (model, max tokens, digests of system prompt and tools); the
    -- messages are the log itself, so storing them again would make storage quadratic in run length.
    request                     jsonb,
    -- MODEL: the assistant content blocks as JSON; TOOL: the result text.
    response                    text,
    stop_reason                 text,
    input_tokens                integer NOT NULL DEFAULT 0,
    output_tokens               integer NOT NULL DEFAULT 0,
    cache_creation_input_tokens integer NOT NULL DEFAULT 0,
    cache_read_input_tokens     integer NOT NULL DEFAULT 0,
    cost_usd                    numeric(18, 8) NOT NULL DEFAULT 0,
    attempts                    integer NOT NULL DEFAULT 1,
    latency_ms                  integer,
    worker                      text,
    started_at                  timestamptz NOT NULL DEFAULT now(),
    finished_at                 timestamptz,
    PRIMARY KEY (run_id, seq)
);

-- The model's tool_use id is the idempotency key of a tool step.
CREATE UNIQUE INDEX step_tool_uk ON run_step (run_id, tool_use_id) WHERE kind = 'TOOL';

-- Texts that many steps share (system prompts, tool definitions), stored once by their SHA-256.
CREATE TABLE content_blob (
    digest     text PRIMARY KEY,
    body       text NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now()
);

-- Wake idle workers when there is work. An empty payload lets PostgreSQL fold a burst into one notification.
CREATE FUNCTION run_notify_queued() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('durable_agent_run_queued', '');
    RETURN NULL;
END $$;

CREATE TRIGGER run_queued AFTER INSERT OR UPDATE OF status ON run
    FOR EACH ROW WHEN (NEW.status = 'QUEUED') EXECUTE FUNCTION run_notify_queued();
