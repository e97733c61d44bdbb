/**
 * Schedules declared in code, next to the agents: `defineSchedule({ name, cron, agent, input, … })`,
 * given to createRuntime as `schedules`. At start the database is made to match: a declared schedule is
 * made, or changed to what the code says (its next slot, its last run and its counts kept); a schedule
 * of one of the runtime's agents declared in code before and no longer is deleted. A runtime given no `schedules` leaves them alone, so
 * only the processes that declare schedules keep them (during a deploy, the newest start decides).
 * Schedules made over the API are never touched.
 */
import { ConfigError, ConflictError } from '../domain/errors.ts';
import { DEFAULT_TENANT } from '../domain/types.ts';
import { parseInput } from '../runs/parse-input.ts';
import { CreateScheduleBody } from '../runs/schedule-requests.ts';
import type { CreateScheduleInput, SchedulesApi } from '../runs/schedules.ts';
import type { Schedules } from '../store/schedules.ts';

/** A schedule as the code declares it. */
export type ScheduleDefinition = Readonly<CreateScheduleInput>;

/** Checks a schedule's declaration once, when it is made; throws a ConfigError naming the first thing wrong. */
export function defineSchedule(options: CreateScheduleInput): ScheduleDefinition {
  try {
    parseInput(CreateScheduleBody, (({ tenant: _t, ...rest }) => rest)(options), 'options');
  } catch (e) {
    const name = typeof options?.name === 'string' ? ` "${options.name}"` : '';
    throw new ConfigError(`invalid schedule${name}: ${(e as Error).message.replace(/^invalid options: /, '')}`);
  }
  return Object.freeze({ ...options });
}

/**
 * Makes the database match `declared`. Processes starting at the same moment with the same code may
 * make a schedule at once: the one that loses changes it instead. Only schedules of `agents` (this
 * runtime's) are deleted: services with other agents on the same database keep theirs.
 */
export async function syncDeclaredSchedules(
  api: SchedulesApi,
  store: Schedules,
  declared: readonly ScheduleDefinition[],
  agents: readonly string[],
): Promise<void> {
  const names = new Set<string>();
  for (const d of declared) {
    const tenant = d.tenant ?? DEFAULT_TENANT;
    const key = `${tenant}\u0000${d.name}`;
    if (names.has(key)) throw new ConfigError(`two schedules are named "${d.name}"`);
    names.add(key);
    let existing = await store.byName(tenant, d.name);
    if (!existing) {
      try {
        await api.create(d, 'code');
        continue;
      } catch (e) {
        if (!(e instanceof ConflictError)) throw e;
        existing = await store.byName(tenant, d.name); // made meanwhile by a process starting with it
        if (!existing) throw e;
      }
    }
    if (existing.source === 'api') {
      throw new ConfigError(
        `schedule "${d.name}" is declared in code, and one of that name was made over the API: rename one, or delete the other`,
      );
    } else {
      const { tenant: _tenant, ...patch } = d;
      await api.update(existing.id, patch);
    }
  }
  for (let after: string | null = null; ;) {
    const page = await store.list({ tenant: null, after, limit: 500, source: 'code' });
    for (const s of page) if (agents.includes(s.agent) && !names.has(`${s.tenant}\u0000${s.name}`)) await store.delete(s.id);
    if (page.length < 500) return;
    after = page.at(-1)!.name;
  }
}
