/**
 * Live events are announced (NOTIFY) only for runs an event hub follows: a NOTIFY serializes commits
 * database-wide, so checkpoints of runs nobody reads must not pay for one.
 */
import { randomUUID } from 'node:crypto';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EventHub } from '../../src/api/event-hub.ts';
import { RUN_EVENT_CHANNEL } from '../../src/db/notifications.ts';
import type { StoredEvent } from '../../src/store/run-events.ts';
import { newEvent } from '../../src/ports/new-event.ts';
import { RunEvents } from '../../src/store/run-events.ts';
import { storedEvents, testDatabase, type TestDatabase } from '../support/db.ts';
import type { LlmClient } from '../../src/llm/types.ts';
import type { Lease } from '../../src/ports/engine-store.ts';
import type { RunId } from '../../src/domain/types.ts';
import { defineTool } from '../../src/tools/types.ts';
import { modelCheckpoint, newRun, testWorker, waitFor, workerListening } from '../support/engine.ts';
import { startEventsApi } from '../support/events-api.ts';
import { ScriptedLlm } from '../support/scripted-llm.ts';

let db: TestDatabase;
beforeAll(async () => {
  db = await testDatabase();
});
afterAll(async () => {
  await db.close();
});

it('announces the events of a run only while a hub follows it, and delivers them to its reader at once', async () => {
  const events = new RunEvents(db.pool);
  const listener = new pg.Client({ connectionString: db.url });
  await listener.connect();
  const heard: string[] = [];
  listener.on('notification', (n) => heard.push(n.payload!.split(' ')[0]!));
  await listener.query(`LISTEN ${RUN_EVENT_CHANNEL}`);
  // Poll once a minute: what the reader gets within the test comes from the announcement.
  const hub = new EventHub(events, { databaseUrl: db.url, pollMs: 60_000 });
  try {
    const followed = await newRun(db.records, 'followed');
    const unread = await newRun(db.records, 'nobody reads me');
    const leases = await db.store.claim({ worker: 'W', leaseMs: 60_000 }, 2);
    const lease = (id: string) => leases.find((c) => c.id === id)!.lease;
    const text = (seq: number, t: string) => [newEvent('text.delta', { seq, attempt: 1, text: t })];

    const got: StoredEvent[] = [];
    const following = hub.follow(followed.id, 0, {
      deliver: (e) => got.push(...e),
      failed: (e) => {
        throw e;
      },
    });
    await waitFor(
      'the hub to register the run',
      async () => (await db.pool.query('SELECT 1 FROM durable_agent.run_event_watch WHERE run_id = $1', [followed.id])).rowCount === 1,
      5_000,
    );
    await waitFor(
      "the hub's LISTEN connection",
      async () =>
        (
          await db.pool.query(
            `SELECT 1 FROM pg_stat_activity WHERE datname = current_database() AND application_name = 'durable-agent-listener' AND query LIKE 'LISTEN%'`,
          )
        ).rowCount === 1,
      5_000,
    );

    await events.append(unread.id, lease(unread.id), text(1, 'unheard'));
    // The unread run's step rows, which carry their events, while another run is followed: not announced either.
    const unreadLease = lease(unread.id);
    await db.store.checkpointModel(
      unread.id,
      unreadLease,
      modelCheckpoint(2, [{ type: 'tool_use', id: 'toolu_u', name: 'lookup', input: {} }]),
      { startNext: { seq: 3, toolUseId: 'toolu_u', toolName: 'lookup', input: {} } },
    );
    await db.store.finishTool(unread.id, unreadLease, { seq: 3, toolUseId: 'toolu_u', status: 'DONE', result: 'ok', latencyMs: 0 });
    await db.store.startTool(unread.id, unreadLease, { seq: 4, toolUseId: 'toolu_v', toolName: 'lookup', input: {} });
    await events.append(followed.id, lease(followed.id), text(1, 'heard'));
    await waitFor("the followed run's text to reach its reader", async () => got.some((e) => e.data.includes('heard')), 5_000);
    await waitFor('the announcement', async () => heard.includes(followed.id), 5_000);
    expect(heard).not.toContain(unread.id);

    // The last reader gone, the run is not announced any more.
    following.close();
    await waitFor(
      'the hub to drop the registration',
      async () => (await db.pool.query('SELECT 1 FROM durable_agent.run_event_watch WHERE run_id = $1', [followed.id])).rowCount === 0,
      5_000,
    );
    const before = heard.length;
    await events.append(followed.id, lease(followed.id), text(2, 'after the reader left'));
    // PostgreSQL delivers notifications in commit order: once a marker sent after the write is heard, an
    // announcement of the write would have been heard before it.
    await db.pool.query('SELECT pg_notify($1, $2)', [RUN_EVENT_CHANNEL, 'marker']);
    await waitFor('the marker', async () => heard.includes('marker'), 5_000);
    expect(heard.slice(before)).toEqual(['marker']);
  } finally {
    await hub.close();
    await listener.end();
  }
});

it('announces every write of a followed run with the highest id it wrote: claim, checkpoints, a wait, its end', async () => {
  const events = new RunEvents(db.pool);
  const listener = new pg.Client({ connectionString: db.url });
  await listener.connect();
  const announced = new Set<number>();
  listener.on('notification', (n) => announced.add(Number(n.payload!.split(' ')[1])));
  await listener.query(`LISTEN ${RUN_EVENT_CHANNEL}`);
  try {
    const executed: string[] = [];
    const close = defineTool<{ ticketId: string }>({
      name: 'close_ticket',
      description: 'closes a ticket',
      inputSchema: { type: 'object', properties: { ticketId: { type: 'string' } } },
      needsApproval: true,
      async execute(input) {
        executed.push(input.ticketId);
        return `closed ${input.ticketId}`;
      },
    });
    const llm = new ScriptedLlm().thenToolUse('toolu_w', 'close_ticket', { ticketId: 'T-9' }).thenText('closed it');
    const worker = testWorker(db.store, llm, [close], { name: 'announcer' });
    const run = await newRun(db.records, 'close T-9');
    await events.watch([run.id], randomUUID(), 60_000);

    expect((await worker.runOnce())?.status).toBeNull(); // waits for the approval
    await db.records.decide(run.id, 'toolu_w', { decision: 'approve' });
    expect((await worker.runOnce())?.status).toBe('SUCCEEDED');
    expect(executed).toEqual(['T-9']);

    // Every write of events announced them, whichever writer it was (a checkpoint's statement, the
    // claim's function, the triggers that start a wait or end the run): each event has an announcement
    // at or after its id, each announcement names an event, and the last names the last event. The
    // transactions of run_event rows, by their xmin, each announced their highest id.
    const rows = await storedEvents(db.pool, run.id);
    const { rows: lastOfXact } = await db.pool.query<{ id: string }>(
      `SELECT max(id) AS id FROM durable_agent.run_event WHERE run_id = $1 GROUP BY xmin::text`,
      [run.id],
    );
    expect(rows.map((r) => r.type)).toEqual(
      expect.arrayContaining([
        'run.started',
        'run.waiting',
        'run.resumed',
        'tool.started',
        'tool.finished',
        'step.finished',
        'run.finished',
      ]),
    );
    // …and each write of a step row announced its own last id: a STARTED row its tool.started, a tool
    // call done its step.finished, a model step its step.finished (the ids of migration 0023).
    const { rows: stepRows } = await db.pool.query<{ started: number | null; finished: number | null }>(
      `SELECT started_event + 1 AS started, finished_event + (kind = 'TOOL')::int AS finished FROM durable_agent.run_step WHERE run_id = $1`,
      [run.id],
    );
    const stepWrites = stepRows.flatMap((r) => [r.started, r.finished]).filter((id): id is number => id !== null);
    expect(stepWrites.length).toBeGreaterThanOrEqual(4);
    await waitFor('the announcements', async () => announced.has(rows.at(-1)!.id), 5_000);
    expect(lastOfXact.filter((r) => !announced.has(Number(r.id)))).toEqual([]);
    expect(stepWrites.filter((id) => !announced.has(id))).toEqual([]);
    expect([...announced].filter((a) => !rows.some((e) => e.id === a))).toEqual([]);
    expect(Math.max(...announced)).toBe(rows.at(-1)!.id);
  } finally {
    await listener.end();
  }
});

it('deletes the events of a deleted run with it', async () => {
  const run = await newRun(db.records, 'short-lived');
  const [claimed] = await db.store.claim({ worker: 'D', leaseMs: 60_000 }, 1, [], undefined);
  expect(claimed?.id).toBe(run.id);
  await new RunEvents(db.pool).claimed(run.id, claimed!.lease, 1);
  const count = async () =>
    (await db.pool.query<{ n: number }>('SELECT count(*)::int AS n FROM durable_agent.run_event WHERE run_id = $1', [run.id])).rows[0]!.n;
  expect(await count()).toBe(1);
  await db.pool.query('DELETE FROM durable_agent.run WHERE id = $1', [run.id]);
  expect(await count()).toBe(0);
});

/** A model that streams "part one ", then waits for `release`, then streams "part two" and answers. */
function gatedModel() {
  let reached!: () => void;
  let release!: () => void;
  const atGate = new Promise<void>((r) => (reached = r));
  const gate = new Promise<void>((r) => (release = r));
  const llm: LlmClient = {
    provider: 'test',
    async send(request, options = {}) {
      options.onText?.('part one ', 1);
      reached();
      await gate;
      options.onText?.('part two', 1);
      const usage = { inputTokens: 10, outputTokens: 4, cacheCreationInputTokens: 0, cacheReadInputTokens: 0 };
      return {
        id: 'msg_gated',
        model: request.model,
        content: [{ type: 'text', text: 'part one part two' }],
        stopReason: 'end_turn',
        usage,
        requestId: null,
        attempts: 1,
      };
    },
  };
  return { llm, atGate, release };
}

describe('a model step of a run nobody follows', () => {
  const types = async (runId: string) =>
    (await storedEvents(db.pool, runId)).map((e) => ({ type: e.type, data: JSON.parse(e.data) as { text?: string } }));
  const listening = () => workerListening(db.pool);

  it('writes its streamed text with the checkpoint, the same events in the same order', async () => {
    const model = gatedModel();
    const worker = testWorker(db.store, model.llm, [], { name: 'quiet', subscribeUrl: db.url });
    const run = await newRun(db.records, 'say two parts');
    const driving = worker.runOnce();
    await model.atGate;
    // Kept: that nothing is written meanwhile is the test; 300 ms is past the 100 ms a followed run's first batch waits.
    await new Promise((r) => setTimeout(r, 300));
    expect((await types(run.id)).map((e) => e.type)).toEqual(['run.started']);
    model.release();
    expect((await driving)?.status).toBe('SUCCEEDED');
    const events = await types(run.id);
    expect(events.map((e) => e.type)).toEqual(['run.started', 'step.started', 'text.delta', 'step.finished', 'run.finished']);
    expect(events[2]!.data.text).toBe('part one part two');
    await worker.stop();
  });

  it('writes what it gathered as soon as a reader starts following, and the rest as it streams', async () => {
    const model = gatedModel();
    const worker = testWorker(db.store, model.llm, [], { name: 'joined', subscribeUrl: db.url });
    await worker.start();
    await listening();
    const run = await newRun(db.records, 'say two parts');
    await model.atGate;
    expect((await types(run.id)).map((e) => e.type)).toEqual(['run.started']);
    await new RunEvents(db.pool).watch([run.id], randomUUID(), 60_000);
    // The model call has not returned: what is written now was written because of the follower.
    await waitFor('the gathered text', async () => (await types(run.id)).some((e) => e.type === 'text.delta'), 5_000);
    expect((await types(run.id)).map((e) => e.type)).toEqual(['run.started', 'step.started', 'text.delta']);
    model.release();
    await waitFor('the run to finish', async () => (await db.records.state(run.id)).status === 'SUCCEEDED', 5_000);
    const events = await types(run.id);
    expect(events.map((e) => e.type)).toEqual(['run.started', 'step.started', 'text.delta', 'text.delta', 'step.finished', 'run.finished']);
    expect(
      events
        .filter((e) => e.type === 'text.delta')
        .map((e) => e.data.text)
        .join(''),
    ).toBe('part one part two');
    await worker.stop();
  });
});

describe("a run's end", () => {
  const ended = async (runId: string) => {
    await db.pool.query(
      `UPDATE durable_agent.run SET status = 'FAILED', error = 'stopped', finished_at = now(), locked_by = NULL WHERE id = $1`,
      [runId],
    );
    return (await storedEvents(db.pool, runId)).map((e) => ({ type: e.type, data: JSON.parse(e.data) as Record<string, unknown> }));
  };
  /** Model step `seq` done: its row, which carries its step.finished. */
  const stepDone = (lease: Lease, id: RunId, seq: number) =>
    db.store.checkpointModel(id, lease, modelCheckpoint(seq, [{ type: 'text', text: 'one' }]));
  const streaming = async (steps: (lease: Lease, events: RunEvents, runId: RunId) => Promise<void>) => {
    const run = await newRun(db.records, 'stream and stop');
    const [claimed] = await db.store.claim({ worker: 'E', leaseMs: 60_000 }, 1, [], undefined);
    const events = new RunEvents(db.pool);
    await events.claimed(run.id, claimed!.lease, 1);
    await steps(claimed!.lease, events, run.id);
    return run.id;
  };

  it('abandons the attempt its latest step left streaming, before run.finished', async () => {
    const runId = await streaming(async (lease, events, id) => {
      // Step 1 streamed and finished; step 3 streams on a second attempt when the run ends.
      await events.append(id, lease, [
        newEvent('step.started', { seq: 1, kind: 'MODEL', attempt: 1 }),
        newEvent('text.delta', { seq: 1, attempt: 1, text: 'one' }),
      ]);
      await stepDone(lease, id, 1);
      await events.append(id, lease, [
        newEvent('step.started', { seq: 3, kind: 'MODEL', attempt: 1 }),
        newEvent('text.delta', { seq: 3, attempt: 1, text: 'th' }),
      ]);
      await events.append(id, lease, [
        newEvent('attempt.abandoned', { seq: 3, attempt: 1, reason: 'retry' }),
        newEvent('text.delta', { seq: 3, attempt: 2, text: 'three' }),
      ]);
    });
    const rows = await ended(runId);
    expect(rows.slice(-2)).toEqual([
      { type: 'attempt.abandoned', data: { seq: 3, attempt: 2, reason: 'run-ended' } },
      { type: 'run.finished', data: expect.objectContaining({ status: 'FAILED' }) },
    ]);
    expect(rows.filter((r) => r.type === 'attempt.abandoned')).toHaveLength(2);
  });

  it('abandons nothing when its latest step finished', async () => {
    const runId = await streaming(async (lease, events, id) => {
      await events.append(id, lease, [
        newEvent('step.started', { seq: 1, kind: 'MODEL', attempt: 1 }),
        newEvent('text.delta', { seq: 1, attempt: 1, text: 'one' }),
      ]);
      await stepDone(lease, id, 1);
    });
    expect((await ended(runId)).map((r) => r.type)).toEqual(['run.started', 'step.started', 'text.delta', 'step.finished', 'run.finished']);
  });
});

describe('a follower the worker did not hear of at once', () => {
  const deltas = async (runId: string) =>
    (await db.pool.query('SELECT 1 FROM durable_agent.run_event WHERE run_id = $1 AND type = $2', [runId, 'text.delta'])).rowCount ?? 0;

  it('is told by the lease renewal when the notification was missed (a worker that does not LISTEN)', async () => {
    const model = gatedModel();
    // No LISTEN connection: the follow's notification cannot reach it. Renewals every 300 ms.
    const worker = testWorker(db.store, model.llm, [], { name: 'deaf', leaseMs: 900 });
    await worker.start();
    const run = await newRun(db.records, 'say two parts');
    await model.atGate;
    await new RunEvents(db.pool).watch([run.id], randomUUID(), 60_000);
    await waitFor('the gathered text, after a renewal said the run is followed', async () => (await deltas(run.id)) > 0, 5_000);
    model.release();
    await waitFor('the run to finish', async () => (await db.records.state(run.id)).status === 'SUCCEEDED', 5_000);
    await worker.stop();
  });

  it('is announced again when a registration that had expired is renewed, and not when a live one is', async () => {
    const listener = new pg.Client({ connectionString: db.url });
    await listener.connect();
    const heard: string[] = [];
    listener.on('notification', (n) => heard.push(n.payload!));
    await listener.query('LISTEN durable_agent_run_followed');
    try {
      const run = await newRun(db.records, 'followed, lapsed, followed');
      const events = new RunEvents(db.pool);
      const hub = randomUUID();
      await events.watch([run.id], hub, -1_000); // registered, already expired
      await events.watch([run.id], hub, 60_000); // renewed after expiry: news to the worker
      await events.watch([run.id], hub, 60_000); // renewed while live: nothing new
      // Notifications arrive in commit order: a marker heard means an announcement of the last renewal would have been too.
      await db.pool.query(`SELECT pg_notify('durable_agent_run_followed', 'marker')`);
      await waitFor('the marker', async () => heard.includes('marker'), 5_000);
      expect(heard).toEqual([run.id, run.id, 'marker']);
    } finally {
      await listener.end();
    }
  });

  it('counts a reader of the JSON pages of an unfinished run as a follower', async () => {
    const api = await startEventsApi(db.url);
    try {
      const run = await newRun(db.records, 'polled');
      const watched = async () =>
        (await db.pool.query('SELECT 1 FROM durable_agent.run_event_watch WHERE run_id = $1 AND expires_at > now()', [run.id])).rowCount;
      expect(await watched()).toBe(0);
      const res = await fetch(`${api.url}/api/runs/${run.id}/events`);
      expect(res.status).toBe(200);
      expect(await res.json()).toEqual({ events: [], finished: false });
      expect(await watched()).toBe(1);
    } finally {
      await api.close();
    }
  });
});
