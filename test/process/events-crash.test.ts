/**
 * Token streaming stays honest across a crash: a worker process SIGKILLed mid-stream leaves text of
 * an attempt nobody will finish; the worker process that takes the run over marks it abandoned before
 * its own attempt streams, and a reader connected to the API process all along folds exactly the output.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import path from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { foldEvents } from '../../src/events/fold.ts';
import { followRun } from '../../src/events/follow.ts';
import { testDatabase, type TestDatabase } from '../support/db.ts';
import { newRun, waitFor } from '../support/engine.ts';
import { startEventsApi, type EventsApi } from '../support/events-api.ts';
import { fake, startFakeAnthropic, warmUp, type FakeAnthropic } from '../support/fake-anthropic.ts';

const API_KEY = 'sk-ant-test-events-crash-0123456789';
const ANSWER = 'Ticket ACME-101 is overdue by three days; ACME-102 and ACME-107 are due tomorrow.';
const usage = { input_tokens: 500, output_tokens: 30 };

let db: TestDatabase;
let model: FakeAnthropic;
let api: EventsApi;
const children: ChildProcess[] = [];

beforeAll(async () => {
  db = await testDatabase();
  model = await startFakeAnthropic({ apiKey: API_KEY });
  await warmUp(model, API_KEY);
  api = await startEventsApi(db.url);
});
afterAll(async () => {
  for (const c of children) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
  await api?.close();
  await model?.close();
  await db?.close();
});

function startWorker(name: string, crash: boolean): ChildProcess {
  const child = spawn(process.execPath, ['--import', 'tsx', path.resolve('test/support/stream-worker-process.ts')], {
    env: {
      ...process.env,
      DATABASE_URL: db.url,
      WORKER_NAME: name,
      LEASE_MS: '1000',
      ANTHROPIC_API_KEY: API_KEY,
      ANTHROPIC_BASE_URL: model.url,
      CRASH_MID_STREAM: crash ? '1' : '0',
    },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  children.push(child);
  return child;
}

it('a worker SIGKILLed mid-stream: the next worker abandons its attempt, streams again, and the connected reader folds the output', async () => {
  model.enqueue(
    { ...fake.text(ANSWER, usage), stream: { deltaDelayMs: 80 } },
    { ...fake.text(ANSWER, usage), stream: { deltaDelayMs: 20 } },
  );
  const run = await newRun(db.records, 'which tickets are overdue?');
  const seen: { id: number; type: string; data: any }[] = [];
  let reconnects = 0;
  const reading = (async () => {
    for await (const e of followRun(api.url, run.id, { retryMs: 100, onReconnect: () => reconnects++ })) seen.push(e);
  })();

  const a = startWorker('worker-A', true);
  const exit = await new Promise<NodeJS.Signals | null>((resolve) => a.once('exit', (_code, signal) => resolve(signal)));
  expect(exit).toBe('SIGKILL');
  expect((await db.records.state(run.id)).status).toBe('RUNNING'); // A died holding the lease, mid-sentence
  await waitFor("the reader to see A's text", async () => seen.some((e) => e.type === 'text.delta'), 10_000);

  startWorker('worker-B', false);
  await reading;
  const final = await db.records.state(run.id);
  expect(final.status).toBe('SUCCEEDED');
  expect(final.output).toBe(ANSWER);
  expect(reconnects).toBe(0); // the reader stayed connected to the API process throughout

  const of = (type: string) => seen.filter((e) => e.type === type);
  expect(of('run.started').map((e) => e.data)).toEqual([
    { worker: 'worker-A', attempt: 1 },
    { worker: 'worker-B', attempt: 2 },
  ]);
  expect(of('attempt.abandoned').map((e) => e.data)).toEqual([{ seq: 1, attempt: 1, reason: 'takeover' }]);
  // A's text (attempt 1) was cut short; B's attempt is numbered 2 and streams the whole answer.
  const textOf = (attempt: number) =>
    of('text.delta')
      .filter((e) => e.data.attempt === attempt)
      .map((e) => e.data.text)
      .join('');
  expect(textOf(1).length).toBeGreaterThan(0);
  expect(ANSWER.startsWith(textOf(1))).toBe(true);
  expect(textOf(1)).not.toBe(ANSWER);
  expect(textOf(2)).toBe(ANSWER);
  // B's run.started and the abandonment come before any text of B's attempt.
  const firstOfB = of('text.delta').find((e) => e.data.attempt === 2)!.id;
  expect(of('attempt.abandoned')[0]!.id).toBeLessThan(firstOfB);
  expect(of('run.started')[1]!.id).toBeLessThan(firstOfB);
  expect(foldEvents(seen).text).toBe(final.output);
}, 240_000); // two worker processes start (tsx) and a lease lapses: slow on a busy machine
