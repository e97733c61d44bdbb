/**
 * The keys a database's values are sealed with (table encryption_key: ids only), checked at start,
 * and the rotation that seals every stored payload with the newest key.
 */
import type pg from 'pg';
import type { ContentBlock } from '../domain.ts';
import { EncryptionError } from '../errors.ts';
import type { FieldSealer, Sealer } from './encryption.ts';
import { sealBlocks, sealEventData, sealToolCalls } from './sealed-columns.ts';

/**
 * Refuses a process that could not read what the database holds (no key, or not every key listed),
 * then records the key it seals with, before anything is written under it.
 */
export async function checkEncryptionKeys(db: Pick<pg.Pool, 'query'>, sealer: Sealer): Promise<void> {
  const missing = (await storedKeyIds(db)).filter((id) => !sealer.keyIds.includes(id));
  if (missing.length > 0) {
    throw new EncryptionError(
      sealer.enabled
        ? `this database holds values encrypted with key${missing.length > 1 ? 's' : ''} ${missing.join(', ')}, which ENCRYPTION_KEYS does not have: add ${missing.length > 1 ? 'them' : 'it'} (id:key) to read ${missing.length > 1 ? 'them' : 'it'}`
        : `this database holds encrypted values (key${missing.length > 1 ? 's' : ''} ${missing.join(', ')}): set ENCRYPTION_KEY or ENCRYPTION_KEYS to start`,
    );
  }
  if (sealer.keyId !== null) {
    await db.query('INSERT INTO durable_agent.encryption_key (id) VALUES ($1) ON CONFLICT (id) DO NOTHING', [sealer.keyId]);
  }
}

/** The key ids the database's values may be encrypted with. */
export async function storedKeyIds(db: Pick<pg.Pool, 'query'>): Promise<string[]> {
  const { rows } = await db.query<{ id: string }>('SELECT id FROM durable_agent.encryption_key ORDER BY added_at, id');
  return rows.map((r) => r.id);
}

/** What a rotation did, table by table. */
export interface RotationReport {
  keyId: string;
  /** Rows read, rows written again, and rows left as a concurrent write made them, per table. */
  tables: Record<string, { read: number; rewritten: number; changedMeanwhile: number }>;
  /** Key ids no longer listed: no value uses them now. */
  retired: string[];
}

/** One table's payload columns: how its rows are read in key order, and each row sealed anew. */
interface Walk {
  table: string;
  key: string[];
  columns: string[];
  /** The row's payload columns as the newest key would store them. */
  reseal(row: Record<string, unknown>, s: FieldSealer): Record<string, unknown>;
}

const text = (s: FieldSealer, v: unknown) => (typeof v === 'string' ? s.text(v) : v);
const jsonText = (v: unknown, f: (parsed: never) => unknown) => (typeof v === 'string' ? JSON.stringify(f(JSON.parse(v) as never)) : v);

const WALKS: readonly Walk[] = [
  {
    table: 'run',
    key: ['id'],
    columns: ['input', 'output', 'error', 'last_error', 'metadata', 'waiting'],
    reseal: (r, s) => ({
      input: text(s, r.input),
      output: text(s, r.output),
      error: text(s, r.error),
      last_error: text(s, r.last_error),
      metadata: r.metadata == null ? r.metadata : JSON.stringify(s.json(r.metadata)),
      waiting:
        r.waiting == null
          ? r.waiting
          : JSON.stringify({ ...(r.waiting as object), toolCalls: sealToolCalls(s, ((r.waiting as { toolCalls?: { input?: unknown }[] }).toolCalls ?? [])) }),
    }),
  },
  {
    table: 'run_step',
    key: ['run_id', 'seq'],
    columns: ['kind', 'response'],
    reseal: (r, s) => ({
      kind: r.kind,
      response: r.kind === 'MODEL' ? jsonText(r.response, (blocks: ContentBlock[]) => sealBlocks(s, blocks)) : text(s, r.response),
    }),
  },
  {
    table: 'run_event',
    key: ['run_id', 'id'],
    columns: ['data'],
    reseal: (r, s) => ({ data: jsonText(r.data, (data: object) => sealEventData(s, data)) }),
  },
  {
    table: 'tool_decision',
    key: ['run_id', 'tool_use_id', 'kind'],
    columns: ['reason', 'result'],
    reseal: (r, s) => ({ reason: text(s, r.reason), result: text(s, r.result) }),
  },
  { table: 'content_blob', key: ['digest'], columns: ['body'], reseal: (r, s) => ({ body: text(s, r.body) }) },
];

/** How each column is read as text (json and jsonb as their JSON text, so a rewrite can be compared). */
const asText = (c: string) => `${c}::text AS ${c}`;

/**
 * Seals every stored payload with the sealer's key, `batchSize` rows a transaction, in key order.
 * A row changed meanwhile (a worker wrote it) is left as that write made it: every running process
 * must already seal with the new key (it is first in their ENCRYPTION_KEYS) before a rotation starts.
 * Then the ids no value uses any more are removed from encryption_key.
 */
export async function rotateEncryption(db: pg.Pool, sealer: Sealer, batchSize = 500, onBatch?: (table: string, done: number) => void): Promise<RotationReport> {
  if (sealer.keyId === null) throw new EncryptionError('encryption rotate needs ENCRYPTION_KEY or ENCRYPTION_KEYS (the first key seals)');
  await checkEncryptionKeys(db, sealer);
  const report: RotationReport = { keyId: sealer.keyId, tables: {}, retired: [] };
  for (const walk of WALKS) {
    const counts = (report.tables[walk.table] = { read: 0, rewritten: 0, changedMeanwhile: 0 });
    const keyList = walk.key.join(', ');
    let after: unknown[] | null = null as unknown[] | null;
    for (;;) {
      const params: unknown[] = [batchSize];
      const where: string = after === null ? '' : `WHERE (${keyList}) > (${walk.key.map((_, i) => `$${i + 2}`).join(', ')})`;
      if (after) params.push(...after);
      const { rows }: { rows: Record<string, unknown>[] } = await db.query<Record<string, unknown>>(
        `SELECT ${walk.key.map(asText).join(', ')}, ${walk.columns.map(asText).join(', ')}
         FROM durable_agent.${walk.table} ${where} ORDER BY ${keyList} LIMIT $1`,
        params,
      );
      if (rows.length === 0) break;
      counts.read += rows.length;
      const changed = rows.flatMap((row) => {
        const parsed = { ...row, metadata: parseJson(row.metadata), waiting: parseJson(row.waiting) };
        const next = walk.reseal(walk.table === 'run' ? parsed : row, sealer.resealing);
        const writes = walk.columns.filter((c) => c !== 'kind' && !sameStored(row[c], next[c]));
        return writes.length ? [{ row, next, writes }] : [];
      });
      for (const { row, next, writes } of changed) {
        // Compared with what was read: a value written meanwhile is not overwritten.
        const sets = writes.map((c, i) => `${c} = $${i + 1}`).join(', ');
        const keyParams = walk.key.map((k) => row[k]);
        const keyWhere = walk.key.map((k, i) => `${k} = $${writes.length + i + 1}`).join(' AND ');
        const same = writes.map((c, i) => `${c}::text IS NOT DISTINCT FROM $${writes.length + walk.key.length + i + 1}`).join(' AND ');
        const { rowCount } = await db.query(
          `UPDATE durable_agent.${walk.table} SET ${sets} WHERE ${keyWhere} AND ${same}`,
          [...writes.map((c) => next[c]), ...keyParams, ...writes.map((c) => row[c])],
        );
        if (rowCount) counts.rewritten += 1;
        else counts.changedMeanwhile += 1;
      }
      after = walk.key.map((k) => rows.at(-1)![k]);
      onBatch?.(walk.table, counts.read);
    }
  }
  const { rows } = await db.query<{ id: string }>('DELETE FROM durable_agent.encryption_key WHERE id <> $1 RETURNING id', [sealer.keyId]);
  report.retired = rows.map((r) => r.id);
  return report;
}

/** Whether a column read as text (`stored`) already holds `next`: JSON compared as JSON, key order kept. */
function sameStored(stored: unknown, next: unknown): boolean {
  if (stored === next) return true;
  if (typeof stored !== 'string' || typeof next !== 'string') return false;
  try {
    return JSON.stringify(JSON.parse(stored)) === next;
  } catch {
    return false;
  }
}

function parseJson(v: unknown): unknown {
  return typeof v === 'string' ? (JSON.parse(v) as unknown) : v;
}
