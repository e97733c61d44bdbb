/**
 * The text of stored events as SSE readers get it: the events the database writes itself (run.started
 * at a claim, run.waiting and run.resumed, attempt.abandoned and run.finished when a run ends) are
 * compact JSON, as JSON.stringify writes the worker's events.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RunId } from '../../src/domain/types.ts';
import { newEvent } from '../../src/ports/new-event.ts';
import { defineTool } from '../../src/tools/types.ts';
import { testDatabase, type TestDatabase } from '../support/db.ts';
import { newRun, testWorker } from '../support/engine.ts';
import { startEventsApi, type EventsApi } from '../support/events-api.ts';
import { ScriptedLlm } from '../support/scripted-llm.ts';

let db: TestDatabase;
let api: EventsApi;
beforeAll(async () => {
  db = await testDatabase();
  api = await startEventsApi(db.url);
});
afterAll(async () => {
  await api?.close();
  await db?.close();
});

/** A finished run's SSE stream as sent: [event type, data line] per frame. */
async function sseFrames(runId: RunId): Promise<[string, string][]> {
  const res = await fetch(`${api.url}/api/runs/${runId}/events`, { headers: { accept: 'text/event-stream' } });
  expect(res.status).toBe(200);
  const text = await res.text(); // the stream ends after run.finished
  return text
    .split('\n\n')
    .map((frame) => frame.split('\n'))
    .filter((lines) => lines.some((l) => l.startsWith('event: ')))
    .map((lines) => [lines.find((l) => l.startsWith('event: '))!.slice(7), lines.find((l) => l.startsWith('data: '))!.slice(6)]);
}

function expectCompact(frames: [string, string][]): void {
  for (const [type, data] of frames) expect({ type, data }).toEqual({ type, data: JSON.stringify(JSON.parse(data)) });
}

describe('event text', () => {
  it('run.started, run.waiting, run.resumed and run.finished: compact JSON, like every other event', async () => {
    const closeTicket = defineTool<{ ticketId: string; note: string }>({
      name: 'close_ticket',
      description: 'closes a ticket',
      inputSchema: { type: 'object' },
      needsApproval: true,
      execute: async (input) => `closed ${input.ticketId}`,
    });
    // Values with the characters a formatter spaces out: colons, commas, quotes, nested objects.
    const llm = new ScriptedLlm()
      .thenToolUse('toolu_a', 'close_ticket', { ticketId: 'T-1', note: 'a: b, "c" {d}', tags: [1, { k: null }] })
      .thenText('closed: "T-1", {done}');
    const worker = testWorker(db.store, llm, [closeTicket], { name: 'worker : one' });
    const run = await newRun(db.records, 'close T-1');
    expect((await worker.runOnce())?.status).toBeNull();
    await db.records.decide(run.id, 'toolu_a', { decision: 'approve' });
    expect((await worker.runOnce())?.status).toBe('SUCCEEDED');

    const frames = await sseFrames(run.id);
    expect(frames.map(([type]) => type)).toEqual(expect.arrayContaining(['run.started', 'run.waiting', 'run.resumed', 'run.finished']));
    expectCompact(frames);
    const data = (type: string) => frames.filter(([t]) => t === type).map(([, d]) => JSON.parse(d));
    expect(data('run.started')).toEqual([
      { worker: 'worker : one', attempt: 1 },
      { worker: 'worker : one', attempt: 1 },
    ]);
    expect(data('run.waiting')[0]).toMatchObject({
      kind: 'approval',
      toolCalls: [
        { toolUseId: 'toolu_a', toolName: 'close_ticket', input: { ticketId: 'T-1', note: 'a: b, "c" {d}', tags: [1, { k: null }] } },
      ],
    });
    expect(data('run.finished')).toEqual([{ status: 'SUCCEEDED', output: 'closed: "T-1", {done}', error: null, stopReason: 'end_turn' }]);
  });

  it('attempt.abandoned, written when a run ends with an attempt still streaming: compact JSON', async () => {
    const run = await newRun(db.records, 'ends mid-stream', { agent: 'mid-stream' });
    const [claimed] = await db.store.claim({ worker: 'W', leaseMs: 10_000 }, 1, [], ['mid-stream']);
    expect(claimed?.id).toBe(run.id);
    await db.store.eventsClaimed(run.id, claimed!.lease, claimed!.attempts);
    await db.store.appendEvents(run.id, claimed!.lease, [newEvent('step.started', { seq: 1, kind: 'MODEL', attempt: 1 })]);
    await db.store.finish(run.id, claimed!.lease, { status: 'FAILED', error: 'stopped: "here", now' });

    const frames = await sseFrames(run.id);
    expect(frames.map(([type]) => type)).toEqual(['run.started', 'step.started', 'attempt.abandoned', 'run.finished']);
    expectCompact(frames);
  });
});
