-- The keys that values of this database have been encrypted with (ids only, never the keys). A process
-- with ENCRYPTION_KEY(S) adds its newest key's id before it writes anything; `encryption rotate` removes
-- the ids no value uses any more. A process without the keys it lists refuses to start: it could not
-- read those values, and would write plain ones beside them.
CREATE TABLE encryption_key (
    id       text PRIMARY KEY,
    added_at timestamptz NOT NULL DEFAULT now()
);
