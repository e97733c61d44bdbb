/**
 * Waiting across real processes: a non-idempotent tool SIGKILLed mid-call waits for a person's
 * decision; a timer outlives every process that knew of it.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import path from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { Decision, RunId } from '../../src/domain/types.ts';
import { testDatabase, type TestDatabase } from '../support/db.ts';
import { newRun, waitFor } from '../support/engine.ts';

let db: TestDatabase;
const children: { child: ChildProcess; out: string }[] = [];
beforeAll(async () => {
  db = await testDatabase();
});
afterEach(async () => {
  const live = children.splice(0).filter(({ child: c }) => c.exitCode === null && c.signalCode === null);
  const exited = live.map(({ child }) => new Promise((r) => child.once('exit', r)));
  for (const { child } of live) child.kill('SIGKILL');
  await Promise.all(exited);
});
afterAll(async () => {
  await db.close();
});

function startWorker(name: string, env: Record<string, string> = {}) {
  const child = spawn(process.execPath, ['--import', 'tsx', path.resolve('test/support/waiting-worker-process.ts')], {
    env: { ...process.env, DATABASE_URL: db.url, WORKER_NAME: name, LEASE_MS: '1000', SLOW_TOOL_MS: '3000', ...env },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const p = { child, out: '' };
  child.stdout!.on('data', (c: Buffer) => (p.out += c.toString('utf8')));
  children.push(p);
  return p;
}
const events = (out: string, event: string) => out.split('\n').filter((l) => l.includes(`"event":"${event}"`)).length;
const killed = (p: { child: ChildProcess }) => new Promise((r) => (p.child.kill('SIGKILL'), p.child.once('exit', r)));

describe('a non-idempotent tool SIGKILLed mid-call', () => {
  const cases: [string, Decision, (steps: { status: string; response: unknown }) => void, number][] = [
    ['approve runs it again', { decision: 'approve' }, (s) => expect(s).toMatchObject({ status: 'DONE', response: 'charged' }), 2],
    [
      'deny tells the model it may or may not have happened',
      { decision: 'deny', reason: 'checked the bank: not charged' },
      (s) => {
        expect(s.status).toBe('ERROR');
        expect(s.response).toMatch(/may or may not have happened.*checked the bank: not charged/);
      },
      1,
    ],
    [
      'complete records the given result without running it',
      { decision: 'complete', result: { charged: true, receipt: 'R-1' } },
      (s) => expect(s).toMatchObject({ status: 'DONE', response: '{"charged":true,"receipt":"R-1"}' }),
      1,
    ],
  ];
  for (const [name, decision, check, executions] of cases) {
    it(`waits for a decision (kind "decision"); ${name}`, async () => {
      const run = await newRun(db.records, `charge the card (${name})`);
      const a = startWorker('worker-A');
      await waitFor('A to start the tool', async () => a.out.includes('"event":"tool"'), 30_000);
      await killed(a);
      const b = startWorker('worker-B');
      const waiting = await waitFor(
        'the run to wait for a decision',
        async () => {
          const r = await db.records.state(run.id);
          return r.status === 'WAITING' && r;
        },
        30_000,
      );
      expect(waiting.waiting).toMatchObject({ kind: 'decision', toolCalls: [{ toolName: 'charge' }] });
      expect(waiting.lockedBy).toBeNull();
      const toolUseId = waiting.waiting!.toolCalls[0]!.toolUseId;
      expect(await db.records.decide(run.id, toolUseId, decision)).toEqual({ id: run.id, status: 'QUEUED' });
      await waitFor('the run to finish', async () => (await db.records.state(run.id)).status === 'SUCCEEDED', 30_000);
      const steps = await db.store.steps(run.id as RunId);
      expect(steps.map((s) => s.kind)).toEqual(['MODEL', 'TOOL', 'MODEL']);
      check(steps[1]!);
      expect(events(a.out, 'tool') + events(b.out, 'tool')).toBe(executions);
      expect(events(a.out, 'model') + events(b.out, 'model')).toBe(2); // the model call before the crash is not repeated
    }, 90_000);
  }
});

describe('the sleep tool', () => {
  it('wakes a 3 s sleep within a second or two of wakeAt across a restart of every process', async () => {
    const run = await newRun(db.records, 'wait 3 seconds');
    const a = startWorker('worker-A', { TOOL: 'sleep', SLEEP_SECONDS: '3' });
    const waiting = await waitFor(
      'the run to sleep',
      async () => {
        const r = await db.records.state(run.id);
        return r.status === 'WAITING' && r;
      },
      30_000,
    );
    expect(waiting.waiting).toMatchObject({ kind: 'timer', toolCalls: [{ toolName: 'sleep', input: { seconds: 3 } }] });
    expect(waiting.lockedBy).toBeNull();
    const wakeAt = waiting.waiting!.wakeAt!;
    a.child.kill('SIGTERM');
    await new Promise((r) => a.child.once('exit', r));
    const b = startWorker('worker-B', { TOOL: 'sleep' }); // polls once a minute: only its timer can wake it in time
    await waitFor('B to be ready', async () => b.out.includes('"event":"ready"'), 30_000);
    // A process needs a few seconds to start on a busy machine: when B is up only after wakeAt, it
    // must claim the due run as it starts.
    const up = Math.max(Date.now(), wakeAt.getTime());
    await waitFor('the run to finish', async () => (await db.records.state(run.id)).status === 'SUCCEEDED', 30_000);
    const steps = await db.store.steps(run.id as RunId);
    expect(steps.map((s) => [s.kind, s.status, s.worker])).toEqual([
      ['MODEL', 'DONE', 'worker-A'],
      ['TOOL', 'DONE', 'worker-B'],
      ['MODEL', 'DONE', 'worker-B'],
    ]);
    expect(steps[1]!.response).toBe('slept 3 seconds');
    const woke = steps[1]!.finishedAt!.getTime();
    expect(woke).toBeGreaterThanOrEqual(wakeAt.getTime());
    expect(woke - up).toBeLessThan(2_000);
  }, 90_000);
});
