import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { inject } from 'vitest';
import { createPool } from '../../src/db/pool.ts';
import { BATCH_CONNECTIONS } from '../../src/runtime/connection-budget.ts';
import { RunRecords } from '../../src/store/run-records.ts';
import { RunStore } from '../../src/store/run-store.ts';
import { RunEvents, type StoredEvent } from '../../src/store/run-events.ts';
import type { RunId } from '../../src/domain/types.ts';
import type { Sealer } from '../../src/store/encryption.ts';

export interface TestDatabase {
  url: string;
  pool: pg.Pool;
  store: RunStore;
  /** What people and the API ask of runs (create, read, cancel, decide). */
  records: RunRecords;
  close(): Promise<void>;
}

/** A fresh database cloned from the migrated template: real PostgreSQL, isolated per test file. */
export async function testDatabase(): Promise<TestDatabase> {
  const adminUrl = inject('adminUrl');
  const name = `${inject('dbPrefix')}_${randomBytes(4).toString('hex')}`;
  const admin = new pg.Client({ connectionString: adminUrl });
  await admin.connect();
  for (let attempt = 1; ; attempt++) {
    try {
      await admin.query(`CREATE DATABASE ${pg.escapeIdentifier(name)} TEMPLATE ${pg.escapeIdentifier(inject('templateDb'))}`);
      break;
    } catch (e) {
      // 55006: another file is cloning the same template at this instant.
      if ((e as { code?: string }).code !== '55006' || attempt > 20) throw e;
      await new Promise((r) => setTimeout(r, 50 * attempt));
    }
  }
  const u = new URL(adminUrl);
  u.pathname = `/${name}`;
  const url = u.toString();
  const pool = createPool(url, 20);
  // As a worker's store has it (start-runtime.ts): the batched writes and the claim on generic plans.
  const batches = createPool(url, BATCH_CONNECTIONS, { genericPlans: true });
  return {
    url,
    pool,
    store: new RunStore(pool, { batches }),
    records: new RunRecords(pool),
    async close() {
      await Promise.all([pool.end(), batches.end()]);
      await admin.query(`DROP DATABASE IF EXISTS ${pg.escapeIdentifier(name)} WITH (FORCE)`).catch(() => {});
      await admin.end();
    },
  };
}

/**
 * Every event of run `runId` as readers get them (their ids, types and data as JSON text), from
 * run_event and from the step rows that carry theirs (src/store/step-events.ts).
 */
export async function storedEvents(pool: pg.Pool, runId: string, sealer?: Sealer): Promise<StoredEvent[]> {
  const events = new RunEvents(pool, sealer ? { sealer } : {});
  const all: StoredEvent[] = [];
  for (;;) {
    const page = await events.page(runId as RunId, all.at(-1)?.id ?? 0, 1000);
    all.push(...page);
    if (page.length < 1000) return all;
  }
}
