/** The shapes of the schedules routes (routes-schedules.ts). */
import { z } from 'zod';
import { RUN_STATUSES } from '../domain/types.ts';
import { responseSchemas } from './schemas.ts';

const timestamp = z.string().meta({ format: 'date-time' });

export const ScheduleJson = z.object({
  id: z.guid(),
  name: z.string(),
  cron: z.string(),
  timezone: z.string(),
  agent: z.string(),
  input: z.string(),
  model: z.string().nullable(),
  tokenBudget: z.number().int().nullable(),
  costBudgetUsd: z.number().nullable(),
  timeoutSeconds: z.number().int().nullable(),
  maxSteps: z.number().int().nullable(),
  metadata: z.record(z.string(), z.unknown()).nullable(),
  overlap: z.enum(['skip', 'allow']),
  catchUp: z.enum(['none', 'latest', 'all']),
  catchUpWindowSeconds: z.number().int().nullable(),
  jitterSeconds: z.number().int(),
  startAt: timestamp.nullable(),
  endAt: timestamp.nullable(),
  paused: z.boolean(),
  source: z
    .enum(['api', 'code'])
    .describe("'code': declared with defineSchedule and kept in step with the code; 'api': made by a request."),
  nextRunAt: timestamp.nullable().describe('The next slot; null while paused or past endAt.'),
  lastRunId: z.guid().nullable(),
  lastRunAt: timestamp.nullable().describe('When it last made a run.'),
  lastRunStatus: z.enum(RUN_STATUSES).nullable().describe('The status of its last run (null once that run is deleted).'),
  skipped: z
    .object({
      missed: z.number().int().describe('Slots left without a run because no process made them in time (and catchUp did not).'),
      overlap: z.number().int().describe("Slots left without a run because its previous run was still active (overlap: 'skip')."),
      lastReason: z.string().nullable(),
      lastAt: timestamp.nullable(),
    })
    .describe('Slots it made no run for, and why the last one was skipped.'),
  createdAt: timestamp,
  updatedAt: timestamp,
});
responseSchemas.add(ScheduleJson, { id: 'Schedule' });

export const SchedulePageJson = z.object({
  schedules: z.array(ScheduleJson),
  nextAfter: z.string().nullable().describe('Pass as `after` for the next page; null on the last.'),
});
responseSchemas.add(SchedulePageJson, { id: 'SchedulePage' });

export const TriggeredRun = z.object({ id: z.guid(), status: z.enum(RUN_STATUSES), scheduleId: z.guid() });
export const BackfilledRuns = z.object({
  runs: z.array(z.object({ id: z.guid(), scheduledFor: timestamp })).describe('The runs made, one per slot that had none.'),
  existing: z.number().int().describe('Slots in the range that had a run already.'),
});
responseSchemas.add(BackfilledRuns, { id: 'BackfilledRuns' });
