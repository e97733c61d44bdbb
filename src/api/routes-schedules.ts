/**
 * The schedules API: thin handlers over the library's schedules (runs/schedules.ts). A caller bound to a
 * tenant makes, sees and changes that tenant's schedules only; another's answers as one that does not
 * exist (404).
 */
import { NotFoundError } from '../domain/errors.ts';
import type { Schedule } from '../domain/types.ts';
import { DEFAULT_TENANT } from '../domain/types.ts';
import type { SchedulesApi } from '../runs/schedules.ts';
import { BackfillBody, CreateScheduleBody, ListSchedulesQuery, ScheduleParams, UpdateScheduleBody } from '../runs/schedule-requests.ts';
import { defineRoute, type ApiRoute } from './route.ts';
import { ErrorBody } from './schemas.ts';
import { BackfilledRuns, ScheduleJson, SchedulePageJson, TriggeredRun } from './schemas-schedules.ts';

export interface SchedulesRoutesDeps {
  schedules: SchedulesApi;
}

const iso = (d: Date | null) => (d ? d.toISOString() : null);

export function scheduleJson(s: Schedule) {
  return {
    id: s.id,
    name: s.name,
    cron: s.cron,
    timezone: s.timezone,
    agent: s.agent,
    input: s.run.input,
    model: s.run.model ?? null,
    tokenBudget: s.run.tokenBudget ?? null,
    costBudgetUsd: s.run.costBudgetUsd ?? null,
    timeoutSeconds: s.run.timeoutSeconds ?? null,
    maxSteps: s.run.maxSteps ?? null,
    metadata: s.run.metadata ?? null,
    overlap: s.overlap,
    catchUp: s.catchUp,
    catchUpWindowSeconds: s.catchUpWindowSeconds,
    jitterSeconds: s.jitterSeconds,
    startAt: iso(s.startAt),
    endAt: iso(s.endAt),
    paused: s.paused,
    source: s.source,
    nextRunAt: iso(s.nextRunAt),
    lastRunId: s.lastRunId,
    lastRunAt: iso(s.lastRunAt),
    lastRunStatus: s.lastRunStatus,
    skipped: { ...s.skipped, lastAt: iso(s.skipped.lastAt) },
    createdAt: s.createdAt.toISOString(),
    updatedAt: s.updatedAt.toISOString(),
  };
}

const notFound = { 404: { description: 'No such schedule (or another tenant’s).', schema: ErrorBody } };

export function schedulesRoutes({ schedules }: SchedulesRoutesDeps): ApiRoute[] {
  return [
    defineRoute({
      method: 'POST',
      path: '/api/schedules',
      operationId: 'createSchedule',
      summary: 'Make a schedule: a run of an agent for every slot of a cron expression',
      body: CreateScheduleBody,
      responses: {
        201: { description: 'The schedule, with its next slot.', schema: ScheduleJson },
        409: { description: 'The tenant has a schedule of that name.', schema: ErrorBody },
      },
      async handle({ body, caller }) {
        const s = await schedules.create({ ...body, tenant: caller.tenant ?? DEFAULT_TENANT });
        return { status: 201, headers: { location: `/api/schedules/${s.id}` }, body: scheduleJson(s) };
      },
    }),
    defineRoute({
      method: 'GET',
      path: '/api/schedules',
      operationId: 'listSchedules',
      summary: 'The schedules, by name',
      query: ListSchedulesQuery,
      responses: { 200: { description: 'One page of schedules.', schema: SchedulePageJson } },
      async handle({ query, caller }) {
        const page = await schedules.list({ ...query, tenant: caller.tenant });
        return { body: { schedules: page.map(scheduleJson), nextAfter: page.length === query.limit ? page.at(-1)!.name : null } };
      },
    }),
    defineRoute({
      method: 'GET',
      path: '/api/schedules/{id}',
      operationId: 'getSchedule',
      summary: 'One schedule, with its next slot, its last run and what it skipped',
      params: ScheduleParams,
      responses: { 200: { description: 'The schedule.', schema: ScheduleJson }, ...notFound },
      async handle({ params, caller }) {
        const s = await schedules.get(params.id, caller.tenant);
        if (!s) throw new NotFoundError(`schedule ${params.id} not found`);
        return { body: scheduleJson(s) };
      },
    }),
    defineRoute({
      method: 'PATCH',
      path: '/api/schedules/{id}',
      operationId: 'updateSchedule',
      summary: 'Change any field of a schedule, e.g. {"paused": true}',
      params: ScheduleParams,
      body: UpdateScheduleBody,
      responses: { 200: { description: 'The schedule as changed.', schema: ScheduleJson }, ...notFound },
      async handle({ params, body, caller }) {
        return { body: scheduleJson(await schedules.update(params.id, body, caller.tenant)) };
      },
    }),
    defineRoute({
      method: 'DELETE',
      path: '/api/schedules/{id}',
      operationId: 'deleteSchedule',
      summary: 'Delete a schedule (the runs it made stay)',
      params: ScheduleParams,
      responses: { 204: { description: 'The schedule is gone.' }, ...notFound },
      async handle({ params, caller }) {
        await schedules.delete(params.id, caller.tenant);
        return { status: 204, body: null };
      },
    }),
    defineRoute({
      method: 'POST',
      path: '/api/schedules/{id}/trigger',
      operationId: 'triggerSchedule',
      summary: 'A run of the schedule now, outside its slots',
      params: ScheduleParams,
      responses: { 201: { description: 'The run is queued.', schema: TriggeredRun }, ...notFound },
      async handle({ params, caller }) {
        const run = await schedules.trigger(params.id, caller.tenant);
        return {
          status: 201,
          headers: { location: `/api/runs/${run.id}` },
          body: { id: run.id, status: run.status, scheduleId: params.id },
        };
      },
    }),
    defineRoute({
      method: 'POST',
      path: '/api/schedules/{id}/backfill',
      operationId: 'backfillSchedule',
      summary: 'One run per slot from `from` to `to` (at most 1,000), none for a slot that has one',
      params: ScheduleParams,
      body: BackfillBody,
      responses: { 201: { description: 'The runs made.', schema: BackfilledRuns }, ...notFound },
      async handle({ params, body, caller }) {
        const { runs, existing } = await schedules.backfill(params.id, body, caller.tenant);
        return { status: 201, body: { runs: runs.map((r) => ({ id: r.id, scheduledFor: r.scheduledFor!.toISOString() })), existing } };
      },
    }),
  ];
}
