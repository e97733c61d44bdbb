-- Workspaces: the files a run's tools work on, saved as they are made, so any worker can rebuild them.

-- File contents, shared by their SHA-256 (of the plain content). Sealed when encryption is on (key_id says
-- with which key; null: plain). touched_at is renewed whenever a step saves the content again, so a sweep
-- of contents no step refers to never takes one a checkpoint is about to refer to.
CREATE TABLE workspace_blob (
    sha256     text PRIMARY KEY,
    size       bigint NOT NULL,
    content    bytea NOT NULL,
    key_id     text,
    touched_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX workspace_blob_sealed_idx ON workspace_blob (key_id) WHERE key_id IS NOT NULL;

-- What each step changed: a path as it is after step `seq` (a file by its content's digest, a directory,
-- a symlink and its target), or `deleted`. Written in the same statement as the step's checkpoint. The
-- workspace as of step N is the latest row of each path at or before N (through the runs a run
-- continues: lineage-sql.ts). Paths stay plain under encryption: they are what the rows are found by.
CREATE TABLE run_file (
    run_id uuid    NOT NULL REFERENCES run (id) ON DELETE CASCADE,
    seq    integer NOT NULL,
    path   text    NOT NULL,
    kind   text    NOT NULL CHECK (kind IN ('file', 'dir', 'symlink', 'deleted')),
    mode   integer NOT NULL DEFAULT 0,
    size   bigint  NOT NULL DEFAULT 0,
    sha256 text,
    target text,
    PRIMARY KEY (run_id, seq, path),
    CHECK ((kind = 'file') = (sha256 IS NOT NULL)),
    CHECK ((kind = 'symlink') = (target IS NOT NULL))
);
-- Whether a content is still referred to (deletion, the sweep) is an index probe.
CREATE INDEX run_file_blob_idx ON run_file (sha256) WHERE sha256 IS NOT NULL;
