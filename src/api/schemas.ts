/**
 * Every shape the HTTP API accepts or returns, as zod schemas. Requests are parsed with them (the
 * request shapes live with the runs library, runs/requests.ts, and are the same for both); responses
 * are typed by them (present.ts must produce exactly these); /openapi.json is generated from them.
 * Schemas with an id in `requestSchemas` / `responseSchemas` become named OpenAPI components.
 */
import { z } from 'zod';
import { RUN_STATUSES, STEP_KINDS, STEP_STATUSES, WAITING_KINDS } from '../domain/types.ts';

export {
  CreateRunBody,
  DecisionBody,
  ForkRunBody,
  LIMITS,
  ListRunsQuery,
  requestSchemas,
  RunParams,
  StepParams,
  ToolCallParams,
} from '../runs/requests.ts';

export const responseSchemas = z.registry<{ id: string }>();

// ---- responses ----

const timestamp = z.string().meta({ format: 'date-time' });
const count = z.number().int().nonnegative();

export const ErrorDetail = z.object({
  code: z.string().describe('Stable, machine-readable: invalid_request, not_found, conflict, …'),
  message: z.string(),
  issues: z
    .array(z.object({ path: z.string(), message: z.string() }))
    .optional()
    .describe('The failing fields (400 only).'),
});
export const ErrorBody = z.object({ error: ErrorDetail });
responseSchemas.add(ErrorBody, { id: 'Error' });
export type ErrorBody = z.infer<typeof ErrorBody>;

export const CreatedRun = z.object({
  id: z.guid(),
  status: z.enum(RUN_STATUSES).describe("QUEUED for a new run; the run's status now when an Idempotency-Key answered an earlier one."),
});
responseSchemas.add(CreatedRun, { id: 'CreatedRun' });

const ForkPointJson = z
  .object({ runId: z.guid(), afterSeq: count })
  .describe("The run this one continues, and the last of its steps this one's conversation holds.");

export const ForkedRun = z.object({ id: z.guid(), status: z.literal('QUEUED'), forkedFrom: ForkPointJson });
responseSchemas.add(ForkedRun, { id: 'ForkedRun' });
/** The `Idempotency-Key` header of POST /api/runs. */
export const IdempotencyKey = z
  .string()
  .min(1)
  .max(200)
  .regex(/^[\x21-\x7e]+$/, 'must be 1 to 200 visible ASCII characters')
  .describe('The same key with the same body within 24 hours answers the same run; with another body, 409.');

export const DecidedRun = z.object({
  id: z.guid(),
  status: z.enum(RUN_STATUSES).describe('WAITING while other calls still wait for a decision; QUEUED once the last one is made.'),
});
responseSchemas.add(DecidedRun, { id: 'DecisionResult' });

export const WaitingJson = z
  .object({
    kind: z
      .enum(WAITING_KINDS)
      .describe('approval: calls wait to be approved; decision: a call a crash left unfinished; timer: the sleep tool.'),
    since: timestamp,
    toolCalls: z.array(z.object({ toolUseId: z.string(), toolName: z.string(), input: z.unknown() })).describe('The calls waiting.'),
    wakeAt: timestamp.nullable().optional().describe('timer: when the run is claimed again.'),
    expiresAt: timestamp.nullable().optional().describe('approval: when undecided calls are denied with "approval timed out".'),
  })
  .describe('What a WAITING run waits for.');
responseSchemas.add(WaitingJson, { id: 'Waiting' });
export type WaitingJson = z.infer<typeof WaitingJson>;

export const CancelledRun = z.object({
  id: z.guid(),
  status: z.enum(RUN_STATUSES).describe('CANCELLED for a queued run; RUNNING until the worker notices.'),
  cancelRequested: z.literal(true),
});
responseSchemas.add(CancelledRun, { id: 'CancelResult' });

export const RunJson = z.object({
  id: z.guid(),
  agent: z.string().describe('The agent that drives the run, by name.'),
  agentVersion: z
    .string()
    .nullable()
    .describe('The version label of the agent definition the run was created under; null when it had none.'),
  previousRunId: z.guid().nullable().describe('The run whose conversation this one continues; null for a new conversation.'),
  tenant: z.string().describe('Whose run it is: the tenant of the API key that created it ("default" without one).'),
  status: z.enum(RUN_STATUSES),
  input: z.string().describe('The task as text (for an input sent as content blocks, the text of its text blocks).'),
  inputContent: z
    .array(z.record(z.string(), z.unknown()))
    .nullable()
    .describe('The input as the content blocks it was sent as (text, images, documents); null for a text input.'),
  model: z.string(),
  modelOptions: z
    .record(z.string(), z.unknown())
    .nullable()
    .describe(
      "How its calls ask the model to answer, fixed when it was made: its agent's modelOptions with its own over them; null: none.",
    ),
  tokenBudget: count,
  tokensUsed: count,
  costUsd: z.number(),
  costBudgetUsd: z.number().nullable().describe('USD the run may spend on model calls; null: no money limit.'),
  maxSteps: count,
  deadlineAt: timestamp,
  createdAt: timestamp,
  updatedAt: timestamp,
  finishedAt: timestamp.nullable(),
  output: z.string().nullable(),
  error: z.string().nullable(),
  stopReason: z.string().nullable().describe('The final model stop reason; "max_tokens" means the output was cut short.'),
  attempts: count.describe('Claims of the run that count toward MAX_RUN_ATTEMPTS (hand-backs, stalls and outages are given back).'),
  providerRequeues: count.describe(
    'Times the run went back to the queue because its model provider kept failing; bounded by its deadline, not by MAX_RUN_ATTEMPTS.',
  ),
  cancelRequested: z.boolean(),
  metadata: z.record(z.string(), z.unknown()),
  lastError: z
    .object({ message: z.string(), at: timestamp, attempt: count.describe('The attempt it ended.') })
    .nullable()
    .describe('Why the last attempt ended without finishing the run (a crash, a database failure, a model outage); null when none did.'),
  nextAttemptAt: timestamp
    .nullable()
    .describe('When the run is tried again while it waits in the queue for a later time (after a model outage); null otherwise.'),
  forkedFrom: ForkPointJson.nullable().describe('Set for a fork: the run whose steps 1..afterSeq begin its conversation.'),
  waiting: WaitingJson.nullable().describe('While the run is WAITING: what for; null otherwise.'),
  scheduleId: z.guid().nullable().describe('The schedule that made it (for a slot, or a trigger); null otherwise.'),
  scheduledFor: timestamp.nullable().describe('The time of the slot it was made for; null for any other run (a trigger too).'),
});
responseSchemas.add(RunJson, { id: 'Run' });
export type RunJson = z.infer<typeof RunJson>;

export const RunDetailJson = RunJson.extend({
  provider: z
    .string()
    .nullable()
    .describe('The model provider of its latest model step ("anthropic", "openai" …); null before its first model call.'),
});
responseSchemas.add(RunDetailJson, { id: 'RunDetail' });

// Without the input's blocks (up to 32 MiB each): a page of runs stays small; GET /api/runs/{id} has them.
export const RunListItemJson = RunJson.omit({ inputContent: true }).extend({
  stepCount: count.describe('Steps recorded so far (a tool call in progress included).'),
  durationMs: count.nullable().describe('From creation to the end; null while the run is not finished.'),
});
responseSchemas.add(RunListItemJson, { id: 'RunListItem' });
export type RunListItemJson = z.infer<typeof RunListItemJson>;

export const RunPageJson = z.object({
  runs: z.array(RunListItemJson),
  nextCursor: z.string().nullable().describe('Pass as ?cursor= for the next page; null on the last page.'),
});
responseSchemas.add(RunPageJson, { id: 'RunPage' });

export const TimelineItem = z.object({
  seq: count,
  kind: z.enum(STEP_KINDS),
  status: z.enum(STEP_STATUSES),
  toolName: z.string().nullable(),
  toolUseId: z.string().nullable(),
  stopReason: z.string().nullable(),
  inputTokens: count,
  outputTokens: count,
  cacheCreationInputTokens: count,
  cacheReadInputTokens: count,
  costUsd: z.number(),
  attempts: count.describe(
    'Provider calls the step took, retries included; for a tool step 1, or 2 when a crash left the call started and it was run (again) on resume.',
  ),
  latencyMs: count.nullable(),
  worker: z.string().nullable(),
  startedAt: timestamp,
  finishedAt: timestamp.nullable(),
  inherited: z.boolean().describe("True for a fork's steps that belong to the run it was forked from."),
  inheritedFrom: z.guid().nullable().describe("The run an inherited step was recorded in; null for the run's own steps."),
});
responseSchemas.add(TimelineItem, { id: 'TimelineStep' });
export type TimelineItem = z.infer<typeof TimelineItem>;

export const Timeline = z.array(TimelineItem);
responseSchemas.add(Timeline, { id: 'Timeline' });

const Block = z.looseObject({ type: z.string() }).describe('A Messages API content block, verbatim.');
const MessageJson = z.object({ role: z.enum(['user', 'assistant']), content: z.union([z.string(), z.array(Block)]) });

export const ModelRequestJson = z
  .object({
    model: z.string(),
    max_tokens: count,
    system: z.string().optional(),
    tools: z.array(z.object({ name: z.string(), description: z.string(), input_schema: z.record(z.string(), z.unknown()) })).optional(),
    messages: z.array(MessageJson),
    options: z
      .record(z.string(), z.unknown())
      .optional()
      .describe('The model options the call was sent with (thinking, sampling, tool choice).'),
    compaction: z
      .object({ keptMessages: count, unusable: z.string().optional() })
      .optional()
      .describe(
        'A compaction step: its answer is a summary standing for all but the last keptMessages messages (unusable: why it was not used).',
      ),
  })
  .describe('MODEL step: the Messages API request, rebuilt from the log (without cache_control marks).');
export const ToolRequestJson = z
  .object({ toolUseId: z.string(), name: z.string(), input: z.unknown() })
  .describe("TOOL step: the model's tool_use call.");

export const StepDetail = TimelineItem.extend({
  request: z.union([ModelRequestJson, ToolRequestJson]).nullable(),
  response: z
    .union([z.array(Block), z.string()])
    .nullable()
    .describe('MODEL: the content blocks; TOOL: the result text (null while STARTED).'),
});
responseSchemas.add(StepDetail, { id: 'StepDetail' });
export type StepDetail = z.infer<typeof StepDetail>;
export type ModelRequestJson = z.infer<typeof ModelRequestJson>;

export const HealthOk = z.object({ ok: z.literal(true) });
responseSchemas.add(HealthOk, { id: 'Health' });
export const HealthDown = z.object({ ok: z.literal(false), error: ErrorDetail });
responseSchemas.add(HealthDown, { id: 'HealthDown' });
