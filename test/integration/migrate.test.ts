/** The migration runner on an empty database of its own, with migrations written for the test. */
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { afterAll, beforeAll, expect, inject, it } from 'vitest';
import { listMigrations, migrate, MIGRATIONS_DIR } from '../../src/db/migrate.ts';
import { DEMO_MIGRATIONS_DIR } from '../../src/demo/migrations-dir.ts';
import { createPool } from '../../src/db/pool.ts';
import { RunStore } from '../../src/store/run-store.ts';
import { RunRecords } from '../../src/store/run-records.ts';
import { RunEvents } from '../../src/store/run-events.ts';
import { ApiKeys } from '../../src/store/api-keys.ts';
import { RunStats } from '../../src/store/run-stats.ts';
import { leaseKeeperThread } from '../../src/leases/lease-keeper-thread.ts';
import { livenessSession } from '../../src/leases/liveness-session.ts';
import { createLogger } from '../../src/observability/logger.ts';
import { defineTool } from '../../src/tools/types.ts';
import { newRun, testWorker } from '../support/engine.ts';
import { ScriptedLlm } from '../support/scripted-llm.ts';
import { waitFor } from '../support/wait-for.ts';

let admin: pg.Client;
let name: string;
let pool: pg.Pool;
let dir: string;
beforeAll(async () => {
  admin = new pg.Client({ connectionString: inject('adminUrl') });
  await admin.connect();
  name = `${inject('dbPrefix')}_migrate_${randomBytes(3).toString('hex')}`;
  await admin.query(`CREATE DATABASE ${pg.escapeIdentifier(name)}`);
  const url = new URL(inject('adminUrl'));
  url.pathname = `/${name}`;
  pool = createPool(url.toString(), 2);
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'durable-agent-migrations-'));
});
afterAll(async () => {
  await pool.end();
  await admin.query(`DROP DATABASE IF EXISTS ${pg.escapeIdentifier(name)} WITH (FORCE)`);
  await admin.end();
  fs.rmSync(dir, { recursive: true, force: true });
});

const tables = async () =>
  (await pool.query<{ t: string }>(`SELECT tablename AS t FROM pg_tables WHERE schemaname = 'durable_agent' ORDER BY 1`)).rows.map(
    (r) => r.t,
  );
const recorded = async () =>
  (await pool.query<{ name: string }>('SELECT name FROM durable_agent.schema_migration ORDER BY version')).rows.map((r) => r.name);

it('rolls a failing migration back whole, records nothing of it, stops there, and applies it once it is fixed', async () => {
  fs.writeFileSync(path.join(dir, '0001_first.sql'), 'CREATE TABLE first_table (id int PRIMARY KEY);');
  // The table is created, then the second statement fails: the table must not survive.
  fs.writeFileSync(
    path.join(dir, '0002_broken.sql'),
    `CREATE TABLE broken_table (n int);\nINSERT INTO broken_table VALUES ('not a number');`,
  );
  fs.writeFileSync(path.join(dir, '0003_after.sql'), 'CREATE TABLE after_table (id int);');

  await expect(migrate(pool, { dirs: [dir] })).rejects.toThrow(/^migration 0002_broken failed: invalid input syntax for type integer/);
  expect(await tables()).toEqual(['first_table', 'schema_migration']);
  expect(await recorded()).toEqual(['0001_first']);

  fs.writeFileSync(path.join(dir, '0002_broken.sql'), `CREATE TABLE broken_table (n int);\nINSERT INTO broken_table VALUES (1);`);
  expect(await migrate(pool, { dirs: [dir] })).toEqual(['0002_broken', '0003_after']);
  expect(await tables()).toEqual(['after_table', 'broken_table', 'first_table', 'schema_migration']);
  expect(await recorded()).toEqual(['0001_first', '0002_broken', '0003_after']);
  expect(await migrate(pool, { dirs: [dir] })).toEqual([]);
});

/** A database of its own for one test, dropped after it. */
async function freshDatabase(): Promise<{ url: string; pool: pg.Pool; drop(): Promise<void> }> {
  const db = `${inject('dbPrefix')}_migrate_${randomBytes(3).toString('hex')}`;
  await admin.query(`CREATE DATABASE ${pg.escapeIdentifier(db)}`);
  const url = new URL(inject('adminUrl'));
  url.pathname = `/${db}`;
  const p = createPool(url.toString(), 2);
  return {
    url: url.toString(),
    pool: p,
    async drop() {
      await p.end();
      await admin.query(`DROP DATABASE IF EXISTS ${pg.escapeIdentifier(db)} WITH (FORCE)`);
    },
  };
}

const schemaTables = async (p: pg.Pool, schema: string) =>
  (await p.query<{ t: string }>('SELECT tablename AS t FROM pg_tables WHERE schemaname = $1 ORDER BY 1', [schema])).rows.map((r) => r.t);

it("leaves the user's public schema alone: a table of theirs named run is no obstacle", async () => {
  const fresh = await freshDatabase();
  try {
    await fresh.pool.query('CREATE TABLE public.run (x int); INSERT INTO public.run VALUES (42)');
    await migrate(fresh.pool);
    expect(await schemaTables(fresh.pool, 'public')).toEqual(['run']);
    expect((await fresh.pool.query('SELECT x FROM public.run')).rows).toEqual([{ x: 42 }]);
    expect(await schemaTables(fresh.pool, 'durable_agent')).toEqual(
      expect.arrayContaining(['content_blob', 'run', 'run_step', 'schema_migration']),
    );
    // The demo agent's tables come only with the demo agent.
    expect(await schemaTables(fresh.pool, 'durable_agent')).not.toContain('demo_ticket');
  } finally {
    await fresh.drop();
  }
});

it('moves a database of the release before the own schema out of public, keeping its runs readable', async () => {
  const fresh = await freshDatabase();
  try {
    // That release's layout: its two migrations applied in public, recorded in public.schema_migration.
    const earlier = [...listMigrations(MIGRATIONS_DIR).filter((m) => m.version === 1), ...listMigrations(DEMO_MIGRATIONS_DIR)];
    await fresh.pool.query(
      'CREATE TABLE public.schema_migration (version integer PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())',
    );
    for (const m of earlier) {
      await fresh.pool.query(m.sql);
      await fresh.pool.query('INSERT INTO public.schema_migration (version, name) VALUES ($1, $2)', [m.version, m.name]);
    }
    const id = '6f1c0a52-0000-4000-8000-000000000001';
    await fresh.pool.query(
      `INSERT INTO public.run (id, status, input, model, token_budget, max_steps, deadline_at, output, finished_at)
       VALUES ($1, 'SUCCEEDED', 'Which acme tickets are overdue?', 'demo', 1000, 10, now(), 'ACME-101', now())`,
      [id],
    );
    await fresh.pool.query(
      `INSERT INTO public.run_step (run_id, seq, kind, status, response, stop_reason, input_tokens, output_tokens)
       VALUES ($1, 1, 'MODEL', 'DONE', '[{"type":"text","text":"ACME-101"}]', 'end_turn', 10, 2)`,
      [id],
    );

    const applied = await migrate(fresh.pool, { dirs: [MIGRATIONS_DIR, DEMO_MIGRATIONS_DIR] });
    expect(applied).toEqual(
      listMigrations(MIGRATIONS_DIR)
        .filter((m) => m.version > 1)
        .map((m) => m.name),
    );
    expect(await schemaTables(fresh.pool, 'public')).toEqual([]);
    const store = new RunStore(fresh.pool);
    const records = new RunRecords(fresh.pool);

    expect(await records.get(id as never)).toMatchObject({ status: 'SUCCEEDED', output: 'ACME-101', lastError: null });
    expect((await store.steps(id as never)).map((st) => [st.seq, st.kind, st.response])).toEqual([
      [1, 'MODEL', [{ type: 'text', text: 'ACME-101' }]],
    ]);
    const ticket = await fresh.pool.query("SELECT title FROM durable_agent.demo_ticket WHERE id = 'ACME-101'");
    expect(ticket.rows).toHaveLength(1);
    // A second migrator finds nothing left to do.
    expect(await migrate(fresh.pool, { dirs: [MIGRATIONS_DIR, DEMO_MIGRATIONS_DIR] })).toEqual([]);
  } finally {
    await fresh.drop();
  }
});

it('puts everything in DATABASE_SCHEMA when it names another schema, and the store finds it there', async () => {
  const fresh = await freshDatabase();
  try {
    await migrate(fresh.pool, { schema: 'agents_here' });
    expect(await schemaTables(fresh.pool, 'agents_here')).toEqual(expect.arrayContaining(['run', 'run_step', 'schema_migration']));
    expect(await schemaTables(fresh.pool, 'durable_agent')).toEqual([]);
    const store = new RunStore(fresh.pool, { schema: 'agents_here' });
    const records = new RunRecords(fresh.pool, { schema: 'agents_here' });
    const run = await records.create({ input: 'hello', model: 'm', tokenBudget: 100, timeoutSeconds: 60, maxSteps: 5 });
    expect((await records.get(run.id))?.input).toBe('hello');
    const [claimed] = await store.claim({ worker: 'w', leaseMs: 10_000 }, 1);
    expect(claimed?.id).toBe(run.id);
  } finally {
    await fresh.drop();
  }
});

it("keeps two schemas of one database apart: each one's worker, events, keys and counts see only its own runs", async () => {
  const fresh = await freshDatabase();
  // The default, and a name that must be quoted (a capital, a space, a double quote) to be one identifier.
  const schemas = ['durable_agent', 'Agents "B"'];
  // The advisory lock namespaces of their liveness locks: the texts earlier releases hashed, kept.
  const namespaces = ['durable_agent.worker_liveness', '"Agents ""B""".worker_liveness'];
  const warnings: string[] = [];
  const logger = createLogger({
    level: 'warn',
    destination: { write: (line: string) => void warnings.push(line) },
  });
  const liveness: string[] = [];
  try {
    const parts = [];
    for (const schema of schemas) {
      await migrate(fresh.pool, { schema });
      parts.push({
        schema,
        store: new RunStore(fresh.pool, { schema }),
        records: new RunRecords(fresh.pool, { schema }),
        events: new RunEvents(fresh.pool, { schema }),
        keys: new ApiKeys(fresh.pool, { schema }),
        stats: new RunStats(fresh.pool, { schema }),
      });
    }
    expect(await schemaTables(fresh.pool, 'Agents "B"')).toEqual(expect.arrayContaining(['run', 'run_step', 'run_event', 'api_key']));
    const runs = await Promise.all(parts.map((p) => newRun(p.records, `hello from ${p.schema}`)));
    expect(await parts[0]!.records.get(runs[1]!.id)).toBeNull();
    expect(await parts[1]!.records.get(runs[0]!.id)).toBeNull();

    // Each schema's worker claims its own run (and no other), checkpoints a model step, runs a tool for
    // a few lease renewals of its keeper thread, and ends the run, its liveness session probing all along.
    let driving = 0;
    const ownerLocked: boolean[] = [];
    const slow = defineTool({
      name: 'slow',
      description: 'takes a while',
      inputSchema: { type: 'object' },
      async execute() {
        // The run's owner lock is held in its own schema's namespace.
        const { rows } = await fresh.pool.query<{ held: boolean }>(
          `SELECT EXISTS (SELECT 1 FROM pg_locks l
             WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 2 AND l.classid = hashtext($1)::oid
               AND l.objid = (SELECT owner_lock FROM ${pg.escapeIdentifier(schemas[driving]!)}.run WHERE id = $2)::oid) AS held`,
          [namespaces[driving], runs[driving]!.id],
        );
        ownerLocked.push(rows[0]!.held);
        await new Promise((r) => setTimeout(r, 700));
        return 'slow done';
      },
    });
    for (const [i, p] of parts.entries()) {
      driving = i;
      const llm = new ScriptedLlm().thenToolUse('toolu_1', 'slow', {}).thenText(`done in ${p.schema}`);
      const worker = testWorker(p.store, llm, [slow], {
        name: `worker-${i}`,
        leaseMs: 600,
        logger,
        leaseKeeper: leaseKeeperThread(fresh.url, { schema: p.schema }),
        liveness: livenessSession(fresh.url, { schema: p.schema, log: (_level, message) => void liveness.push(message) }),
      });
      await worker.start();
      try {
        await waitFor(`the run in ${p.schema} to end`, async () => (await p.records.get(runs[i]!.id))?.finishedAt);
      } finally {
        await worker.stop();
      }
      // One attempt: its keeper thread kept the lease, which was never lost and claimed again.
      expect(await p.records.state(runs[i]!.id)).toMatchObject({ status: 'SUCCEEDED', output: `done in ${p.schema}`, attempts: 1 });
    }
    expect(ownerLocked).toEqual([true, true]);
    expect(warnings).toEqual([]); // no lease renewal failed, nothing else went wrong
    expect(liveness.filter((m) => m.startsWith('owner liveness: a session lock'))).toHaveLength(2);

    for (const [i, p] of parts.entries()) {
      const [mine, theirs] = [runs[i]!.id, runs[1 - i]!.id];
      expect((await p.store.steps(mine)).map((st) => st.kind)).toEqual(['MODEL', 'TOOL', 'MODEL']);
      expect(await p.store.steps(theirs)).toEqual([]);
      const types = (await p.events.page(mine, 0, 100)).map((e) => e.type);
      expect(types).toEqual(expect.arrayContaining(['run.started', 'tool.finished', 'run.finished']));
      expect(await p.events.page(theirs, 0, 100)).toEqual([]);
      expect(await p.stats.countRunsByStatus()).toEqual({ SUCCEEDED: 1 });
    }

    // A key works in the schema it was made in, and is unknown in the other.
    const key = await parts[1]!.keys.create('globex');
    expect(await parts[1]!.keys.holder(key.key)).toEqual({ keyId: key.id, tenant: 'globex' });
    expect(await parts[0]!.keys.holder(key.key)).toBeNull();
    expect(await parts[0]!.keys.anyExist()).toBe(false);
  } finally {
    await fresh.drop();
  }
});

it('gives the runs of a database from before runs named their agent to the agent that served it, without a rewrite', async () => {
  for (const [legacyAgent, expected] of [
    ['helper', 'helper'],
    [undefined, 'demo'],
  ] as const) {
    const fresh = await freshDatabase();
    try {
      // That release's schema: the migrations before the agent column, and runs of its one agent.
      const earlierDir = fs.mkdtempSync(path.join(os.tmpdir(), 'durable-agent-earlier-'));
      for (const m of listMigrations(MIGRATIONS_DIR).filter((x) => x.version < 6))
        fs.writeFileSync(path.join(earlierDir, `${m.name}.sql`), m.sql);
      await migrate(fresh.pool, { dirs: [earlierDir] });
      fs.rmSync(earlierDir, { recursive: true, force: true });
      const done = '6f1c0a52-0000-4000-8000-000000000002';
      const waiting = '6f1c0a52-0000-4000-8000-000000000003';
      await fresh.pool.query(
        `INSERT INTO durable_agent.run (id, status, input, model, token_budget, max_steps, deadline_at, output, finished_at)
         VALUES ($1, 'SUCCEEDED', 'earlier', 'm', 1000, 10, now() + interval '1 hour', 'answer', now()),
                ($2, 'QUEUED', 'still waiting', 'm', 1000, 10, now() + interval '1 hour', null, null)`,
        [done, waiting],
      );
      const file = async () =>
        (await fresh.pool.query<{ relfilenode: number }>(`SELECT relfilenode FROM pg_class WHERE oid = 'durable_agent.run'::regclass`))
          .rows[0]!.relfilenode;
      const before = await file();

      await migrate(fresh.pool, legacyAgent ? { legacyAgent } : {});
      expect(await file()).toBe(before); // the column was added without rewriting the table
      const store = new RunStore(fresh.pool);
      const records = new RunRecords(fresh.pool);
      expect(await records.get(done as never)).toMatchObject({
        status: 'SUCCEEDED',
        output: 'answer',
        agent: expected,
        agentVersion: null,
        previousRunId: null,
      });
      // The waiting run is claimed by a worker of that agent, and by no other.
      expect(await store.claim({ worker: 'w', leaseMs: 10_000 }, 5, [], ['someone-else'])).toEqual([]);
      expect((await store.claim({ worker: 'w', leaseMs: 10_000 }, 5, [], [expected])).map((r) => r.id)).toEqual([waiting]);
      // A run written without an agent is the demo agent's, whatever the earlier runs became.
      const { rows } = await fresh.pool.query<{ agent: string }>(
        `INSERT INTO durable_agent.run (id, input, model, token_budget, max_steps, deadline_at) VALUES (gen_random_uuid(), 'x', 'm', 1, 1, now()) RETURNING agent`,
      );
      expect(rows[0]!.agent).toBe('demo');
    } finally {
      await fresh.drop();
    }
  }
});
