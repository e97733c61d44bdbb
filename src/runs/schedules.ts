/**
 * Schedules from a host program (`rt.schedules`) and the HTTP API alike: made, read, changed, deleted,
 * triggered and backfilled with the same checks. What a schedule's runs are created with is checked as
 * a run's request is (`toNewRun`) when the schedule is made, so a schedule that could make no run is
 * refused then, naming the field. A tenant sees its own schedules only (another's is "not found").
 */
import { z } from 'zod';
import { InputError, NotFoundError } from '../domain/errors.ts';
import { DEFAULT_TENANT, type Run, type Schedule, type ScheduledRun } from '../domain/types.ts';
import type { RunRecords } from '../store/run-records.ts';
import type { ScheduleFields, Schedules as ScheduleStore } from '../store/schedules.ts';
import { slotClock } from '../schedules/cron.ts';
import { firstSlot } from '../schedules/plan.ts';
import { type RunDefaults, toNewRun, CreateRunOptions } from './new-run.ts';
import { type InputPart, parseInput } from './parse-input.ts';
import { BackfillBody, CreateScheduleBody, ListSchedulesQuery, ScheduleParams, UpdateScheduleBody } from './schedule-requests.ts';

/** The most slots one backfill makes. */
export const MAX_BACKFILL = 1000;

export type CreateScheduleInput = z.input<typeof CreateScheduleBody> & { tenant?: string };
export type UpdateScheduleInput = z.input<typeof UpdateScheduleBody>;

export interface Backfilled {
  /** The runs made, one per slot that had none. */
  runs: Run[];
  /** Slots in the range that had a run already (from a firing, another backfill, an earlier schedule of the name). */
  existing: number;
}

export interface SchedulesApi {
  create(input: CreateScheduleInput, source?: Schedule['source']): Promise<Schedule>;
  /** The schedule, or null when there is none with this id (of this tenant, when one is given). */
  get(id: string, tenant?: string | null): Promise<Schedule | null>;
  list(query?: { limit?: number; after?: string; tenant?: string | null }): Promise<Schedule[]>;
  /** Changes any field; NotFoundError without such a schedule. */
  update(id: string, patch: UpdateScheduleInput, tenant?: string | null): Promise<Schedule>;
  delete(id: string, tenant?: string | null): Promise<void>;
  /** A run now, outside the slots: it names the schedule, and no slot. */
  trigger(id: string, tenant?: string | null): Promise<Run>;
  /** One run per slot from `from` to `to` (inclusive), at most MAX_BACKFILL, under the slots' one-run rule. */
  backfill(id: string, range: { from: string; to: string }, tenant?: string | null): Promise<Backfilled>;
}

export interface SchedulesDeps {
  store: ScheduleStore;
  records: Pick<RunRecords, 'create' | 'createForSlots'>;
  defaults: RunDefaults;
  /** The database's clock (what decides what is due); the process's when absent. */
  now?: () => Promise<Date>;
}

/** What a schedule's runs are created with, as a run's request says it. */
export function runRequest(s: Pick<Schedule, 'agent' | 'run'>): CreateRunOptions {
  return { ...s.run, agent: s.agent } as CreateRunOptions;
}

/** The run of a slot (or of a trigger: `scheduledFor` null), checked and defaulted as a run's request is. */
export function scheduledRun<T extends Date | null>(s: Schedule, defaults: RunDefaults, scheduledFor: T, startAt?: Date) {
  return {
    ...toNewRun(runRequest(s), defaults, 'options'),
    tenant: s.tenant,
    ...(startAt ? { startAt } : {}),
    schedule: { id: s.id, name: s.name, scheduledFor },
  };
}

const runOf = (b: z.output<typeof UpdateScheduleBody>, before: ScheduledRun | null): ScheduledRun => {
  const run: Record<string, unknown> = { ...before };
  for (const k of ['input', 'model', 'tokenBudget', 'costBudgetUsd', 'timeoutSeconds', 'maxSteps', 'metadata'] as const) {
    if (b[k] === null) delete run[k];
    else if (b[k] !== undefined) run[k] = b[k];
  }
  return run as unknown as ScheduledRun;
};

const refuse = (path: string, message: string): never => {
  throw new InputError(`invalid options: ${path}: ${message}`, [{ path, message }]);
};

const dateOf = (v: string | null | undefined, before: Date | null): Date | null =>
  v === undefined ? before : v === null ? null : new Date(v);

export function createSchedules({ store, records, defaults, now = async () => new Date() }: SchedulesDeps): SchedulesApi {
  const find = async (id: string, tenant: string | null | undefined): Promise<Schedule> => {
    const { id: parsed } = parseInput(ScheduleParams, { id }, 'options');
    const s = await store.get(parsed);
    if (!s || (tenant != null && s.tenant !== tenant)) throw new NotFoundError(`schedule ${id} not found`);
    return s;
  };

  /** The fields to store: checked as a run of it would be, and its next slot from the database's clock. */
  const fieldsOf = async (
    b: z.output<typeof UpdateScheduleBody> & { name: string; cron: string; timezone: string; input: string },
    base: { tenant: string; source: Schedule['source']; run: ScheduledRun | null; agent: string | undefined },
    part: InputPart,
  ): Promise<ScheduleFields> => {
    const run = runOf(b, base.run);
    const agent = b.agent ?? base.agent ?? defaults.agent;
    toNewRun(runRequest({ agent, run }), defaults, part); // a schedule that could make no run is refused now
    const f = {
      tenant: base.tenant,
      name: b.name,
      cron: b.cron,
      timezone: b.timezone,
      agent,
      run,
      overlap: b.overlap ?? 'skip',
      catchUp: b.catchUp ?? 'latest',
      catchUpWindowSeconds: b.catchUpWindowSeconds ?? null,
      jitterSeconds: b.jitterSeconds ?? 0,
      startAt: b.startAt ? new Date(b.startAt) : null,
      endAt: b.endAt ? new Date(b.endAt) : null,
      paused: b.paused ?? false,
      source: base.source,
    };
    if (f.startAt && f.endAt && f.endAt < f.startAt) refuse('endAt', 'must not be before startAt');
    const clock = slotClock(f.cron, f.timezone);
    const from = await now();
    if (!clock.next(from)) refuse('cron', `"${f.cron}" names no time that comes`);
    return { ...f, nextRunAt: f.paused ? null : firstSlot(clock, from, f) };
  };

  return {
    async create(input, source = 'api') {
      const { tenant, ...body } = input;
      const b = parseInput(CreateScheduleBody, body, 'options');
      return store.create(await fieldsOf(b, { tenant: tenant ?? DEFAULT_TENANT, source, run: null, agent: undefined }, 'options'));
    },
    async get(id, tenant) {
      return find(id, tenant).catch((e: unknown) => {
        if (e instanceof NotFoundError) return null;
        throw e;
      });
    },
    async list(query = {}) {
      const { tenant, ...rest } = query;
      const q = parseInput(ListSchedulesQuery, rest, 'options');
      return store.list({ tenant: tenant ?? null, after: q.after ?? null, limit: q.limit });
    },
    async update(id, patch, tenant) {
      const before = await find(id, tenant);
      const b = parseInput(UpdateScheduleBody, patch, 'options');
      if (b.name !== undefined && b.name !== before.name) {
        refuse('name', 'cannot change: the runs of its slots are known by it (make a schedule under the new name, and delete this one)');
      }
      const merged = {
        name: before.name,
        cron: before.cron,
        timezone: before.timezone,
        overlap: before.overlap,
        catchUp: before.catchUp,
        catchUpWindowSeconds: before.catchUpWindowSeconds,
        jitterSeconds: before.jitterSeconds,
        startAt: before.startAt?.toISOString() ?? null,
        endAt: before.endAt?.toISOString() ?? null,
        paused: before.paused,
        input: before.run.input,
        ...b,
      };
      const fields = await fieldsOf(
        merged,
        { tenant: before.tenant, source: before.source, run: before.run, agent: before.agent },
        'options',
      );
      // Nothing about when it fires changed: its next slot stays what it was (a resume starts from now).
      const same =
        merged.cron === before.cron &&
        merged.timezone === before.timezone &&
        !before.paused &&
        !fields.paused &&
        dateOf(merged.startAt, before.startAt)?.getTime() === before.startAt?.getTime() &&
        dateOf(merged.endAt, before.endAt)?.getTime() === before.endAt?.getTime();
      const updated = await store.update(before.id, same ? { ...fields, nextRunAt: before.nextRunAt } : fields);
      if (!updated) throw new NotFoundError(`schedule ${id} not found`);
      return updated;
    },
    async delete(id, tenant) {
      const s = await find(id, tenant);
      await store.delete(s.id);
    },
    async trigger(id, tenant) {
      const s = await find(id, tenant);
      return records.create(scheduledRun(s, defaults, null));
    },
    async backfill(id, range, tenant) {
      const s = await find(id, tenant);
      const r = parseInput(BackfillBody, range, 'options');
      const [from, to] = [new Date(r.from), new Date(r.to)];
      if (to < from) refuse('to', 'must not be before from');
      if (to > (await now())) refuse('to', 'must not be later than now: a slot to come gets its run when it comes');
      const clock = slotClock(s.cron, s.timezone);
      const slots: Date[] = [];
      for (let t = clock.next(new Date(from.getTime() - 1)); t && t <= to; t = clock.next(t)) {
        if (slots.length === MAX_BACKFILL) refuse('to', `the range holds more than ${MAX_BACKFILL} slots: backfill it in parts`);
        slots.push(t);
      }
      const runs = await records.createForSlots(slots.map((slot) => scheduledRun(s, defaults, slot)));
      return { runs, existing: slots.length - runs.length };
    },
  };
}
