/**
 * Workspaces as stored (migration 0020): contents in workspace_blob by digest, what each step changed
 * in run_file. The step's changes are written with its checkpoint (step-batch-sql.ts); here are the
 * contents, written before it, and the reads: a workspace as of a step, through the runs a run continues
 * (a fork sees its source's files up to the fork's step, a follow-up its previous run's last ones).
 */
import type pg from 'pg';
import type { RunId } from '../domain/types.ts';
import type { FileBlob, FileChange, FileEntry, FileKind, WorkspaceStore } from '../ports/workspace.ts';
import { NO_ENCRYPTION, type Sealer } from './encryption.ts';
import { lineageSql } from './lineage-sql.ts';
import type { SchemaOption, SchemaSql } from '../db/schema.ts';
import { SchemaStore } from './schema-store.ts';

interface FileRow {
  path: string;
  kind: FileKind | 'deleted';
  mode: number;
  size: string | number;
  sha256: string | null;
  target: string | null;
}

/**
 * @unit milliseconds — a saved content no step refers to is kept this long after a save last touched
 * it when its run is deleted: its step's checkpoint, which refers to it, commits after the content is
 * saved (moments later; this leaves room for a save of a whole workspace on a slow link).
 */
export const CONTENT_GRACE_MS = 3_600_000;
/** @unit milliseconds — the sweep takes a content no step refers to once no save touched it for this long. */
export const SWEEP_GRACE_MS = 86_400_000;

const FILE_COLUMNS = 'f.path, f.kind, f.mode, f.size, f.sha256, f.target';

/** The statements of workspace-files.ts for `schema`. */
function workspaceFilesSql(schema: SchemaSql) {
  const { lineage, LINEAGE } = lineageSql(schema);
  /**
   * The latest row of each path of run $1's workspace at or before step $2 (null: its latest step),
   * deleted paths included; with `onePath`, of path $3 only. The run's own log (part 0) is cut at $2;
   * the conversations it continues are taken whole, as they ended.
   */
  const latest = (onePath: boolean) => `WITH RECURSIVE ${lineage('conversation')}
  SELECT DISTINCT ON (f.path) ${FILE_COLUMNS}
  FROM lineage l JOIN ${schema}.run_file f
    ON f.run_id = l.run_id AND f.seq > l.own_from AND f.seq <= l.upto AND (l.part > 0 OR $2::int IS NULL OR f.seq <= $2::int)
  ${onePath ? 'WHERE f.path = $3' : ''}
  ORDER BY f.path, l.part, f.seq DESC`;
  return {
    MANIFEST: `SELECT * FROM (${latest(false)}) w WHERE kind <> 'deleted' ORDER BY path COLLATE "C"`,
    ONE_FILE: latest(true),
    /** What step $2 of run $1's log changed (its own step, or one a fork inherits). */
    STEP_CHANGES: `WITH RECURSIVE ${LINEAGE}
  SELECT ${FILE_COLUMNS} FROM lineage l
  JOIN ${schema}.run_file f ON f.run_id = l.run_id AND f.seq > l.own_from AND f.seq <= l.upto AND f.seq = $2
  ORDER BY f.path COLLATE "C"`,
    PUT_BLOBS: `INSERT INTO ${schema}.workspace_blob (sha256, size, content, key_id)
       SELECT * FROM unnest($1::text[], $2::bigint[], $3::bytea[], $4::text[])
       ON CONFLICT (sha256) DO UPDATE SET touched_at = now()`,
    BLOBS: `SELECT sha256, content, key_id FROM ${schema}.workspace_blob WHERE sha256 = ANY ($1::text[])`,
    SWEEP: `DELETE FROM ${schema}.workspace_blob b
       WHERE b.sha256 IN (
         SELECT o.sha256 FROM ${schema}.workspace_blob o
         WHERE o.touched_at < now() - $2 * interval '1 millisecond'
           AND NOT EXISTS (SELECT 1 FROM ${schema}.run_file f WHERE f.sha256 = o.sha256)
         LIMIT $1
         FOR UPDATE SKIP LOCKED)
         AND b.touched_at < now() - $2 * interval '1 millisecond'`,
  };
}

const toEntry = (r: FileRow): FileEntry => ({
  path: r.path,
  kind: r.kind as FileKind,
  mode: r.mode,
  size: Number(r.size),
  sha256: r.sha256,
  target: r.target,
});

const toChange = (r: FileRow): FileChange => (r.kind === 'deleted' ? { path: r.path, kind: 'deleted' } : toEntry(r));

/** A step's changes as the checkpoint's JSON parameter gives them to run_file (step-batch-sql.ts). */
export function fileRows(changes: readonly FileChange[]): object[] {
  return changes.map((c) =>
    c.kind === 'deleted'
      ? { path: c.path, kind: 'deleted', mode: 0, size: 0, sha256: null, target: null }
      : { path: c.path, kind: c.kind, mode: c.mode, size: c.size, sha256: c.sha256, target: c.target },
  );
}

export interface WorkspaceFilesOptions extends SchemaOption {
  /** Seals contents as they are saved, opens them as they are read; plain without a key. */
  sealer?: Sealer;
}

export class WorkspaceFiles extends SchemaStore<Pick<pg.Pool, 'query'>, ReturnType<typeof workspaceFilesSql>> implements WorkspaceStore {
  private readonly sealer: Sealer;

  constructor(db: Pick<pg.Pool, 'query'>, opts: WorkspaceFilesOptions = {}) {
    super(db, workspaceFilesSql, opts);
    this.sealer = opts.sealer ?? NO_ENCRYPTION;
  }

  async putBlobs(blobs: readonly FileBlob[]): Promise<void> {
    if (blobs.length === 0) return;
    const sealed = blobs.map((b) => this.sealer.bytes(b.content));
    await this.db.query(this.sql.PUT_BLOBS, [
      blobs.map((b) => b.sha256),
      blobs.map((b) => b.content.length),
      sealed.map((s) => s.content),
      sealed.map((s) => s.keyId),
    ]);
  }

  async manifest(runId: RunId, atSeq: number | null = null): Promise<FileEntry[]> {
    const { rows } = await this.db.query<FileRow>(this.sql.MANIFEST, [runId, atSeq]);
    return rows.map(toEntry);
  }

  async blobs(sha256s: readonly string[]): Promise<Map<string, Buffer>> {
    const { rows } = await this.db.query<{ sha256: string; content: Buffer; key_id: string | null }>(this.sql.BLOBS, [sha256s]);
    return new Map(rows.map((r) => [r.sha256, this.sealer.openBytes(r.content, r.key_id)]));
  }

  /** What step `seq` of the run's log changed, deletions included. */
  async stepChanges(runId: RunId, seq: number): Promise<FileChange[]> {
    const { rows } = await this.db.query<FileRow>(this.sql.STEP_CHANGES, [runId, seq]);
    return rows.map(toChange);
  }

  /** One path of the workspace as of step `atSeq` (null: the latest), with its content when it is a file; null when not there. */
  async file(runId: RunId, path: string, atSeq: number | null = null): Promise<{ entry: FileEntry; content: Buffer | null } | null> {
    const { rows } = await this.db.query<FileRow>(this.sql.ONE_FILE, [runId, atSeq, path]);
    const row = rows[0];
    if (!row || row.kind === 'deleted') return null;
    const entry = toEntry(row);
    if (entry.kind !== 'file') return { entry, content: null };
    const content = (await this.blobs([entry.sha256!])).get(entry.sha256!);
    return { entry, content: content ?? null };
  }

  /**
   * Deletes up to `limit` contents no step refers to that no save touched in the last `graceMs`: what
   * a crashed step saved before its checkpoint, what a deletion left to it. Returns how many went.
   */
  async sweep(limit = 1000, graceMs = SWEEP_GRACE_MS): Promise<number> {
    const { rowCount } = await this.db.query(this.sql.SWEEP, [limit, graceMs]);
    return rowCount ?? 0;
  }
}
