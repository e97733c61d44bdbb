/** The shape of `GET /api/overview`: runs by status, and usage and step latency of the last hour and day. */
import { z } from 'zod';
import { STEP_KINDS } from '../domain/types.ts';
import { responseSchemas } from './schemas.ts';

const timestamp = z.string().meta({ format: 'date-time' });
const count = z.number().int().nonnegative();

const UsageTotals = z.object({
  steps: count.describe('Steps started in the window.'),
  inputTokens: count,
  outputTokens: count,
  cacheWriteTokens: count,
  cacheReadTokens: count,
  costUsd: z.number(),
});

const UsageBucket = UsageTotals.extend({ start: timestamp });

const StepLatency = z.object({
  kind: z.enum(STEP_KINDS),
  steps: count.describe('Finished steps of this kind in the window.'),
  p50Ms: count.nullable().describe('Median latency (nearest rank); null without steps.'),
  p95Ms: count.nullable().describe('95th percentile latency (nearest rank); null without steps.'),
});

const OverviewWindow = z.object({
  since: timestamp.describe('The start of the window: `at` minus an hour, or a day.'),
  bucketSeconds: count.describe('Width of each bucket of `series`: 300 for the hour, 3600 for the day.'),
  runsCreated: z.record(z.string(), count).describe('Runs created in the window, by their status now.'),
  totals: UsageTotals.describe('What the steps started in the window used.'),
  series: z.array(UsageBucket).describe('The same per bucket, oldest first, empty buckets included.'),
  latency: z.array(StepLatency).describe('One entry per step kind.'),
});

export const OverviewJson = z.object({
  at: timestamp.describe('When the figures were read; the windows end here.'),
  runsByStatus: z.record(z.string(), count).describe('Every run in the database, by status (zeros included).'),
  hour: OverviewWindow,
  day: OverviewWindow,
});
responseSchemas.add(OverviewJson, { id: 'Overview' });
export type OverviewJson = z.infer<typeof OverviewJson>;
