/**
 * `durable-agent schedules list | create | pause | resume | trigger | delete`: the schedules of a
 * running server, through its HTTP API, as `runs` does for runs. A schedule is named by its id or its
 * name.
 */
import type { z } from 'zod';
import type { ScheduleJson, SchedulePageJson, TriggeredRun } from '../api/schemas-schedules.ts';
import { commandGroup } from './command-group.ts';
import { ago, type Column, table } from './format.ts';
import type { RunsContext, RunsSubcommand } from './runs-context.ts';

type Schedule = z.infer<typeof ScheduleJson>;
type SchedulePage = z.infer<typeof SchedulePageJson>;

const json = (value: unknown) => `${JSON.stringify(value, null, 2)}\n`;
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** When `iso` is, from now: "in 4m", "3m ago". */
function when(iso: string | null, now: Date): string {
  if (iso === null) return '';
  const t = new Date(iso);
  return t >= now ? `in ${ago(now, t)}` : `${ago(t, now)} ago`;
}

/** The schedule the argument names: its id, or the name of one of the caller's schedules. */
async function scheduleOf(ctx: RunsContext): Promise<Schedule> {
  const which = ctx.args[0]!;
  if (UUID.test(which)) return ctx.api().get<Schedule>(`/api/schedules/${which}`);
  for (let after: string | null = null; ;) {
    const page: SchedulePage = await ctx
      .api()
      .get<SchedulePage>(`/api/schedules?limit=1000${after ? `&after=${encodeURIComponent(after)}` : ''}`);
    const found = page.schedules.find((s) => s.name === which);
    if (found) return found;
    if (!page.nextAfter) throw ctx.usage(`no schedule named "${which}" (give its name or id)`);
    after = page.nextAfter;
  }
}

const list: RunsSubcommand = {
  name: 'list',
  args: '',
  summary: 'schedules by name: their next slot, their last run',
  positionals: 0,
  async run(ctx) {
    const page = await ctx.api().get<SchedulePage>('/api/schedules?limit=1000');
    if (ctx.json) return (ctx.out(json(page)), 0);
    if (page.schedules.length === 0) return (ctx.out('no schedules\n'), 0);
    const columns: Column<Schedule>[] = [
      { title: 'NAME', value: (s) => s.name },
      { title: 'CRON', value: (s) => s.cron },
      { title: 'TIMEZONE', value: (s) => s.timezone },
      { title: 'AGENT', value: (s) => s.agent },
      { title: 'NEXT', value: (s) => (s.paused ? 'paused' : when(s.nextRunAt, ctx.now)) },
      { title: 'LAST RUN', value: (s) => when(s.lastRunAt, ctx.now) },
      { title: 'STATUS', value: (s) => s.lastRunStatus ?? '' },
      { title: 'SKIPPED', value: (s) => String(s.skipped.missed + s.skipped.overlap), align: 'right' },
      { title: 'ID', value: (s) => s.id },
    ];
    ctx.out(table(page.schedules, columns));
    return 0;
  },
};

const create: RunsSubcommand = {
  name: 'create',
  args: '<name>',
  summary: 'make a schedule: a run of the agent for every slot of --cron',
  positionals: 1,
  options: {
    cron: { type: 'string', help: '5 fields (minute hour day month weekday), or 6 with seconds first (required)' },
    input: { type: 'string', help: 'the first user message of each run (required)' },
    timezone: { type: 'string', help: 'IANA time zone of the expression (default UTC)' },
    agent: { type: 'string', help: "the agent (default the server's first)" },
    model: { type: 'string', help: "the model (default the agent's)" },
    'catch-up': { type: 'string', help: 'missed slots: latest (default), all or none' },
    overlap: { type: 'string', help: 'skip (default: no run while the last is active) or allow' },
    paused: { type: 'boolean', help: 'make it paused' },
  },
  async run(ctx) {
    const o = ctx.options;
    if (typeof o.cron !== 'string') throw ctx.usage('--cron is required, e.g. --cron "0 9 * * 1-5"');
    if (typeof o.input !== 'string') throw ctx.usage('--input is required: what each run is asked');
    const body: Record<string, unknown> = { name: ctx.args[0], cron: o.cron, input: o.input };
    for (const [flag, field] of [
      ['timezone', 'timezone'],
      ['agent', 'agent'],
      ['model', 'model'],
      ['catch-up', 'catchUp'],
      ['overlap', 'overlap'],
    ] as const) {
      if (o[flag] !== undefined) body[field] = o[flag];
    }
    if (o.paused) body.paused = true;
    const s = await ctx.api().post<Schedule>('/api/schedules', body);
    ctx.out(ctx.json ? json(s) : `schedule ${s.name} (${s.id}): ${s.paused ? 'paused' : `next run ${s.nextRunAt}`}\n`);
    return 0;
  },
};

const pausing = (paused: boolean): RunsSubcommand => ({
  name: paused ? 'pause' : 'resume',
  args: '<id|name>',
  summary: paused ? 'stop making runs (until resume)' : 'make runs again, from the next slot on (no catch-up of the pause)',
  positionals: 1,
  async run(ctx) {
    const s = await ctx.api().patch<Schedule>(`/api/schedules/${(await scheduleOf(ctx)).id}`, { paused });
    ctx.out(ctx.json ? json(s) : `schedule ${s.name} ${paused ? 'paused' : `resumed: next run ${s.nextRunAt}`}\n`);
    return 0;
  },
});

const trigger: RunsSubcommand = {
  name: 'trigger',
  args: '<id|name>',
  summary: 'a run of the schedule now, outside its slots',
  positionals: 1,
  async run(ctx) {
    const s = await scheduleOf(ctx);
    const r = await ctx.api().post<z.infer<typeof TriggeredRun>>(`/api/schedules/${s.id}/trigger`);
    ctx.out(ctx.json ? json(r) : `run ${r.id} ${r.status} (schedule ${s.name}): durable-agent runs show ${r.id}\n`);
    return 0;
  },
};

const remove: RunsSubcommand = {
  name: 'delete',
  args: '<id|name>',
  summary: 'delete a schedule (the runs it made stay)',
  positionals: 1,
  async run(ctx) {
    const s = await scheduleOf(ctx);
    await ctx.api().delete(`/api/schedules/${s.id}`);
    ctx.out(ctx.json ? json({ id: s.id, deleted: true }) : `schedule ${s.name} deleted\n`);
    return 0;
  },
};

export const SCHEDULE_SUBCOMMANDS: readonly RunsSubcommand[] = [list, create, pausing(true), pausing(false), trigger, remove];

export const schedulesCommand = (argv: string[], env: Record<string, string | undefined> = process.env) =>
  commandGroup('schedules', SCHEDULE_SUBCOMMANDS, argv, env);
