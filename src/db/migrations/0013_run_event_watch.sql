-- Live events are announced only for runs somebody reads. A NOTIFY holds a database-wide lock from
-- its transaction's commit start to its end, so announcing every checkpoint of every run made all
-- checkpoints commit one at a time (measured: 100 runs in flight spent most of their time waiting
-- for that lock). An API process's event hub registers the runs its readers follow; the rows expire
-- unless the hub renews them, so a hub that died stops costing within minutes.
CREATE TABLE run_event_watch (
    run_id     uuid        NOT NULL REFERENCES run (id) ON DELETE CASCADE,
    -- The hub (one per API process) that follows the run.
    watcher    uuid        NOT NULL,
    expires_at timestamptz NOT NULL,
    PRIMARY KEY (run_id, watcher)
);

-- One probe of the primary key per statement that adds events; a run nobody reads costs no NOTIFY.
CREATE OR REPLACE FUNCTION run_event_notify() RETURNS trigger LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN
    PERFORM pg_notify('durable_agent_run_event', a.run_id::text || ' ' || max(a.id)::text)
    FROM added a
    WHERE EXISTS (SELECT 1 FROM run_event_watch w WHERE w.run_id = a.run_id AND w.expires_at > now())
    GROUP BY a.run_id;
    RETURN NULL;
END $$;
