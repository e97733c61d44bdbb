/**
 * What a request about schedules may hold (the HTTP API and `rt.schedules` parse with the same
 * schemas). A cron expression or time zone that cannot be used is refused here, naming the field.
 */
import { z } from 'zod';
import { slotClock, ScheduleSpecError } from '../schedules/cron.ts';
import { CreateRunBody, requestSchemas, TaskText } from './requests.ts';

const NAME = /^[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}$/;
const instant = () => z.iso.datetime({ offset: true });

/** The fields of a schedule that a create sets and a PATCH may change (the run's own among them). */
const ScheduleShape = {
  name: z
    .string()
    .regex(NAME, 'use 1 to 128 letters, digits, "_", ".", ":" or "-", starting with a letter or digit')
    .describe(
      'Unique per tenant. The runs of its slots are known by it: a schedule deleted and made again under the same name never makes a second run for a slot.',
    ),
  cron: z
    .string()
    .min(1)
    .max(200)
    .describe('5 fields (minute hour day-of-month month day-of-week), or 6 with seconds first; e.g. "0 9 * * 1-5".'),
  timezone: z.string().min(1).max(100).describe('The IANA time zone the expression is read in; UTC when absent.'),
  agent: CreateRunBody.shape.agent.unwrap().describe("The agent of its runs; the server's first agent when absent."),
  input: TaskText.describe('The first user message of each run.'),
  model: CreateRunBody.shape.model.unwrap(),
  tokenBudget: CreateRunBody.shape.tokenBudget.unwrap(),
  costBudgetUsd: CreateRunBody.shape.costBudgetUsd.unwrap(),
  timeoutSeconds: CreateRunBody.shape.timeoutSeconds.unwrap(),
  maxSteps: CreateRunBody.shape.maxSteps.unwrap(),
  metadata: CreateRunBody.shape.metadata.unwrap(),
  overlap: z.enum(['skip', 'allow']).describe("'skip' (default): no run for a slot while the schedule's previous run is still active."),
  catchUp: z
    .enum(['none', 'latest', 'all'])
    .describe(
      "Slots missed while no process ran ('latest', the default: one run for the latest; 'all': one per slot, at most 100, else the latest; 'none': none).",
    ),
  catchUpWindowSeconds: z
    .number()
    .int()
    .min(1)
    .max(366 * 86_400)
    .nullable()
    .describe('Missed slots older than this are never made; no limit when absent.'),
  jitterSeconds: z.number().int().min(0).max(86_400).describe('Each run starts up to this long after its slot, at random; 0 when absent.'),
  startAt: instant().nullable().describe('No slot before this time.'),
  endAt: instant().nullable().describe('No slot after this time.'),
  paused: z.boolean().describe('A paused schedule makes no runs; its missed slots are not caught up when it is resumed.'),
};

/** Checks the cron expression and time zone together (each names the field when it is the one at fault). */
function checkSpec(v: { cron?: string | undefined; timezone?: string | undefined }, ctx: z.RefinementCtx): void {
  if (v.cron === undefined && v.timezone === undefined) return;
  try {
    slotClock(v.cron ?? '* * * * *', v.timezone ?? 'UTC');
  } catch (e) {
    if (!(e instanceof ScheduleSpecError)) throw e;
    ctx.addIssue({ code: 'custom', path: [e.field], message: e.message });
  }
}

export const CreateScheduleBody = z
  .strictObject({
    ...ScheduleShape,
    timezone: ScheduleShape.timezone.default('UTC'),
    agent: ScheduleShape.agent.optional(),
    model: ScheduleShape.model.optional(),
    tokenBudget: ScheduleShape.tokenBudget.optional(),
    costBudgetUsd: ScheduleShape.costBudgetUsd.optional(),
    timeoutSeconds: ScheduleShape.timeoutSeconds.optional(),
    maxSteps: ScheduleShape.maxSteps.optional(),
    metadata: ScheduleShape.metadata.optional(),
    overlap: ScheduleShape.overlap.default('skip'),
    catchUp: ScheduleShape.catchUp.default('latest'),
    catchUpWindowSeconds: ScheduleShape.catchUpWindowSeconds.optional(),
    jitterSeconds: ScheduleShape.jitterSeconds.default(0),
    startAt: ScheduleShape.startAt.optional(),
    endAt: ScheduleShape.endAt.optional(),
    paused: ScheduleShape.paused.default(false),
  })
  .superRefine(checkSpec);
requestSchemas.add(CreateScheduleBody, { id: 'CreateScheduleRequest' });
export type CreateScheduleBody = z.infer<typeof CreateScheduleBody>;

/** A PATCH: any field (the name must stay what it is), `null` to clear an optional one. */
export const UpdateScheduleBody = z
  .strictObject({
    name: ScheduleShape.name.optional(),
    cron: ScheduleShape.cron.optional(),
    timezone: ScheduleShape.timezone.optional(),
    agent: ScheduleShape.agent.optional(),
    input: ScheduleShape.input.optional(),
    model: ScheduleShape.model.nullable().optional(),
    tokenBudget: ScheduleShape.tokenBudget.nullable().optional(),
    costBudgetUsd: ScheduleShape.costBudgetUsd.nullable().optional(),
    timeoutSeconds: ScheduleShape.timeoutSeconds.nullable().optional(),
    maxSteps: ScheduleShape.maxSteps.nullable().optional(),
    metadata: ScheduleShape.metadata.nullable().optional(),
    overlap: ScheduleShape.overlap.optional(),
    catchUp: ScheduleShape.catchUp.optional(),
    catchUpWindowSeconds: ScheduleShape.catchUpWindowSeconds.optional(),
    jitterSeconds: ScheduleShape.jitterSeconds.optional(),
    startAt: ScheduleShape.startAt.optional(),
    endAt: ScheduleShape.endAt.optional(),
    paused: ScheduleShape.paused.optional(),
  })
  .superRefine(checkSpec);
requestSchemas.add(UpdateScheduleBody, { id: 'UpdateScheduleRequest' });
export type UpdateScheduleBody = z.infer<typeof UpdateScheduleBody>;

export const BackfillBody = z.strictObject({
  from: instant().describe('The first slot time to make (inclusive).'),
  to: instant().describe('The last slot time to make (inclusive).'),
});
requestSchemas.add(BackfillBody, { id: 'BackfillRequest' });

export const ScheduleParams = z.strictObject({ id: z.guid().describe('The schedule id (a UUID).') });
export const ListSchedulesQuery = z.strictObject({
  limit: z.coerce.number().int().min(1).max(1000).default(100).describe('Schedules per page, by name.'),
  after: z.string().min(1).max(200).optional().describe('The name after which the page starts (the last name of the previous page).'),
});
