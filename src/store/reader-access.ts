/**
 * Whether the open event streams of an API process may go on: of the keys they were opened with,
 * those that no longer work (revoked, or gone), and of the runs they follow, those deleted. One
 * statement for every stream of the process. The event hub hears of both at once through
 * notifications (migration 0017); it asks here after its LISTEN connection reconnects and on its slow
 * poll, for what a lost notification did not tell it.
 */
import type pg from 'pg';
import type { RunId } from '../domain/types.ts';
import type { SchemaOption, SchemaSql } from '../db/schema.ts';
import { SchemaStore } from './schema-store.ts';

export interface LostAccess {
  keys: string[];
  runs: RunId[];
}

const readerAccessSql = (schema: SchemaSql) => ({
  LOST: `SELECT k.id AS key, NULL::uuid AS run FROM unnest($1::text[]) AS k (id)
       WHERE NOT EXISTS (SELECT 1 FROM ${schema}.api_key a WHERE a.id = k.id AND a.revoked_at IS NULL)
       UNION ALL
       SELECT NULL, r.id FROM unnest($2::uuid[]) AS r (id)
       WHERE NOT EXISTS (SELECT 1 FROM ${schema}.run WHERE run.id = r.id)`,
});

export class ReaderAccess extends SchemaStore<Pick<pg.Pool, 'query'>, ReturnType<typeof readerAccessSql>> {
  constructor(db: Pick<pg.Pool, 'query'>, opts: SchemaOption = {}) {
    super(db, readerAccessSql, opts);
  }

  async lost(keyIds: readonly string[], runIds: readonly RunId[]): Promise<LostAccess> {
    if (keyIds.length === 0 && runIds.length === 0) return { keys: [], runs: [] };
    const { rows } = await this.db.query<{ key: string | null; run: RunId | null }>(this.sql.LOST, [keyIds, runIds]);
    return {
      keys: rows.flatMap((r) => (r.key === null ? [] : [r.key])),
      runs: rows.flatMap((r) => (r.run === null ? [] : [r.run])),
    };
  }
}
