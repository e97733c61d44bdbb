/**
 * The events a step row carries (src/store/step-events.ts, migration 0023) read as the event rows the
 * checkpoints wrote before them: the same types, the same data text key for key, ids that go up in
 * the order they were written, pages of any size that add up to the whole, sealed payloads opened.
 */
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RunId } from '../../src/domain/types.ts';
import { newEvent } from '../../src/ports/new-event.ts';
import type { ModelCheckpoint } from '../../src/ports/engine-store.ts';
import { Sealer } from '../../src/store/encryption.ts';
import { RunEvents, type StoredEvent } from '../../src/store/run-events.ts';
import { RunStore } from '../../src/store/run-store.ts';
import { RunRecords } from '../../src/store/run-records.ts';
import { storedEvents, testDatabase, type TestDatabase } from '../support/db.ts';
import { newRun } from '../support/engine.ts';

let db: TestDatabase;
beforeAll(async () => {
  db = await testDatabase();
});
afterAll(async () => {
  await db.close();
});

const MARK = 'classified-7f3a';
// Past tool.finished's cut (16,384 UTF-16 units), with characters of two units before it (the database
// counts them as one) and across it (cut in two, as JavaScript cuts; the half left is stored as U+FFFD,
// as in any event).
const LONG = `${MARK} 😀${'x'.repeat(16_365)}😀${'y'.repeat(100)}`;
const INPUT = { zeta: MARK, alpha: [1, { nested: 'a: b, "c"' }], mid: null };

const model = (seq: number, more: Partial<ModelCheckpoint> = {}): ModelCheckpoint => ({
  seq,
  request: { model: 'm', maxTokens: 100, systemDigest: null, toolsDigest: null },
  content: [
    { type: 'text', text: `${MARK} turn ${seq}` },
    { type: 'tool_use', id: `toolu_${seq}`, name: 'lookup', input: INPUT },
  ],
  stopReason: 'tool_use',
  usage: { inputTokens: 11, outputTokens: 7, cacheCreationInputTokens: 3, cacheReadInputTokens: 5 },
  budgetTokens: 18,
  attempts: 1,
  costUsd: 0.01,
  latencyMs: 41.6,
  ...more,
});

/** A run of every kind of step write, through `store`: what it reads back. */
async function aRun(store: RunStore, records: RunRecords, sealer?: Sealer): Promise<{ id: RunId; events: StoredEvent[] }> {
  const run = await newRun(records, 'every kind of step');
  const [claimed] = await store.claim({ worker: 'W', leaseMs: 60_000 }, 1);
  expect(claimed?.id).toBe(run.id);
  const lease = claimed!.lease;
  await store.eventsClaimed(run.id, lease, 1);
  const tool = (seq: number, id: string) => ({ seq, toolUseId: id, toolName: 'lookup', input: INPUT });
  // Streamed text written with the step, the next tool call started in the same statement.
  await store.checkpointModel(
    run.id,
    lease,
    model(1, {
      streamed: [
        newEvent('step.started', { seq: 1, kind: 'MODEL', attempt: 1 }),
        newEvent('text.delta', { seq: 1, attempt: 1, text: `${MARK} turn 1` }),
      ],
    }),
    { startNext: tool(2, 'toolu_1') },
  );
  // A long result, and the next call started with it; then an error, its call started on its own.
  await store.finishTool(
    run.id,
    lease,
    { seq: 2, toolUseId: 'toolu_1', status: 'DONE', result: LONG, latencyMs: 3.4 },
    tool(3, 'toolu_1b'),
  );
  await store.finishTool(run.id, lease, { seq: 3, toolUseId: 'toolu_1b', status: 'ERROR', result: 'no such key', latencyMs: 1 });
  await store.startTool(run.id, lease, tool(4, 'toolu_1c'));
  await store.finishTool(run.id, lease, { seq: 4, toolUseId: 'toolu_1c', status: 'DONE', result: '{"found":true}', latencyMs: 0 });
  // The last step, a compaction's, ends the run.
  await store.checkpointModel(
    run.id,
    lease,
    model(5, {
      request: { model: 'm', maxTokens: 100, systemDigest: null, toolsDigest: null, compaction: { keptMessages: 2 } },
      content: [{ type: 'text', text: 'summary' }],
      stopReason: 'end_turn',
    }),
    { end: { status: 'SUCCEEDED', output: 'done' } },
  );
  return { id: run.id, events: await storedEvents(db.pool, run.id, sealer) };
}

/** The events' data as the checkpoints wrote them as rows, before migration 0023. */
const EXPECTED: [type: string, data: object][] = [
  ['run.started', { worker: 'W', attempt: 1 }],
  ['step.started', { seq: 1, kind: 'MODEL', attempt: 1 }],
  ['text.delta', { seq: 1, attempt: 1, text: `${MARK} turn 1` }],
  [
    'step.finished',
    {
      seq: 1,
      kind: 'MODEL',
      status: 'DONE',
      stopReason: 'tool_use',
      inputTokens: 11,
      outputTokens: 7,
      cacheReadInputTokens: 5,
      cacheCreationInputTokens: 3,
      latencyMs: 42,
    },
  ],
  ['step.started', { seq: 2, kind: 'TOOL' }],
  ['tool.started', { seq: 2, toolUseId: 'toolu_1', toolName: 'lookup', input: INPUT }],
  ['tool.finished', { seq: 2, toolUseId: 'toolu_1', isError: false, output: `${LONG.slice(0, 16_383)}\uFFFD`, truncated: true }],
  ['step.finished', { seq: 2, kind: 'TOOL', status: 'DONE', latencyMs: 3 }],
  ['step.started', { seq: 3, kind: 'TOOL' }],
  ['tool.started', { seq: 3, toolUseId: 'toolu_1b', toolName: 'lookup', input: INPUT }],
  ['tool.finished', { seq: 3, toolUseId: 'toolu_1b', isError: true, output: 'no such key' }],
  ['step.finished', { seq: 3, kind: 'TOOL', status: 'ERROR', latencyMs: 1 }],
  ['step.started', { seq: 4, kind: 'TOOL' }],
  ['tool.started', { seq: 4, toolUseId: 'toolu_1c', toolName: 'lookup', input: INPUT }],
  ['tool.finished', { seq: 4, toolUseId: 'toolu_1c', isError: false, output: '{"found":true}' }],
  ['step.finished', { seq: 4, kind: 'TOOL', status: 'DONE', latencyMs: 0 }],
  [
    'step.finished',
    {
      seq: 5,
      kind: 'MODEL',
      status: 'DONE',
      stopReason: 'end_turn',
      inputTokens: 11,
      outputTokens: 7,
      cacheReadInputTokens: 5,
      cacheCreationInputTokens: 3,
      latencyMs: 42,
      compaction: true,
    },
  ],
  ['run.finished', { status: 'SUCCEEDED', output: 'done', error: null, stopReason: null }],
];

describe('events read from step rows', () => {
  for (const sealed of [false, true]) {
    it(`read as the rows written before${sealed ? ', with every payload sealed' : ''}: types, data text, ids in order, any page size`, async () => {
      const opts = sealed ? { sealer: new Sealer([{ id: 'k', key: randomBytes(32) }]) } : {};
      const { id, events } = await aRun(new RunStore(db.pool, opts), new RunRecords(db.pool, opts), opts.sealer);
      // Key for key, as JSON.stringify wrote them: the text a reader is served.
      expect(events.map((e) => [e.type, e.data])).toEqual(EXPECTED.map(([type, data]) => [type, JSON.stringify(data)]));
      const ids = events.map((e) => e.id);
      expect([...ids].sort((a, b) => a - b)).toEqual(ids);
      expect(new Set(ids).size).toBe(ids.length);

      // A page ends anywhere, a tool call's pair of events included: pages of 1, 2 and 3 add up to the whole.
      const reader = new RunEvents(db.pool, opts);
      for (const size of [1, 2, 3]) {
        const paged: StoredEvent[] = [];
        for (;;) {
          const page = await reader.page(id, paged.at(-1)?.id ?? 0, size);
          expect(page.length).toBeLessThanOrEqual(size);
          paged.push(...page);
          if (page.length < size) break;
        }
        expect(paged, `pages of ${size}`).toEqual(events);
      }
      // From any id: what comes after it.
      for (const [i, e] of events.entries()) expect(await reader.page(id, e.id, 1000)).toEqual(events.slice(i + 1));

      if (sealed) {
        const { rows } = await db.pool.query<{ row: string }>('SELECT s::text AS row FROM durable_agent.run_step s WHERE run_id = $1', [
          id,
        ]);
        expect(rows.map((r) => r.row).join('\n')).not.toContain(MARK);
      }
    });
  }

  it('cuts a long result that reads like a sealed value where it cut the result itself', async () => {
    const run = await newRun(db.records, 'looks sealed');
    const [claimed] = await db.store.claim({ worker: 'W', leaseMs: 60_000 }, 1);
    const result = `da.enc:1:not-really ${'z'.repeat(17_000)}`;
    await db.store.startTool(run.id, claimed!.lease, { seq: 1, toolUseId: 'toolu_s', toolName: 'lookup', input: {} });
    await db.store.finishTool(run.id, claimed!.lease, { seq: 1, toolUseId: 'toolu_s', status: 'DONE', result, latencyMs: 0 });
    const finished = (await storedEvents(db.pool, run.id)).find((e) => e.type === 'tool.finished');
    expect(JSON.parse(finished!.data)).toEqual({
      seq: 1,
      toolUseId: 'toolu_s',
      isError: false,
      output: result.slice(0, 16_384),
      truncated: true,
    });
  });

  it('leaves the step rows of before alone: their events are the rows they wrote', async () => {
    const run = await newRun(db.records, 'from before');
    // A step as a checkpoint before migration 0023 wrote it: the row without ids, its events as rows.
    await db.pool.query(
      `INSERT INTO durable_agent.run_step (run_id, seq, kind, status, response, latency_ms) VALUES ($1, 1, 'MODEL', 'DONE', '[]', 5)`,
      [run.id],
    );
    await db.pool.query(
      `INSERT INTO durable_agent.run_event (run_id, type, data) VALUES ($1, 'step.finished', '{"seq":1,"kind":"MODEL","status":"DONE","latencyMs":5}')`,
      [run.id],
    );
    expect((await storedEvents(db.pool, run.id)).map((e) => [e.type, e.data])).toEqual([
      ['step.finished', '{"seq":1,"kind":"MODEL","status":"DONE","latencyMs":5}'],
    ]);
  });
});
