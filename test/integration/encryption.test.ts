/**
 * Encryption at rest on real PostgreSQL: with ENCRYPTION_KEY(S) nothing a run saw is readable in the
 * database, while the API reads it all; a process without the keys refuses to start; a rotation seals
 * everything with the new key, and a run that started before it finishes after it.
 */
import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, afterEach, beforeEach, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { loadConfig } from '../../src/config/environment.ts';
import type { RunId } from '../../src/domain/types.ts';
import { type Runtime, startRuntime } from '../../src/runtime/start-runtime.ts';
import { Sealer } from '../../src/store/encryption.ts';
import { EncryptionKeys } from '../../src/store/encryption-keys.ts';
import { RunStore } from '../../src/store/run-store.ts';
import { RunRecords } from '../../src/store/run-records.ts';
import { tool } from '../../src/tools/zod-tool.ts';
import { storedEvents, testDatabase, type TestDatabase } from '../support/db.ts';
import { modelCheckpoint, waitFor } from '../support/engine.ts';
import { ScriptedLlm } from '../support/scripted-llm.ts';
import { plan, planLlm } from '../support/plan-llm.ts';
import { workspaceSettings } from '../../src/workspace/options.ts';

const K1 = randomBytes(32).toString('base64');
const K2 = randomBytes(32).toString('base64');
const MARK = 'Zebra7Marker';

let db: TestDatabase;
const runtimes: Runtime[] = [];
beforeEach(async () => {
  db = await testDatabase();
});
afterEach(async () => {
  await Promise.all(runtimes.splice(0).map((rt) => rt.close()));
  await db.close();
});

const lookup = tool({
  name: 'lookup',
  description: 'Looks a thing up.',
  input: z.object({ q: z.string() }),
  execute: async ({ q }) => ({ found: `${MARK}-result for ${q}`, count: 2 }),
});
const refund = tool({
  name: 'refund',
  description: 'Refunds an order.',
  input: z.object({ order: z.string() }),
  needsApproval: true,
  execute: async ({ order }) => `${MARK}-refunded ${order}`,
});

async function start(env: Record<string, string>, llm: ScriptedLlm): Promise<Runtime> {
  const config = loadConfig({ DATABASE_URL: db.url, PORT: '0', LOG_LEVEL: 'silent', LLM_PROVIDER: 'demo', POLL_INTERVAL_MS: '50', ...env });
  const rt = await startRuntime(config, {
    api: true,
    worker: true,
    agent: { name: 'clerk', system: `${MARK}-system prompt`, tools: [lookup, refund] },
    llm,
  });
  runtimes.push(rt);
  return rt;
}

async function api(rt: Runtime, path: string, init?: RequestInit): Promise<unknown> {
  const res = await fetch(`${rt.url}${path}`, { ...init, headers: { 'content-type': 'application/json', ...init?.headers } });
  expect(res.status, `${path}: ${res.status}`).toBeLessThan(300);
  return res.json();
}

/** Every row of every table of the schema as PostgreSQL prints it: what a dump or a backup holds. */
async function everyRow(): Promise<string> {
  const { rows: tables } = await db.pool.query<{ name: string }>(
    `SELECT format('%I.%I', schemaname, tablename) AS name FROM pg_tables WHERE schemaname = 'durable_agent'`,
  );
  expect(tables.length).toBeGreaterThan(5);
  let all = '';
  for (const { name } of tables) {
    const { rows } = await db.pool.query<{ row: string }>(`SELECT t::text AS row FROM ${name} t`);
    all += rows.map((r) => r.row).join('\n');
  }
  return all;
}

/** pg_dump of the database, when this machine's pg_dump can read its server (same major version or newer). */
async function pgDump(): Promise<string | null> {
  let client: string;
  try {
    client = execFileSync('pg_dump', ['--version'], { encoding: 'utf8' });
  } catch {
    return null;
  }
  const server = (await db.pool.query<{ major: number }>(`SELECT current_setting('server_version_num')::int / 10000 AS major`)).rows[0]!
    .major;
  if (Number(/(\d+)\./.exec(client)?.[1]) < server) return null;
  return execFileSync('pg_dump', ['--no-owner', db.url], { encoding: 'utf8', maxBuffer: 256 * 1024 * 1024 });
}

describe('encryption at rest', () => {
  it('keeps every payload out of the database while the API, timeline, steps and events show it', async () => {
    const llm = new ScriptedLlm().thenToolUse('toolu_1', 'lookup', { q: `${MARK}-tool input` }).thenText(`${MARK}-reply`);
    const rt = await start({ ENCRYPTION_KEY: K1 }, llm);
    const created = (await api(rt, '/api/runs', {
      method: 'POST',
      body: JSON.stringify({ input: `${MARK}-input`, metadata: { note: `${MARK}-metadata` } }),
    })) as { id: RunId };
    const run = await waitFor('the run to succeed', async () => {
      const r = (await api(rt, `/api/runs/${created.id}`)) as Record<string, unknown>;
      return r.status === 'SUCCEEDED' && r;
    });
    expect(run).toMatchObject({ input: `${MARK}-input`, output: `${MARK}-reply`, metadata: { note: `${MARK}-metadata` } });

    const timeline = (await api(rt, `/api/runs/${created.id}/timeline`)) as unknown[];
    expect(timeline).toHaveLength(3);
    const model = (await api(rt, `/api/runs/${created.id}/steps/1`)) as { response: unknown };
    expect(model.response).toEqual([{ type: 'tool_use', id: 'toolu_1', name: 'lookup', input: { q: `${MARK}-tool input` } }]);
    const toolStep = (await api(rt, `/api/runs/${created.id}/steps/2`)) as { response: string };
    expect(JSON.parse(toolStep.response)).toEqual({ found: `${MARK}-result for ${MARK}-tool input`, count: 2 });
    const { events } = (await api(rt, `/api/runs/${created.id}/events`)) as { events: { type: string; data: Record<string, unknown> }[] };
    expect(events.find((e) => e.type === 'tool.started')!.data.input).toEqual({ q: `${MARK}-tool input` });
    expect(events.find((e) => e.type === 'tool.finished')!.data.output).toContain(`${MARK}-result`);
    expect(events.find((e) => e.type === 'run.finished')!.data.output).toBe(`${MARK}-reply`);
    // The model saw the conversation in plain text, system prompt included.
    expect(JSON.stringify(llm.seen.at(-1))).toContain(`${MARK}-result`);

    const rows = await everyRow();
    expect(rows).toContain(created.id);
    expect(rows).toContain('da.enc:1:');
    expect(rows).not.toContain(MARK);
    const dump = await pgDump();
    if (dump !== null) {
      expect(dump).toContain(created.id);
      expect(dump).not.toContain(MARK);
    }
  });

  it('refuses to start without the keys the database holds values under, and says which', async () => {
    const rt = await start({ ENCRYPTION_KEYS: `old:${K1}` }, new ScriptedLlm().thenText('done'));
    await rt.runs.create({ input: 'x' });
    await rt.close();
    await expect(start({}, new ScriptedLlm())).rejects.toThrow(/holds encrypted values \(key old\): set ENCRYPTION_KEY/);
    await expect(start({ ENCRYPTION_KEYS: `new:${K2}` }, new ScriptedLlm())).rejects.toThrow(
      /key old, which ENCRYPTION_KEYS does not have/,
    );
  });

  it('rotates: a run started under the old key finishes after the rotation, and then only the new key is needed', async () => {
    const before = new ScriptedLlm().thenToolUse('toolu_r', 'refund', { order: `${MARK}-order` });
    const rtOld = await start({ ENCRYPTION_KEYS: `old:${K1}` }, before);
    const run = await rtOld.runs.create({ input: `${MARK}-please refund` });
    await waitFor('the run to wait', async () => (await rtOld.runs.get(run.id))?.status === 'WAITING');
    await rtOld.close();

    // The new key first everywhere, the old one after it; then the rotation.
    const after = new ScriptedLlm().thenText(`${MARK}-refund done`);
    const rtNew = await start({ ENCRYPTION_KEYS: `new:${K2},old:${K1}` }, after);
    const report = await new EncryptionKeys(db.pool).rotate(
      new Sealer(loadConfig({ ENCRYPTION_KEYS: `new:${K2},old:${K1}` }).encryptionKeys),
      2,
    );
    expect(report.retired).toEqual(['old']);
    expect(report.tables.run!.rewritten).toBe(1);
    expect(report.tables.run_event!.rewritten).toBeGreaterThan(0);
    expect(await new EncryptionKeys(db.pool).storedIds()).toEqual(['new']);
    const rows = await everyRow();
    expect(rows).not.toContain(':old:');
    expect(rows).not.toContain(MARK);

    await api(rtNew, `/api/runs/${run.id}/tool-calls/toolu_r/decision`, { method: 'POST', body: JSON.stringify({ decision: 'approve' }) });
    const done = await waitFor('the run to succeed', async () => {
      const r = await rtNew.runs.get(run.id);
      return r?.status === 'SUCCEEDED' && r;
    });
    expect(done.output).toBe(`${MARK}-refund done`);
    // The model was given the old steps, opened: the turn and the tool's result.
    expect(JSON.stringify(after.seen[0])).toContain(`${MARK}-order`);
    expect(JSON.stringify(after.seen[0])).toContain(`${MARK}-refunded`);
    await rtNew.close();

    // Only the new key now: everything reads.
    const rtOnlyNew = await start({ ENCRYPTION_KEYS: `new:${K2}` }, new ScriptedLlm());
    const read = (await api(rtOnlyNew, `/api/runs/${run.id}`)) as { input: string; output: string };
    expect(read).toMatchObject({ input: `${MARK}-please refund`, output: `${MARK}-refund done` });
    const { events } = (await api(rtOnlyNew, `/api/runs/${run.id}/events`)) as {
      events: { type: string; data: Record<string, unknown> }[];
    };
    expect(events.find((e) => e.type === 'run.waiting')!.data.toolCalls).toEqual([
      expect.objectContaining({ toolUseId: 'toolu_r', input: { order: `${MARK}-order` } }),
    ]);
    expect(JSON.stringify(await everyRow())).not.toContain(MARK);
  });
  it('rotates runs of many steps and events in small batches, and retires the old key only when no value uses it', async () => {
    const old = new Sealer([{ id: 'old', key: Buffer.from(K1, 'base64') }]);
    await new EncryptionKeys(db.pool).check(old);
    const store = new RunStore(db.pool, { sealer: old });
    const records = new RunRecords(db.pool, { sealer: old });

    const owner = { worker: 'w', leaseMs: 60_000 };
    for (let r = 0; r < 2; r++) {
      const run = await records.create({ input: `${MARK}-${r}`, model: 'm', tokenBudget: 10_000_000, timeoutSeconds: 600, maxSteps: 100 });
      const lease = (await store.claim(owner, 1))[0]!.lease;
      for (let seq = 1; seq <= 24; seq += 2) {
        await store.checkpointModel(
          run.id,
          lease,
          modelCheckpoint(seq, [
            { type: 'text', text: `${MARK} turn ${seq}` },
            { type: 'tool_use', id: `t${seq}`, name: 'lookup', input: { q: MARK } },
          ]),
          { startNext: { seq: seq + 1, toolUseId: `t${seq}`, toolName: 'lookup', input: { q: MARK } } },
        );
        await store.finishTool(run.id, lease, {
          seq: seq + 1,
          toolUseId: `t${seq}`,
          status: 'DONE',
          result: `${MARK} result ${seq}`,
          latencyMs: 0,
        });
      }
    }
    const stepRows = (await db.pool.query<{ n: number }>('SELECT count(*)::int AS n FROM durable_agent.run_step')).rows[0]!.n;
    expect(stepRows).toBe(48);

    const both = new Sealer([
      { id: 'new', key: Buffer.from(K2, 'base64') },
      { id: 'old', key: Buffer.from(K1, 'base64') },
    ]);
    const report = await new EncryptionKeys(db.pool).rotate(both, 2);
    expect(report.tables.run_step).toEqual({ read: 48, rewritten: 48, changedMeanwhile: 0 });
    // The events with a payload (tool.started's input, tool.finished's output) are the step rows'; the
    // rest (step.started, step.finished, run.started) have nothing to seal.
    expect(report.tables.run_event!.rewritten).toBe(0);
    expect(report).toMatchObject({ retired: ['old'], stillUsed: [] });
    const rows = await everyRow();
    expect(rows).not.toContain(':old:');
    expect(rows).not.toContain(MARK);
    const onlyNewRecords = new RunRecords(db.pool, { sealer: new Sealer([{ id: 'new', key: Buffer.from(K2, 'base64') }]) });

    const someRun = (await db.pool.query<{ id: RunId }>('SELECT id FROM durable_agent.run LIMIT 1')).rows[0]!.id;
    const [first] = await onlyNewRecords.stepsThrough(someRun, 24);
    expect(first!.response).toEqual([
      { type: 'text', text: `${MARK} turn 1` },
      { type: 'tool_use', id: 't1', name: 'lookup', input: { q: MARK } },
    ]);
    // The events the step rows carry open with the new key alone: tool.started's input, tool.finished's output.
    const events = (await storedEvents(db.pool, someRun, new Sealer([{ id: 'new', key: Buffer.from(K2, 'base64') }]))).map((e) => ({
      type: e.type,
      data: JSON.parse(e.data) as { input?: unknown; output?: string },
    }));
    expect(events.find((e) => e.type === 'tool.started')!.data.input).toEqual({ q: MARK });
    expect(events.find((e) => e.type === 'tool.finished')!.data.output).toBe(`${MARK} result 1`);
  });

  it('keeps a plain value that looks sealed as it is, with or without a key', async () => {
    for (const env of [{}, { ENCRYPTION_KEY: K1 }] as Record<string, string>[]) {
      const rt = await start(env, new ScriptedLlm().thenText('da.raw:the reply'));
      const run = await rt.runs.create({
        input: 'da.enc:1:t:x:AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA',
        metadata: { m: 'da.enc:1:j:y:AAAA' },
      });
      const done = await waitFor('the run to succeed', async () => {
        const r = await rt.runs.get(run.id);
        return r?.status === 'SUCCEEDED' && r;
      });
      expect(done).toMatchObject({
        input: 'da.enc:1:t:x:AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA',
        metadata: { m: 'da.enc:1:j:y:AAAA' },
        output: 'da.raw:the reply',
      });
      await rt.close();
      runtimes.splice(runtimes.indexOf(rt), 1);
      await db.close();
      db = await testDatabase();
    }
  });
  it('ends a run whose stored value does not open (altered) instead of claiming it again and again', async () => {
    const sealer = new Sealer([{ id: 'k', key: Buffer.from(K1, 'base64') }]);
    const store = new RunStore(db.pool, { sealer });
    const records = new RunRecords(db.pool, { sealer });
    const good = await records.create({ input: 'fine', model: 'm', tokenBudget: 100, timeoutSeconds: 60, maxSteps: 5 });
    const bad = await records.create({ input: 'altered', model: 'm', tokenBudget: 100, timeoutSeconds: 60, maxSteps: 5 });
    await db.pool.query(
      `UPDATE durable_agent.run SET input = left(input, -2) || CASE WHEN right(input, 2) = 'AA' THEN 'BB' ELSE 'AA' END WHERE id = $1`,
      [bad.id],
    );
    const claimed = await store.claim({ worker: 'w', leaseMs: 60_000 }, 5);
    expect(claimed.map((r) => r.id)).toEqual([good.id]);
    const { rows } = await db.pool.query<{ status: string; error: string }>('SELECT status, error FROM durable_agent.run WHERE id = $1', [
      bad.id,
    ]);
    expect(rows[0]!.status).toBe('FAILED');
    expect(sealer.openText(rows[0]!.error)).toMatch(/sealed with key k does not open/);
    expect(await store.claim({ worker: 'w', leaseMs: 60_000 }, 5)).toEqual([]);
  });
});

describe('encryption at rest of workspaces', () => {
  const root = fs.mkdtempSync(path.join(os.tmpdir(), 'da-enc-ws-'));
  afterAll(() => fs.rmSync(root, { recursive: true, force: true }));
  const hexOf = (s: string) => Buffer.from(s).toString('hex');

  async function startCoder(env: Record<string, string>): Promise<Runtime> {
    const config = loadConfig({ DATABASE_URL: db.url, PORT: '0', LOG_LEVEL: 'silent', WORKSPACE_ROOT: root, ...env });
    const rt = await startRuntime(config, {
      api: true,
      worker: true,
      agent: { name: 'coder', system: 'You write code.', tools: [], workspace: workspaceSettings(true) },
      llm: planLlm(),
    });
    runtimes.push(rt);
    return rt;
  }

  it("keeps a file's content sealed in the database while the API serves it, and a rotation seals it anew", async () => {
    const rtOld = await startCoder({ ENCRYPTION_KEYS: `old:${K1}` });
    const run = await rtOld.runs.create({
      agent: 'coder',
      input: plan([{ name: 'bash', input: { command: `echo ${MARK}-file-content > notes.txt` } }]),
    });
    await waitFor('the run to succeed', async () => (await rtOld.runs.get(run.id))?.status === 'SUCCEEDED');
    const served = await fetch(`${rtOld.url}/api/runs/${run.id}/files/notes.txt`);
    expect(await served.text()).toBe(`${MARK}-file-content\n`);
    const rows = await everyRow();
    expect(rows).not.toContain(MARK);
    expect(rows).not.toContain(hexOf(MARK));
    const dump = await pgDump();
    if (dump !== null) expect(dump).not.toContain(hexOf(MARK));
    await rtOld.close();

    const report = await new EncryptionKeys(db.pool).rotate(
      new Sealer(loadConfig({ ENCRYPTION_KEYS: `new:${K2},old:${K1}` }).encryptionKeys),
    );
    expect(report.tables.workspace_blob).toEqual({ read: 1, rewritten: 1, changedMeanwhile: 0 });
    expect(report.retired).toEqual(['old']);
    const rtNew = await startCoder({ ENCRYPTION_KEYS: `new:${K2}` });
    expect(await (await fetch(`${rtNew.url}/api/runs/${run.id}/files/notes.txt`)).text()).toBe(`${MARK}-file-content\n`);
    expect(await everyRow()).not.toContain(hexOf(MARK));
  });
});
