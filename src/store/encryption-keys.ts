/**
 * The keys a database's values are sealed with (table encryption_key: ids only), checked at start,
 * and the rotation that seals every stored payload with the newest key.
 */
import type pg from 'pg';
import type { ContentBlock } from '../domain/types.ts';
import { EncryptionError } from '../domain/errors.ts';
import type { FieldSealer, Sealer } from './encryption.ts';
import { sealBlocks, sealEventData, sealToolCalls } from './sealed-columns.ts';
import type { SchemaOption, SchemaSql } from '../db/schema.ts';
import { SchemaStore } from './schema-store.ts';

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
    columns: ['kind', 'response', 'tool_input'],
    reseal: (r, s) => ({
      kind: r.kind,
      response: r.kind === 'MODEL' ? jsonText(r.response, (blocks: ContentBlock[]) => sealBlocks(s, blocks)) : text(s, r.response),
      // A TOOL step's input as its tool.started event carries it (migration 0023).
      tool_input: jsonText(r.tool_input, (input: unknown) => (sealEventData(s, { input }) as { input: unknown }).input),
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

/** The statements of the keys and of a rotation, their tables in `schema`. */
const encryptionKeysSql = (schema: SchemaSql) => ({
  ADD_KEY: `INSERT INTO ${schema}.encryption_key (id) VALUES ($1) ON CONFLICT (id) DO NOTHING`,
  KEY_IDS: `SELECT id FROM ${schema}.encryption_key ORDER BY added_at, id`,
  DELETE_KEY: `DELETE FROM ${schema}.encryption_key WHERE id = $1`,
  /** Workspace contents are bytes with their key id beside them (encryption.ts `bytes`), read and written one at a time. */
  FILES_NOT_UNDER: `SELECT sha256 FROM ${schema}.workspace_blob
    WHERE key_id IS DISTINCT FROM $1 AND sha256 > $2 ORDER BY sha256 LIMIT $3`,
  FILE: `SELECT content, key_id FROM ${schema}.workspace_blob WHERE sha256 = $1`,
  RESEAL_FILE: `UPDATE ${schema}.workspace_blob SET content = $1, key_id = $2 WHERE sha256 = $3 AND key_id IS NOT DISTINCT FROM $4`,
  FILES_UNDER: `SELECT EXISTS (SELECT 1 FROM ${schema}.workspace_blob WHERE key_id = $1) AS used`,
  /** Per table: its rows read, written again, and searched for a key id. */
  walks: WALKS.map((walk) => {
    const table = `${schema}.${walk.table}`;
    const keyList = walk.key.join(', ');
    const columns = walk.columns.filter((c) => c !== 'kind');
    const n = (i: number) => `$${i + 1}`;
    return {
      walk,
      keyList,
      select: `SELECT ${keyList}, ${walk.columns.map(asText).join(', ')} FROM ${table}`,
      byKey: walk.key.map((k, i) => `${k} = ${n(i)}`).join(' AND '),
      /** Sets the columns `writes` unless a write came first: their new values, then the key, then the values read. */
      update: (writes: readonly string[]) =>
        `UPDATE ${table} SET ${writes.map((c, i) => `${c} = ${n(i)}`).join(', ')}
     WHERE ${walk.key.map((k, i) => `${k} = ${n(writes.length + i)}`).join(' AND ')}
       AND ${writes.map((c, i) => `${c}::text IS NOT DISTINCT FROM ${n(writes.length + walk.key.length + i)}`).join(' AND ')}`,
      inUse: `SELECT EXISTS (SELECT 1 FROM ${table} WHERE ${columns.map((c) => `${c}::text LIKE $1`).join(' OR ')}) AS used`,
    };
  }),
});

type TableSql = ReturnType<typeof encryptionKeysSql>['walks'][number];

/** The key ids of a database (table encryption_key) and the rotation of its payloads to the newest key. */
export class EncryptionKeys extends SchemaStore<Pick<pg.Pool, 'query'>, ReturnType<typeof encryptionKeysSql>> {
  constructor(db: Pick<pg.Pool, 'query'>, opts: SchemaOption = {}) {
    super(db, encryptionKeysSql, opts);
  }

  /**
   * Refuses a process that could not read what the database holds (no key, or not every key listed),
   * then records the key it seals with, before anything is written under it.
   */
  async check(sealer: Sealer): Promise<void> {
    const missing = (await this.storedIds()).filter((id) => !sealer.keyIds.includes(id));
    if (missing.length > 0) {
      throw new EncryptionError(
        sealer.enabled
          ? `this database holds values encrypted with key${missing.length > 1 ? 's' : ''} ${missing.join(', ')}, which ENCRYPTION_KEYS does not have: add ${missing.length > 1 ? 'them' : 'it'} (id:key) to read ${missing.length > 1 ? 'them' : 'it'}`
          : `this database holds encrypted values (key${missing.length > 1 ? 's' : ''} ${missing.join(', ')}): set ENCRYPTION_KEY or ENCRYPTION_KEYS to start`,
      );
    }
    if (sealer.keyId !== null) await this.db.query(this.sql.ADD_KEY, [sealer.keyId]);
  }

  /** The key ids the database's values may be encrypted with. */
  async storedIds(): Promise<string[]> {
    const { rows } = await this.db.query<{ id: string }>(this.sql.KEY_IDS);
    return rows.map((r) => r.id);
  }

  /**
   * Seals every stored payload with the sealer's key, reading `batchSize` rows at a time in key order
   * (each row is written by its own statement). A row written meanwhile (by a worker) is read again
   * and sealed anew; every running process must already seal with the new key (it is first in their
   * ENCRYPTION_KEYS) before a rotation starts. Then each older key id that no stored value uses any
   * more, as a last scan shows, is removed from encryption_key.
   */
  async rotate(sealer: Sealer, batchSize = 500, onBatch?: (table: string, done: number) => void): Promise<RotationReport> {
    if (sealer.keyId === null) throw new EncryptionError('encryption rotate needs ENCRYPTION_KEY or ENCRYPTION_KEYS (the first key seals)');
    await this.check(sealer);
    const report: RotationReport = { keyId: sealer.keyId, tables: {}, retired: [], stillUsed: [] };
    for (const t of this.sql.walks) {
      const { walk, keyList, select, byKey } = t;
      const counts = (report.tables[walk.table] = { read: 0, rewritten: 0, changedMeanwhile: 0 });
      let after: unknown[] | null = null;
      for (;;) {
        const cursor: string = after === null ? '' : `WHERE (${keyList}) > (${walk.key.map((_, i) => `$${i + 2}`).join(', ')})`;
        const batch: pg.QueryResult<Record<string, unknown>> = await this.db.query<Record<string, unknown>>(
          `${select} ${cursor} ORDER BY ${keyList} LIMIT $1`,
          [batchSize, ...(after ?? [])],
        );
        if (batch.rows.length === 0) break;
        counts.read += batch.rows.length;
        for (let row of batch.rows) {
          for (let tries = 1; ; tries++) {
            const outcome = await this.resealRow(t, row, sealer);
            if (outcome === 'current') break;
            if (outcome === 'written') {
              counts.rewritten += 1;
              break;
            }
            // Written meanwhile: read it again, unless it is gone or keeps changing.
            const again = await this.db.query<Record<string, unknown>>(
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
    report.tables.workspace_blob = await this.rotateFiles(sealer, batchSize, onBatch);
    for (const id of await this.storedIds()) {
      if (id === sealer.keyId) continue;
      if (await this.keyInUse(id)) {
        report.stillUsed.push(id);
      } else {
        await this.db.query(this.sql.DELETE_KEY, [id]);
        report.retired.push(id);
      }
    }
    return report;
  }

  /** Writes `row`'s payload columns as the sealer's key would store them, unless a write came first. */
  private async resealRow(t: TableSql, row: Record<string, unknown>, sealer: Sealer): Promise<'current' | 'written' | 'changed'> {
    const { walk } = t;
    const parsed = walk.table === 'run' ? { ...row, metadata: parseJson(row.metadata), waiting: parseJson(row.waiting) } : row;
    const next = walk.reseal(parsed, sealer.resealing);
    const writes = walk.columns.filter((c) => c !== 'kind' && !sameStored(row[c], next[c]));
    if (writes.length === 0) return 'current';
    const { rowCount } = await this.db.query(t.update(writes), [
      ...writes.map((c) => next[c]),
      ...walk.key.map((k) => row[k]),
      ...writes.map((c) => row[c]),
    ]);
    return rowCount ? 'written' : 'changed';
  }

  /**
   * Seals every saved workspace content that is plain or under another key with the sealer's key. The
   * digest names the content, never changes: a row written meanwhile (a save only touches its time) is
   * sealed anew from what it holds now.
   */
  private async rotateFiles(sealer: Sealer, batchSize: number, onBatch?: (table: string, done: number) => void) {
    const counts = { read: 0, rewritten: 0, changedMeanwhile: 0 };
    let after = '';
    for (;;) {
      const { rows } = await this.db.query<{ sha256: string }>(this.sql.FILES_NOT_UNDER, [sealer.keyId, after, batchSize]);
      if (rows.length === 0) return counts;
      for (const { sha256 } of rows) {
        counts.read += 1;
        for (let tries = 1; ; tries++) {
          const found = (await this.db.query<{ content: Buffer; key_id: string | null }>(this.sql.FILE, [sha256])).rows[0];
          if (!found || found.key_id === sealer.keyId) break; // deleted, or sealed by a save meanwhile
          const sealed = sealer.bytes(sealer.openBytes(found.content, found.key_id));
          const { rowCount } = await this.db.query(this.sql.RESEAL_FILE, [sealed.content, sealed.keyId, sha256, found.key_id]);
          if (rowCount) {
            counts.rewritten += 1;
            break;
          }
          if (tries >= ROW_TRIES) {
            counts.changedMeanwhile += 1;
            break;
          }
        }
      }
      after = rows.at(-1)!.sha256;
      onBatch?.('workspace_blob', counts.read);
    }
  }

  /** Whether any payload column still holds a value sealed with key `id`. */
  private async keyInUse(id: string): Promise<boolean> {
    if ((await this.db.query<{ used: boolean }>(this.sql.FILES_UNDER, [id])).rows[0]?.used) return true;
    const pattern = `%da.enc:1:_:${id.replace(/[\\%_]/g, (c) => `\\${c}`)}:%`;
    for (const t of this.sql.walks) {
      const { rows } = await this.db.query<{ used: boolean }>(t.inUse, [pattern]);
      if (rows[0]?.used) return true;
    }
    return false;
  }
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
