-- API keys and tenants; deleting runs (by request or by age) and the texts only they referred to.

-- A run belongs to the tenant of the API key that created it. Runs created without a key (no keys
-- yet, AUTH=off, the library's own calls) belong to 'default'. A constant default: no table rewrite.
ALTER TABLE run ADD COLUMN tenant text NOT NULL DEFAULT 'default';

-- A tenant's runs, newest first, with and without a status filter: the same keyset as the unscoped
-- listing, so a page costs the same for a tenant with ten runs and one with ten million. The second
-- also counts a tenant's runs by status (the overview) as an index-only scan.
CREATE INDEX run_tenant_created_idx ON run (tenant, created_at DESC, id DESC);
CREATE INDEX run_tenant_status_created_idx ON run (tenant, status, created_at DESC, id DESC);

-- Retention deletes finished runs oldest first, in small batches: only finished runs are in here, so
-- a batch is a short range scan however many runs are live or recent.
CREATE INDEX run_finished_idx ON run (finished_at)
    WHERE status IN ('SUCCEEDED', 'FAILED', 'CANCELLED', 'TIMED_OUT');

-- content_blob is shared by digest. When a run is deleted, each text its model steps referred to is
-- deleted too unless another step still refers to it: these answer that with one index probe per
-- digest instead of a scan of every step. Few distinct values, so btree deduplication keeps them small.
CREATE INDEX run_step_system_digest_idx ON run_step ((request ->> 'systemDigest')) WHERE kind = 'MODEL';
CREATE INDEX run_step_tools_digest_idx ON run_step ((request ->> 'toolsDigest')) WHERE kind = 'MODEL';

-- A worker keeps the digests of its agent's texts in memory and refers to them in every model step it
-- writes. When the last step referring to one is deleted, the text goes with it; the deletion is
-- announced (payload: the digest) so a worker serving that text stores it again.
CREATE FUNCTION content_blob_notify_deleted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('durable_agent_blob_deleted', OLD.digest);
    RETURN NULL;
END $$;

CREATE TRIGGER content_blob_deleted AFTER DELETE ON content_blob
    FOR EACH ROW EXECUTE FUNCTION content_blob_notify_deleted();

-- API keys. The key itself is shown once, when it is created; only its SHA-256 is kept (a key is 32
-- random bytes, so a fast hash is enough: there is nothing to guess). Revoked keys stay, so a key id
-- in an old log line still says whose it was, and so "any key exists" never turns back to false.
CREATE TABLE api_key (
    id           text PRIMARY KEY,
    tenant       text NOT NULL,
    label        text,
    hash         text NOT NULL UNIQUE,
    created_at   timestamptz NOT NULL DEFAULT now(),
    revoked_at   timestamptz,
    -- Written at most once a minute per key, so a busy key does not turn every request into a write.
    last_used_at timestamptz
);
