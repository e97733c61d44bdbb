/**
 * The keys a database's values are sealed with (table encryption_key: ids only), checked at start,
 * and the rotation that seals every stored payload with the newest key.
 */
import type pg from 'pg';
import type { ContentBlock } from '../domain/types.ts';
import { EncryptionError } from '../domain/errors.ts';
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
  /** Older key ids some value still uses (rows a worker kept writing under them): run the rotation again. */
  stillUsed: string[];
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
          : JSON.stringify({
              ...(r.waiting as object),
              toolCalls: sealToolCalls(s, (r.waiting as { toolCalls?: { input?: unknown }[] }).toolCalls ?? []),
            }),
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

/** How a payload column is read: as text (json and jsonb as their JSON text, so a rewrite can be compared). */
const asText = (c: string) => `${c}::text AS ${c}`;

/** How often a row a worker keeps writing is read again and sealed anew before it is left as it is. */
const ROW_TRIES = 5;

/**
 * Seals every stored payload with the sealer's key, reading `batchSize` rows at a time in key order
 * (each row is written by its own statement). A row written meanwhile (by a worker) is read again
 * and sealed anew; every running process must already seal with the new key (it is first in their
 * ENCRYPTION_KEYS) before a rotation starts. Then each older key id that no stored value uses any
 * more, as a last scan shows, is removed from encryption_key.
 */
export async function rotateEncryption(
  db: pg.Pool,
  sealer: Sealer,
  batchSize = 500,
  onBatch?: (table: string, done: number) => void,
): Promise<RotationReport> {
  if (sealer.keyId === null) throw new EncryptionError('encryption rotate needs ENCRYPTION_KEY or ENCRYPTION_KEYS (the first key seals)');
  await checkEncryptionKeys(db, sealer);
  const report: RotationReport = { keyId: sealer.keyId, tables: {}, retired: [], stillUsed: [] };
  for (const walk of WALKS) {
    const counts = (report.tables[walk.table] = { read: 0, rewritten: 0, changedMeanwhile: 0 });
    const keyList = walk.key.join(', ');
    const select = `SELECT ${keyList}, ${walk.columns.map(asText).join(', ')} FROM durable_agent.${walk.table}`;
    const byKey = walk.key.map((k, i) => `${k} = $${i + 1}`).join(' AND ');
    let after: unknown[] | null = null;
    for (;;) {
      const cursor: string = after === null ? '' : `WHERE (${keyList}) > (${walk.key.map((_, i) => `$${i + 2}`).join(', ')})`;
      const batch: pg.QueryResult<Record<string, unknown>> = await db.query<Record<string, unknown>>(
        `${select} ${cursor} ORDER BY ${keyList} LIMIT $1`,
        [batchSize, ...(after ?? [])],
      );
      if (batch.rows.length === 0) break;
      counts.read += batch.rows.length;
      for (let row of batch.rows) {
        for (let tries = 1; ; tries++) {
          const outcome = await resealRow(db, walk, row, sealer);
          if (outcome === 'current') break;
          if (outcome === 'written') {
            counts.rewritten += 1;
            break;
          }
          // Written meanwhile: read it again, unless it is gone or keeps changing.
          const again = await db.query<Record<string, unknown>>(
            `${select} WHERE ${byKey}`,
            walk.key.map((k) => row[k]),
          );
          if (!again.rows[0]) break;
          if (tries >= ROW_TRIES) {
            counts.changedMeanwhile += 1;
            break;
          }
          row = again.rows[0];
        }
      }
      const last: Record<string, unknown> = batch.rows.at(-1)!;
      after = walk.key.map((k) => last[k]);
      onBatch?.(walk.table, counts.read);
    }
  }
  for (const id of await storedKeyIds(db)) {
    if (id === sealer.keyId) continue;
    if (await keyInUse(db, id)) {
      report.stillUsed.push(id);
    } else {
      await db.query('DELETE FROM durable_agent.encryption_key WHERE id = $1', [id]);
      report.retired.push(id);
    }
  }
  return report;
}

/** Writes `row`'s payload columns as the sealer's key would store them, unless a write came first. */
async function resealRow(
  db: pg.Pool,
  walk: Walk,
  row: Record<string, unknown>,
  sealer: Sealer,
): Promise<'current' | 'written' | 'changed'> {
  const parsed = walk.table === 'run' ? { ...row, metadata: parseJson(row.metadata), waiting: parseJson(row.waiting) } : row;
  const next = walk.reseal(parsed, sealer.resealing);
  const writes = walk.columns.filter((c) => c !== 'kind' && !sameStored(row[c], next[c]));
  if (writes.length === 0) return 'current';
  const n = writes.length;
  const { rowCount } = await db.query(
    `UPDATE durable_agent.${walk.table} SET ${writes.map((c, i) => `${c} = $${i + 1}`).join(', ')}
     WHERE ${walk.key.map((k, i) => `${k} = $${n + i + 1}`).join(' AND ')}
       AND ${writes.map((c, i) => `${c}::text IS NOT DISTINCT FROM $${n + walk.key.length + i + 1}`).join(' AND ')}`,
    [...writes.map((c) => next[c]), ...walk.key.map((k) => row[k]), ...writes.map((c) => row[c])],
  );
  return rowCount ? 'written' : 'changed';
}

/** Whether any payload column still holds a value sealed with key `id`. */
async function keyInUse(db: pg.Pool, id: string): Promise<boolean> {
  const pattern = `%da.enc:1:_:${id.replace(/[\\%_]/g, (c) => `\\${c}`)}:%`;
  for (const walk of WALKS) {
    const columns = walk.columns.filter((c) => c !== 'kind');
    const { rows } = await db.query<{ used: boolean }>(
      `SELECT EXISTS (SELECT 1 FROM durable_agent.${walk.table} WHERE ${columns.map((c) => `${c}::text LIKE $1`).join(' OR ')}) AS used`,
      [pattern],
    );
    if (rows[0]?.used) return true;
  }
  return false;
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
