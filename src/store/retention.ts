/**
 * Deleting runs: one on request (DELETE /api/runs/{id}, `runs delete`), or every finished run older
 * than a cutoff (RETENTION_DAYS, `runs purge`). A run goes with everything that is only its own, in
 * one statement (one transaction): its row, its steps and events (ON DELETE CASCADE), and each shared
 * text of `content_blob` that no remaining step refers to.
 *
 * content_blob is shared by digest (an agent's prompt and tools, once for all its runs). The digests a
 * deleted run's model steps named are the only candidates, and whether another step still names one
 * is an index probe (run_step_*_digest_idx) that stops at the first step of another run, never a
 * scan of the steps.
 *
 * Saved workspace contents (workspace_blob) go the same way: those the deleted runs' files referred to
 * and no other run's do, unless a save touched them within CONTENT_GRACE_MS (it may be about to refer to
 * one); what is left is taken by the sweep (workspace-files.ts).
 *
 * A run that a later run continues (previousRunId) is deleted only after it: explicitly, the delete is
 * refused until the later one is gone; by age, it goes in a later batch than the runs continuing it.
 *
 * A purge takes its runs in small batches with FOR UPDATE SKIP LOCKED: each batch is a short
 * transaction, rows another purge holds are skipped rather than waited for, and a live run's row is
 * never touched (only finished runs qualify), so workers claiming and checkpointing are not held up.
 */
import type pg from 'pg';
import { TERMINAL_STATUSES, type RunId, type RunStatus } from '../domain/types.ts';
import { ConflictError, NotFoundError } from '../domain/errors.ts';
import type { SchemaOption, SchemaSql } from '../db/schema.ts';
import { SchemaStore } from './schema-store.ts';
import { CONTENT_GRACE_MS } from './workspace-files.ts';

const TERMINAL = TERMINAL_STATUSES.map((s) => `'${s}'`).join(', ');

/** `gone` (the deleted runs' ids) → the blobs only they referred to, deleted; appended to a statement's CTEs. */
const withBlobs = (schema: SchemaSql) => `
  digests AS (
    SELECT DISTINCT d.digest
    FROM ${schema}.run_step s JOIN gone ON gone.id = s.run_id,
         LATERAL (VALUES (s.request ->> 'systemDigest'), (s.request ->> 'toolsDigest')) AS d (digest)
    WHERE s.kind = 'MODEL' AND d.digest IS NOT NULL),
  blobs AS (
    DELETE FROM ${schema}.content_blob b USING digests
    WHERE b.digest = digests.digest
      AND NOT EXISTS (
        SELECT 1 FROM ${schema}.run_step o
        WHERE o.kind = 'MODEL' AND (o.request ->> 'systemDigest') = digests.digest AND o.run_id NOT IN (SELECT id FROM gone))
      AND NOT EXISTS (
        SELECT 1 FROM ${schema}.run_step o
        WHERE o.kind = 'MODEL' AND (o.request ->> 'toolsDigest') = digests.digest AND o.run_id NOT IN (SELECT id FROM gone))
    RETURNING b.digest),
  file_digests AS (
    SELECT DISTINCT f.sha256 FROM ${schema}.run_file f JOIN gone ON gone.id = f.run_id WHERE f.sha256 IS NOT NULL),
  file_blobs AS (
    DELETE FROM ${schema}.workspace_blob b USING file_digests d
    WHERE b.sha256 = d.sha256 AND b.touched_at < now() - interval '${CONTENT_GRACE_MS} milliseconds'
      AND NOT EXISTS (
        SELECT 1 FROM ${schema}.run_file o WHERE o.sha256 = d.sha256 AND o.run_id NOT IN (SELECT id FROM gone))
    RETURNING b.sha256)`;

export interface Deleted {
  runs: number;
  /** Shared texts deleted because no remaining step refers to them. */
  blobs: number;
  /** Saved workspace contents deleted because no remaining step refers to them. */
  fileContents: number;
}

export interface PurgeOptions {
  /** Only this tenant's runs; every tenant's when absent. */
  tenant?: string | null;
  /** Runs per batch (one transaction each). Default 500. */
  batchSize?: number;
  /** Stops between batches when aborted. */
  signal?: AbortSignal;
  /** Called after each batch that deleted something. */
  onBatch?: (batch: Deleted) => void;
}

const retentionSql = (schema: SchemaSql) => ({
  DELETE_RUN: `WITH target AS (
         SELECT id, status, EXISTS (SELECT 1 FROM ${schema}.run c WHERE c.previous_run_id = run.id) AS continued
         FROM ${schema}.run WHERE id = $1 AND ($2::text IS NULL OR tenant = $2) FOR UPDATE),
       forks AS (SELECT count(*)::int AS n FROM ${schema}.run WHERE forked_from_run_id = $1),
       gone AS (
         DELETE FROM ${schema}.run r USING target
         WHERE r.id = target.id AND target.status IN (${TERMINAL}) AND NOT target.continued AND (SELECT n FROM forks) = 0
         RETURNING r.id),
       ${withBlobs(schema)}
       SELECT (SELECT status FROM target) AS status, (SELECT continued FROM target) AS continued, (SELECT n FROM forks) AS forks,
              (SELECT count(*) FROM gone)::int AS runs, (SELECT count(*) FROM blobs)::int AS blobs,
              (SELECT count(*) FROM file_blobs)::int AS file_contents`,
  PURGE_BATCH: `WITH doomed AS (
         SELECT id FROM ${schema}.run
         WHERE status IN (${TERMINAL}) AND finished_at < $1 AND ($3::text IS NULL OR tenant = $3)
           -- A run another continues (previousRunId) or forks goes after it (a later batch): a conversation never loses its start.
           AND NOT EXISTS (SELECT 1 FROM ${schema}.run c WHERE c.previous_run_id = run.id OR c.forked_from_run_id = run.id)
         ORDER BY finished_at
         LIMIT $2
         FOR UPDATE SKIP LOCKED),
       gone AS (
         DELETE FROM ${schema}.run r USING doomed WHERE r.id = doomed.id RETURNING r.id),
       ${withBlobs(schema)}
       SELECT (SELECT count(*) FROM gone)::int AS runs, (SELECT count(*) FROM blobs)::int AS blobs,
              (SELECT count(*) FROM file_blobs)::int AS file_contents`,
});

export class RunDeletion extends SchemaStore<Pick<pg.Pool, 'query'>, ReturnType<typeof retentionSql>> {
  constructor(db: Pick<pg.Pool, 'query'>, opts: SchemaOption = {}) {
    super(db, retentionSql, opts);
  }

  /**
   * Deletes a finished run and everything only it refers to. NotFoundError when there is no such run
   * (or it is not `tenant`'s), ConflictError while it is QUEUED or RUNNING: it must be cancelled first.
   */
  async deleteRun(id: RunId, tenant: string | null = null): Promise<Deleted> {
    // A run's later conversation (a follow-up by previousRunId, or a fork) reads its steps: they must outlive it.
    const { rows } = await this.db.query<{
      status: RunStatus | null;
      continued: boolean | null;
      forks: number;
      runs: number;
      blobs: number;
      file_contents: number;
    }>(this.sql.DELETE_RUN, [id, tenant]);
    const r = rows[0]!;
    if (r.status === null) throw new NotFoundError(`run ${id} not found`);
    if (r.continued) throw new ConflictError(`run ${id} is continued by a later run (previousRunId): delete that one first`);
    if (r.forks > 0 && r.runs === 0)
      throw new ConflictError(`run ${id} has ${r.forks} fork(s) that continue from its steps: delete them first`);
    if (r.runs === 0) throw new ConflictError(`run ${id} is ${r.status}: cancel it first, then delete it once it has finished`);
    return { runs: r.runs, blobs: r.blobs, fileContents: r.file_contents };
  }

  /** One batch of finished runs that finished before `cutoff`, oldest first; rows other sessions hold are skipped. */
  async purgeBatch(cutoff: Date, batchSize: number, tenant: string | null = null): Promise<Deleted> {
    const { rows } = await this.db.query<{ runs: number; blobs: number; file_contents: number }>(this.sql.PURGE_BATCH, [
      cutoff,
      batchSize,
      tenant,
    ]);
    const r = rows[0]!;
    return { runs: r.runs, blobs: r.blobs, fileContents: r.file_contents };
  }

  /** Every finished run that finished before `cutoff`, batch after batch until none is left. */
  async purge(cutoff: Date, opts: PurgeOptions = {}): Promise<Deleted> {
    const batchSize = opts.batchSize ?? 500;
    const total: Deleted = { runs: 0, blobs: 0, fileContents: 0 };
    for (;;) {
      opts.signal?.throwIfAborted();
      const batch = await this.purgeBatch(cutoff, batchSize, opts.tenant ?? null);
      total.runs += batch.runs;
      total.blobs += batch.blobs;
      total.fileContents += batch.fileContents;
      if (batch.runs > 0) opts.onBatch?.(batch);
      // Nothing left: the rest is gone, or held by another purge that will finish it. (A short batch
      // is not the end: the runs it deleted may have been all that kept their earlier runs.)
      if (batch.runs === 0) return total;
    }
  }
}
