/**
 * Redaction of what is stored, with a real worker and PostgreSQL: a tool result holding a (fake) key
 * reaches the model whole in the attempt that produced it, is stored redacted, and a resumed run
 * sends the model the redacted text; the input is stored redacted; no log line carries the key.
 * Redaction works on string values: a JSON tool result keeps its other fields, in its step and in
 * tool.finished; metadata is redacted; the model's own output (a tool_use input) is stored as it came,
 * the same in the model step and in tool.started.
 */
import { Writable } from 'node:stream';
import type { FastifyInstance } from 'fastify';
import { createServer } from '../../src/api/server.ts';
import type { RunId } from '../../src/domain/types.ts';
import { RunListing } from '../../src/store/run-listing.ts';
import { startEventsApi, readSse, type EventsApi } from '../support/events-api.ts';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { armCrashPoint, disarmCrashPoints } from '../../src/engine/crash-points.ts';
import { logEvents } from '../../src/observability/log-events.ts';
import { createLogger } from '../../src/observability/logger.ts';
import { DEFAULT_REDACT_PATTERNS, redactor } from '../../src/core/redact.ts';
import { RunRecords } from '../../src/store/run-records.ts';
import { RunStore } from '../../src/store/run-store.ts';
import { defineTool } from '../../src/tools/types.ts';
import { testDatabase, type TestDatabase } from '../support/db.ts';
import { expireLease, newRun, SimulatedCrash, testWorker } from '../support/engine.ts';
import { response, ScriptedLlm, usage } from '../support/scripted-llm.ts';

const KEY = 'sk-ant-api03-FAKEfakeFAKEfake0123456789abcdefABCDEF-_0123456789xyzXYZ';
const AWS = 'AKIAIOSFODNN7EXAMPLE';

let db: TestDatabase;
let store: RunStore;
let records: RunRecords;
/** The API of a process configured with the default patterns (runs are created through it). */
let app: FastifyInstance;
/** Another API process on the same database, whose SSE stream reads the events. */
let api: EventsApi;
const lines: string[] = [];
const logger = createLogger({
  level: 'debug',
  redact: redactor(DEFAULT_REDACT_PATTERNS),
  destination: new Writable({
    write(chunk, _enc, done) {
      lines.push(String(chunk));
      done();
    },
  }),
});

beforeAll(async () => {
  db = await testDatabase();
  store = new RunStore(db.pool, { redact: redactor(DEFAULT_REDACT_PATTERNS) });
  records = new RunRecords(db.pool, { redact: redactor(DEFAULT_REDACT_PATTERNS) });
  app = createServer({
    store: records,
    listing: new RunListing(db.pool),
    defaults: { agent: 'demo', model: 'test-model', tokenBudget: 10_000, timeoutSeconds: 120, maxSteps: 10 },
    checkDatabase: async () => {},
    metrics: async () => ({ contentType: 'text/plain', body: '' }),
    logger: false,
  });
  api = await startEventsApi(db.url);
});
afterAll(async () => {
  disarmCrashPoints();
  await app?.close();
  await api?.close();
  await db.close();
});

async function getJson<T>(url: string): Promise<T> {
  const res = await app.inject({ method: 'GET', url });
  expect(res.statusCode, res.body).toBe(200);
  return res.json<T>();
}

async function events(runId: RunId) {
  const { events: all } = await readSse(`${api.url}/api/runs/${runId}/events`);
  return all;
}

describe('a tool result holding a key', () => {
  it('the model gets it whole in the attempt that produced it; the step, the logs and a resumed run get it redacted', async () => {
    let calls = 0;
    const readEnv = defineTool({
      name: 'read_env',
      description: 'Reads the environment',
      inputSchema: { type: 'object' },
      execute: async () => {
        // The first time, the tool crashes its worker with the key in the message (a log line's worth).
        if (++calls === 1) throw new SimulatedCrash(`could not connect with ${AWS}`);
        return `ANTHROPIC_API_KEY=${KEY}\nAWS_ACCESS_KEY_ID=${AWS}\nHOME=/root`;
      },
    });
    const llm = new ScriptedLlm()
      .thenToolUse('toolu_env_1', 'read_env', {})
      .then(() => response([{ type: 'text', text: 'Looked.' }], 'end_turn', usage(10, 3)))
      .then(() => response([{ type: 'text', text: 'Looked again.' }], 'end_turn', usage(10, 3)));
    const worker = testWorker(store, llm, [readEnv], { name: 'w-redact', logger, events: [logEvents(logger)] });
    const run = await newRun(records, `Check the box; my key is ${KEY}`);

    // Attempt 1: the model asks for the tool, which crashes the attempt.
    await expect(worker.runOnce()).rejects.toThrow(SimulatedCrash);
    // Attempt 2: the tool runs again and answers; the model call after it is cut off by a crash.
    await expireLease(db.pool, run.id);
    armCrashPoint({ point: 'after-model-response', runId: run.id });
    await expect(worker.runOnce()).rejects.toThrow();
    disarmCrashPoints();
    // Attempt 3 resumes from the log.
    await expireLease(db.pool, run.id);
    expect((await worker.runOnce())?.status).toBe('SUCCEEDED');

    const toolResult = (i: number) => JSON.stringify(llm.seen[i]!.messages.at(-1));
    // The model's call in attempt 2 had the result as the tool returned it...
    expect(toolResult(1)).toContain(KEY);
    expect(toolResult(1)).toContain(AWS);
    // ...the resumed attempt sent what is stored.
    expect(toolResult(2)).not.toContain(KEY);
    expect(toolResult(2)).toContain('ANTHROPIC_API_KEY=[redacted]\\nAWS_ACCESS_KEY_ID=[redacted]\\nHOME=/root');
    // The input is stored redacted, so the model never saw the key in it.
    expect(JSON.stringify(llm.seen[0]!.messages[0])).toContain('my key is [redacted]');

    const { rows: steps } = await db.pool.query<{ response: string }>(
      `SELECT response FROM durable_agent.run_step WHERE run_id = $1 AND kind = 'TOOL'`,
      [run.id],
    );
    expect(steps[0]!.response).toBe('ANTHROPIC_API_KEY=[redacted]\nAWS_ACCESS_KEY_ID=[redacted]\nHOME=/root');
    const everything = JSON.stringify(
      (
        await db.pool.query('SELECT r.*, s.* FROM durable_agent.run r JOIN durable_agent.run_step s ON s.run_id = r.id WHERE r.id = $1', [
          run.id,
        ])
      ).rows,
    );
    expect(everything).not.toContain(KEY);
    expect(everything).not.toContain(AWS);

    // The crash was logged, with its message, without the key.
    const crash = lines.find((l) => l.includes('"attempt_ended"') && l.includes('could not connect'));
    expect(crash, lines.join('')).toBeDefined();
    expect(crash).toContain('could not connect with [redacted]');
    expect(lines.join('')).not.toContain(KEY);
    expect(lines.join('')).not.toContain(AWS);
    worker.stop().catch(() => {});
  });
});

describe('redaction works on string values', () => {
  const UNTERMINATED = '-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASC';

  it('a JSON tool result with a key in one field keeps its other fields, in its step and in tool.finished; one without is stored byte for byte', async () => {
    const secretResult = JSON.stringify({ k: UNTERMINATED, host: 'db.internal', port: 5432, tags: ['a', `x ${AWS}`] });
    const plainResult = '{ "host": "db.internal",\n  "port": 5432 }';
    const readConfig = defineTool({
      name: 'read_config',
      description: 'Reads a config',
      inputSchema: { type: 'object' },
      execute: async (input: { which: string }) => (input.which === 'secret' ? secretResult : plainResult),
    });
    const llm = new ScriptedLlm()
      .thenToolUse('toolu_cfg_1', 'read_config', { which: 'secret' })
      .thenToolUse('toolu_cfg_2', 'read_config', { which: 'plain' })
      .then(() => response([{ type: 'text', text: 'Read.' }], 'end_turn', usage(10, 3)));
    const worker = testWorker(store, llm, [readConfig], { name: 'w-json-result' });
    const run = await newRun(records, 'Read the config');
    expect((await worker.runOnce())?.status).toBe('SUCCEEDED');

    const expected = { k: '[redacted]', host: 'db.internal', port: 5432, tags: ['a', 'x [redacted]'] };
    const steps = await getJson<{ seq: number; kind: string; toolUseId: string | null }[]>(`/api/runs/${run.id}/timeline`);
    const toolStep = async (useId: string) => {
      const seq = steps.find((x) => x.kind === 'TOOL' && x.toolUseId === useId)!.seq;
      return (await getJson<{ response: string }>(`/api/runs/${run.id}/steps/${seq}`)).response;
    };
    expect(JSON.parse(await toolStep('toolu_cfg_1'))).toEqual(expected);
    expect(await toolStep('toolu_cfg_2')).toBe(plainResult);

    const finished = (await events(run.id))
      .filter((e) => e.type === 'tool.finished')
      .map((e) => e.data as { toolUseId: string; output: string });
    expect(JSON.parse(finished.find((e) => e.toolUseId === 'toolu_cfg_1')!.output)).toEqual(expected);
    expect(finished.find((e) => e.toolUseId === 'toolu_cfg_2')!.output).toBe(plainResult);
    worker.stop().catch(() => {});
  });

  it("the model's tool_use input is stored as the model gave it: the same in the model step and in tool.started", async () => {
    const input = { user: 'ann', password: KEY, note: UNTERMINATED };
    const login = defineTool({ name: 'login', description: 'Logs in', inputSchema: { type: 'object' }, execute: async () => 'ok' });
    const llm = new ScriptedLlm()
      .thenToolUse('toolu_login_1', 'login', input)
      .then(() => response([{ type: 'text', text: 'Logged in.' }], 'end_turn', usage(10, 3)));
    const worker = testWorker(store, llm, [login], { name: 'w-tool-input' });
    const run = await newRun(records, 'Log in');
    expect((await worker.runOnce())?.status).toBe('SUCCEEDED');

    const steps = await getJson<{ seq: number; kind: string }[]>(`/api/runs/${run.id}/timeline`);
    const modelSeq = steps.find((x) => x.kind === 'MODEL')!.seq;
    const blocks = (await getJson<{ response: { type: string; id?: string; input?: unknown }[] }>(`/api/runs/${run.id}/steps/${modelSeq}`))
      .response;
    const stepInput = blocks.find((b) => b.type === 'tool_use' && b.id === 'toolu_login_1')!.input;
    const started = (await events(run.id)).find((e) => e.type === 'tool.started')!.data as { toolUseId: string; input: unknown };
    expect(started.toolUseId).toBe('toolu_login_1');
    expect(stepInput).toEqual(input);
    expect(started.input).toEqual(stepInput);
    worker.stop().catch(() => {});
  });

  it('metadata is redacted before it is stored, its other fields kept', async () => {
    const created = await app.inject({
      method: 'POST',
      url: '/api/runs',
      headers: { 'content-type': 'application/json' },
      payload: JSON.stringify({ input: 'hello', metadata: { team: 'acme', token: KEY, nested: { aws: `id ${AWS}`, n: 3 } } }),
    });
    expect(created.statusCode, created.body).toBe(201);
    const { id } = created.json<{ id: string }>();
    const run = await getJson<{ metadata: unknown }>(`/api/runs/${id}`);
    expect(run.metadata).toEqual({ team: 'acme', token: '[redacted]', nested: { aws: 'id [redacted]', n: 3 } });
  });
});
