/**
 * Schedules in-process, on real PostgreSQL, through the HTTP API as a user drives them: one run per slot
 * (each naming its schedule and slot), two runtimes on one database making each slot once, pause and
 * resume, trigger, delete, overlap, backfill, a schedule made again under its name, and bad input.
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { defineAgent } from '../../src/agents/define-agent.ts';
import { type AgentRuntime, createRuntime } from '../../src/runtime/create-runtime.ts';
import { defineSchedule } from '../../src/runtime/declared-schedules.ts';
import { startScheduler } from '../../src/runtime/scheduler.ts';
import type { RunDefaults } from '../../src/runs/new-run.ts';
import { Schedules } from '../../src/store/schedules.ts';
import { testDatabase, type TestDatabase } from '../support/db.ts';
import { silentLogger } from '../support/engine.ts';
import { response, ScriptedLlm, usage } from '../support/scripted-llm.ts';
import { waitFor } from '../support/wait-for.ts';

let db: TestDatabase;
const runtimes: AgentRuntime[] = [];
/** Slow runs wait until this is called; after it, none waits. */
let release: () => void = () => {};
let released = Promise.resolve();

beforeEach(async () => {
  db = await testDatabase();
  released = new Promise<void>((r) => (release = r));
});
afterEach(async () => {
  release();
  await Promise.all(runtimes.splice(0).map((rt) => rt.close()));
  await db.close();
});

/** Answers at once; a run whose input starts with "slow" waits for `release()`. */
const llm = () =>
  new ScriptedLlm(async (req) => {
    if (String(req.messages[0]!.content).startsWith('slow')) await released;
    return response([{ type: 'text', text: 'done' }], 'end_turn', usage(10, 1));
  });

const reporter = defineAgent({ name: 'reporter', system: 'You report.' });

async function start(extra: Partial<Parameters<typeof createRuntime>[0]> = {}): Promise<AgentRuntime> {
  const rt = await createRuntime({ agents: [reporter], api: { port: 0 }, databaseUrl: db.url, logger: silentLogger, llm: llm(), ...extra });
  runtimes.push(rt);
  return rt;
}

async function api<T = Record<string, unknown>>(rt: AgentRuntime, method: string, path: string, body?: unknown) {
  const res = await fetch(`${rt.url}${path}`, {
    method,
    headers: body === undefined ? {} : { 'content-type': 'application/json' },
    body: body === undefined ? null : JSON.stringify(body),
  });
  return { status: res.status, body: (res.status === 204 ? null : await res.json()) as T };
}

type ScheduleJson = {
  id: string;
  nextRunAt: string | null;
  lastRunAt: string | null;
  skipped: { missed: number; overlap: number; lastReason: string | null };
};

/** The runs a schedule made, as the database holds them, oldest slot first. */
async function slotRuns(scheduleId: string) {
  const { rows } = await db.pool.query<{ id: string; scheduled_for: Date | null; status: string }>(
    'SELECT id, scheduled_for, status FROM durable_agent.run WHERE schedule_id = $1 ORDER BY scheduled_for NULLS LAST',
    [scheduleId],
  );
  return rows;
}

/** Whether `times` are whole seconds, one apart, none missing. */
const consecutiveSeconds = (times: Date[]) =>
  times.every((t, i) => t.getMilliseconds() === 0 && (i === 0 || t.getTime() - times[i - 1]!.getTime() === 1000));

describe('a schedule', () => {
  it('makes one run per slot, each naming its schedule and slot, listed by scheduleId', async () => {
    const rt = await start();
    const created = await api<ScheduleJson & { name: string; timezone: string; catchUp: string; overlap: string }>(
      rt,
      'POST',
      '/api/schedules',
      {
        name: 'every-second',
        cron: '* * * * * *',
        input: 'report',
        overlap: 'allow',
      },
    );
    expect(created.status).toBe(201);
    expect(created.body).toMatchObject({ name: 'every-second', timezone: 'UTC', catchUp: 'latest', overlap: 'allow', source: 'api' });
    expect(Date.parse(created.body.nextRunAt!) - Date.now()).toBeLessThanOrEqual(1000);
    await waitFor('four slots made', async () => (await slotRuns(created.body.id)).length >= 4, 15_000);
    const runs = await slotRuns(created.body.id);
    expect(consecutiveSeconds(runs.map((r) => r.scheduled_for!))).toBe(true);
    const listed = await api<{ runs: { id: string; scheduleId: string; scheduledFor: string }[] }>(
      rt,
      'GET',
      `/api/runs?scheduleId=${created.body.id}&limit=100`,
    );
    expect(listed.body.runs.length).toBeGreaterThanOrEqual(4);
    expect(listed.body.runs.every((r) => r.scheduleId === created.body.id && r.scheduledFor !== null)).toBe(true);
    const again = await api<ScheduleJson>(rt, 'GET', `/api/schedules/${created.body.id}`);
    expect(again.body.lastRunAt).not.toBeNull();
    expect(Date.parse(again.body.nextRunAt!)).toBeGreaterThan(Date.parse(created.body.nextRunAt!));
  });

  it('two runtimes on one database make each slot once, and together miss none', async () => {
    const a = await start();
    await start();
    const { body } = await api<ScheduleJson>(a, 'POST', '/api/schedules', {
      name: 'shared',
      cron: '* * * * * *',
      input: 'x',
      overlap: 'allow',
    });
    await waitFor('six slots made', async () => (await slotRuns(body.id)).length >= 6, 20_000);
    const times = (await slotRuns(body.id)).map((r) => r.scheduled_for!);
    expect(new Set(times.map((t) => t.getTime())).size).toBe(times.length);
    expect(consecutiveSeconds(times)).toBe(true);
  });

  it('none at all: the scheduler looks once and sleeps, rather than looking again at once, forever', async () => {
    let statements = 0;
    const counted = {
      query: ((...args: Parameters<typeof db.pool.query>) => {
        statements++;
        return db.pool.query(...args);
      }) as typeof db.pool.query,
    };
    const store = new Schedules(counted);
    expect(await store.nextDueInMs(['reporter'])).toBeNull();
    statements = 0;
    // With no schedule, nothing is fired: the defaults runs are made with are never read.
    const scheduler = startScheduler({
      store,
      records: { createForSlots: async () => [] },
      defaults: {} as RunDefaults,
      agents: ['reporter'],
      logger: silentLogger,
    });
    try {
      await new Promise((r) => setTimeout(r, 500));
      expect(statements).toBe(2); // the claim of due schedules, and when the next one is due: none
    } finally {
      await scheduler.close();
    }
  });

  it('pauses and resumes (the paused slots are not caught up), is triggered outside its slots, and deleted', async () => {
    const rt = await start();
    const { body } = await api<ScheduleJson>(rt, 'POST', '/api/schedules', {
      name: 'p',
      cron: '* * * * * *',
      input: 'x',
      overlap: 'allow',
    });
    await waitFor('a slot', async () => (await slotRuns(body.id)).length >= 1, 10_000);
    const paused = await api<ScheduleJson & { paused: boolean }>(rt, 'PATCH', `/api/schedules/${body.id}`, { paused: true });
    expect(paused.body).toMatchObject({ paused: true, nextRunAt: null });
    const before = (await slotRuns(body.id)).length;
    await new Promise((r) => setTimeout(r, 2500)); // two slots pass while it is paused: the scenario
    expect((await slotRuns(body.id)).length).toBeLessThanOrEqual(before + 1); // one may have been under way as it paused
    const pausedCount = (await slotRuns(body.id)).length;
    const resumedAt = Date.now();
    await api(rt, 'PATCH', `/api/schedules/${body.id}`, { paused: false });
    await waitFor('a slot after the resume', async () => (await slotRuns(body.id)).length > pausedCount, 10_000);
    const afterResume = (await slotRuns(body.id)).slice(pausedCount).map((r) => r.scheduled_for!.getTime());
    expect(afterResume.every((t) => t >= resumedAt - 1000)).toBe(true);

    const triggered = await api<{ id: string; scheduleId: string }>(rt, 'POST', `/api/schedules/${body.id}/trigger`);
    expect(triggered.status).toBe(201);
    expect(triggered.body.scheduleId).toBe(body.id);
    const run = await rt.runs.get(triggered.body.id);
    expect(run).toMatchObject({ scheduleId: body.id, scheduledFor: null });

    expect((await api(rt, 'DELETE', `/api/schedules/${body.id}`)).status).toBe(204);
    const atDelete = (await slotRuns(body.id)).length;
    await new Promise((r) => setTimeout(r, 2000)); // slots pass after the delete: the scenario
    expect((await slotRuns(body.id)).length).toBeLessThanOrEqual(atDelete + 1);
    expect((await api(rt, 'GET', `/api/schedules/${body.id}`)).status).toBe(404);
  });

  it('of an agent no process serves any more makes nothing, while the schedules of served agents go on', async () => {
    const helper = defineAgent({ name: 'helper', system: 'You help.' });
    const both = await start({ agents: [reporter, helper] });
    const gone = await api<ScheduleJson>(both, 'POST', '/api/schedules', {
      name: 'gone',
      agent: 'helper',
      cron: '* * * * * *',
      input: 'x',
      overlap: 'allow',
    });
    expect(gone.status).toBe(201);
    await waitFor('a slot of the helper', async () => (await slotRuns(gone.body.id)).length >= 1, 10_000);
    await both.close();
    const atClose = (await slotRuns(gone.body.id)).length;
    const reporterOnly = await start();
    const served = await api<ScheduleJson>(reporterOnly, 'POST', '/api/schedules', {
      name: 'served',
      cron: '* * * * * *',
      input: 'x',
      overlap: 'allow',
    });
    await waitFor('three slots of the served schedule', async () => (await slotRuns(served.body.id)).length >= 3, 15_000);
    expect(await slotRuns(gone.body.id)).toHaveLength(atClose);
  });

  it("with overlap 'skip' makes no run while its previous one is still active, and says so", async () => {
    const rt = await start();
    const { body } = await api<ScheduleJson>(rt, 'POST', '/api/schedules', { name: 'slow', cron: '* * * * * *', input: 'slow report' });
    await waitFor('two slots skipped for overlap', async () => {
      const s = (await api<ScheduleJson>(rt, 'GET', `/api/schedules/${body.id}`)).body;
      return s.skipped.overlap >= 2 && s;
    });
    expect(await slotRuns(body.id)).toHaveLength(1);
    expect((await api<ScheduleJson>(rt, 'GET', `/api/schedules/${body.id}`)).body.skipped.lastReason).toBe('overlap');
    release();
    await waitFor('a run once the first has finished', async () => (await slotRuns(body.id)).length >= 2, 10_000);
  });

  it('backfills one run per slot of a range, and never a second run for a slot, even under a schedule made again by its name', async () => {
    const rt = await start();
    const day = { cron: '0 * * * *', input: 'hourly', paused: true };
    const first = await api<ScheduleJson>(rt, 'POST', '/api/schedules', { name: 'hourly', ...day });
    const filled = await api<{ runs: { scheduledFor: string }[]; existing: number }>(
      rt,
      'POST',
      `/api/schedules/${first.body.id}/backfill`,
      {
        from: '2026-01-01T00:00:00Z',
        to: '2026-01-01T05:30:00Z',
      },
    );
    expect(filled.status).toBe(201);
    expect(filled.body.runs.map((r) => r.scheduledFor)).toEqual([0, 1, 2, 3, 4, 5].map((h) => `2026-01-01T0${h}:00:00.000Z`));
    await api(rt, 'DELETE', `/api/schedules/${first.body.id}`);
    const second = await api<ScheduleJson>(rt, 'POST', '/api/schedules', { name: 'hourly', ...day });
    const again = await api<{ runs: unknown[]; existing: number }>(rt, 'POST', `/api/schedules/${second.body.id}/backfill`, {
      from: '2026-01-01T04:00:00Z',
      to: '2026-01-01T07:00:00Z',
    });
    expect(again.body).toMatchObject({ existing: 2 });
    expect(again.body.runs).toHaveLength(2);
  });

  it('answers a bad cron, time zone, name or agent with a 400 naming the field, and a taken name with a 409', async () => {
    const rt = await start();
    const bad = async (body: object) => {
      const r = await api<{ error: { message: string; issues?: { path: string }[] } }>(rt, 'POST', '/api/schedules', {
        name: 'n',
        cron: '* * * * *',
        input: 'x',
        ...body,
      });
      return [r.status, r.body.error.issues?.[0]?.path ?? null, r.body.error.message];
    };
    expect(await bad({ cron: '61 * * * *' })).toEqual([400, 'cron', expect.stringMatching(/minute/)]);
    expect(await bad({ cron: 'every day' })).toEqual([400, 'cron', expect.stringMatching(/2 fields/)]);
    expect(await bad({ timezone: 'Mars/Base' })).toEqual([400, 'timezone', expect.stringMatching(/unknown time zone/)]);
    expect(await bad({ name: 'bad name!' })).toEqual([400, 'name', expect.any(String)]);
    expect(await bad({ agent: 'nobody' })).toEqual([400, 'agent', expect.stringMatching(/no agent "nobody"/)]);
    expect((await bad({ catchUp: 'sometimes' }))[0]).toBe(400);
    expect((await api(rt, 'POST', '/api/schedules', { name: 'taken', cron: '* * * * *', input: 'x' })).status).toBe(201);
    expect((await api(rt, 'POST', '/api/schedules', { name: 'taken', cron: '* * * * *', input: 'x' })).status).toBe(409);
    expect((await api(rt, 'PATCH', '/api/schedules/00000000-0000-4000-8000-000000000000', { paused: true })).status).toBe(404);
  });

  it('declared in code is made at start, changed to what the code says, and deleted once no longer declared', async () => {
    const nightly = defineSchedule({
      name: 'nightly',
      cron: '0 3 * * *',
      timezone: 'Europe/Berlin',
      agent: 'reporter',
      input: 'the night report',
    });
    expect(() => defineSchedule({ name: 'x', cron: 'nope', input: 'y' })).toThrow(/invalid schedule "x": cron/);
    const rt = await start({ schedules: [nightly] });
    const [s] = await rt.schedules.list();
    expect(s).toMatchObject({ name: 'nightly', source: 'code', timezone: 'Europe/Berlin', run: { input: 'the night report' } });
    // Its next slot is 03:00 in Berlin, whatever the time of year.
    const berlin = new Intl.DateTimeFormat('en-GB', { timeZone: 'Europe/Berlin', hour: '2-digit', minute: '2-digit', hourCycle: 'h23' });
    expect(berlin.format(s!.nextRunAt!)).toBe('03:00');
    await rt.close();
    const changed = await start({ schedules: [defineSchedule({ ...nightly, cron: '0 4 * * *' })] });
    expect((await changed.schedules.list()).map((x) => [x.name, x.cron])).toEqual([['nightly', '0 4 * * *']]);
    await changed.close();
    const none = await start({ schedules: [] });
    expect(await none.schedules.list()).toEqual([]);
  });

  it("after every process was down for several slots: 'latest' makes one run for the latest, 'all' one per slot, 'none' none", async () => {
    const first = await start();
    // Hourly: the next process has most of an hour to start before another slot comes, however slow the machine.
    const hourly = { cron: '0 * * * *', input: 'x', overlap: 'allow' };
    const ids: Record<string, string> = {};
    for (const catchUp of ['latest', 'all', 'none']) {
      ids[catchUp] = (await api<ScheduleJson>(first, 'POST', '/api/schedules', { name: `catch-${catchUp}`, catchUp, ...hourly })).body.id;
    }
    await first.close();
    // Every process is down. What an outage leaves: each schedule's next slot four hours in the past, by the
    // database's clock, at a moment the latest due slot is 10 s late or more (past ON_TIME_MS) and the next is
    // a minute away or more.
    await waitFor(
      'a moment 10 s to 59 min past the hour',
      async () => {
        const { rows } = await db.pool.query<{ s: number }>("SELECT extract(epoch FROM now() - date_trunc('hour', now()))::float8 AS s");
        return rows[0]!.s >= 10 && rows[0]!.s < 3540;
      },
      80_000,
    );
    const { rows } = await db.pool.query<{ latest: Date }>(`SELECT date_trunc('hour', now()) AS latest`);
    const latest = rows[0]!.latest;
    await db.pool.query(`UPDATE durable_agent.schedule SET next_run_at = $1::timestamptz - interval '4 hours'`, [latest]);
    const missed = [4, 3, 2, 1, 0].map((h) => latest.getTime() - h * 3_600_000);

    await start();
    await waitFor('every schedule caught up', async () => {
      const { rows: due } = await db.pool.query('SELECT 1 FROM durable_agent.schedule WHERE next_run_at <= $1', [latest]);
      return due.length === 0;
    });
    const made = async (catchUp: string) =>
      (await slotRuns(ids[catchUp]!)).map((r) => r.scheduled_for!.getTime()).filter((t) => t <= latest.getTime());
    expect(await made('latest')).toEqual([latest.getTime()]);
    expect(await made('all')).toEqual(missed);
    expect(await made('none')).toEqual([]);
    const none = (await api<ScheduleJson>(runtimes.at(-1)!, 'GET', `/api/schedules/${ids.none}`)).body;
    expect(none.skipped).toMatchObject({ missed: 5, lastReason: 'missed' });
  }, 150_000);

  it('a PATCH recomputes the next slot when the expression changes, clears with null, and refuses a new name; a tenant sees its own only', async () => {
    const rt = await start();
    const made = await rt.schedules.create({ name: 'daily', cron: '0 9 * * *', input: 'x', model: 'claude-x', maxSteps: 5 });
    const changed = await rt.schedules.update(made.id, { cron: '0 21 * * *', model: null, maxSteps: null });
    expect(changed.nextRunAt!.getUTCHours()).toBe(21);
    expect(changed.run).toEqual({ input: 'x' });
    await expect(rt.schedules.update(made.id, { name: 'renamed' })).rejects.toThrow(/name: cannot change/);
    await expect(rt.schedules.create({ name: 'never', cron: '0 0 31 2 *', input: 'x' })).rejects.toThrow(
      /cron: "0 0 31 2 \*" names no time that comes/,
    );
    await expect(
      rt.schedules.backfill(made.id, { from: new Date().toISOString(), to: new Date(Date.now() + 86_400_000).toISOString() }),
    ).rejects.toThrow(/to: must not be later than now/);
    // Another tenant's schedule is not there for this one.
    const theirs = await rt.schedules.create({ name: 'theirs', cron: '0 9 * * *', input: 'x', tenant: 'acme' });
    expect(await rt.schedules.get(theirs.id, 'default')).toBeNull();
    await expect(rt.schedules.update(theirs.id, { paused: true }, 'default')).rejects.toThrow(/not found/);
    await expect(rt.schedules.trigger(theirs.id, 'default')).rejects.toThrow(/not found/);
    expect((await rt.schedules.list({ tenant: 'default' })).map((s) => s.name)).toEqual(['daily']);
  });

  it('processes starting at once with the same declared schedules all start, and the schedule is made once', async () => {
    const nightly = defineSchedule({ name: 'nightly', cron: '0 3 * * *', agent: 'reporter', input: 'x' });
    const started = await Promise.allSettled([1, 2, 3].map(() => start({ schedules: [nightly] })));
    expect(started.map((s) => s.status)).toEqual(['fulfilled', 'fulfilled', 'fulfilled']);
    expect((await runtimes[0]!.schedules.list()).map((s) => s.name)).toEqual(['nightly']);
  });
});
