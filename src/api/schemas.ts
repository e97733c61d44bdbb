/**
 * Every shape the HTTP API accepts or returns, as zod schemas. Requests are parsed with them; responses
 * are typed by them (present.ts must produce exactly these); /openapi.json is generated from them.
 * Schemas with an id in `requestSchemas` / `responseSchemas` become named OpenAPI components.
 */
import { z } from 'zod';
import { RUN_STATUSES, STEP_KINDS, STEP_STATUSES, WAITING_KINDS } from '../domain.ts';

export const requestSchemas = z.registry<{ id: string }>();
export const responseSchemas = z.registry<{ id: string }>();

export const LIMITS = {
  inputChars: 100_000,
  modelChars: 200,
  tokenBudget: 10_000_000,
  costBudgetUsd: 10_000,
  timeoutSeconds: 86_400,
  maxSteps: 1_000,
  metadataBytes: 16 * 1024,
  /** Deep nesting is of no use in metadata and costs stack in JSON.stringify and in PostgreSQL's jsonb parser. */
  metadataDepth: 32,
  pageSize: 100,
  /** PostgreSQL's integer: a larger seq would make the query fail instead of finding nothing. */
  maxSeq: 2_147_483_647,
} as const;

/**
 * What a string must not hold to be stored as it was sent. PostgreSQL text and jsonb cannot hold
 * U+0000. An unpaired UTF-16 surrogate (a JSON escape like "\ud800" with no partner) is not a
 * Unicode character at all: text would silently store U+FFFD in its place, jsonb rejects it.
 * Either is refused here, with the field named, rather than altered or failed at the INSERT.
 */
const UNPAIRED_SURROGATE = /\p{Surrogate}/u;
function textProblem(s: string): string | null {
  if (s.includes('\u0000')) return 'must not contain NUL characters';
  if (UNPAIRED_SURROGATE.test(s)) return 'must not contain unpaired surrogates (invalid Unicode)';
  return null;
}
const text = (max: number, description: string) =>
  z
    .string()
    .min(1)
    .max(max)
    .refine((s) => s.trim().length > 0, 'must not be blank')
    .superRefine((s, ctx) => {
      const problem = textProblem(s);
      if (problem) ctx.addIssue({ code: 'custom', message: problem });
    })
    .describe(description);
const int = (min: number, max: number, description: string) => z.number().int().min(min).max(max).describe(description);

/** Nesting deeper than `limit`? Recursion stops at the limit, so a hostile value cannot exhaust the stack. */
function deeperThan(value: unknown, limit: number): boolean {
  if (value === null || typeof value !== 'object') return false;
  if (limit === 0) return true;
  return Object.values(value).some((v) => deeperThan(v, limit - 1));
}

/** The first problem of any key or string inside a JSON value (whose depth is already bounded). */
function problemInside(value: unknown): string | null {
  if (typeof value === 'string') return textProblem(value);
  if (value === null || typeof value !== 'object') return null;
  for (const [k, v] of Object.entries(value)) {
    const problem = (Array.isArray(value) ? null : textProblem(k)) ?? problemInside(v);
    if (problem) return problem;
  }
  return null;
}

const Metadata = z
  .record(z.string(), z.unknown())
  .superRefine((m, ctx) => {
    if (deeperThan(m, LIMITS.metadataDepth)) {
      ctx.addIssue({ code: 'custom', message: `must not nest deeper than ${LIMITS.metadataDepth} levels` });
      return;
    }
    const problem = problemInside(m);
    if (problem) ctx.addIssue({ code: 'custom', message: problem });
    else if (Buffer.byteLength(JSON.stringify(m)) > LIMITS.metadataBytes) {
      ctx.addIssue({ code: 'custom', message: `must be at most ${LIMITS.metadataBytes} bytes as JSON` });
    }
  })
  .describe(`Any JSON object, kept with the run; at most ${LIMITS.metadataBytes} bytes as JSON.`);

export const CreateRunBody = z.strictObject({
  input: text(LIMITS.inputChars, 'The task: the first user message of the conversation.'),
  agent: text(LIMITS.modelChars, "The agent to run, by name; the server's first agent when absent (the previous run's with previousRunId).").optional(),
  model: text(LIMITS.modelChars, "The model to call; the server's DEFAULT_MODEL when absent.").optional(),
  tokenBudget: int(1, LIMITS.tokenBudget, 'Tokens the run may use (input, cache writes and output).').optional(),
  timeoutSeconds: int(1, LIMITS.timeoutSeconds, 'Wall-clock limit from now; the run is TIMED_OUT after it.').optional(),
  maxSteps: int(1, LIMITS.maxSteps, "Step cap; at most the server's MAX_STEPS.").optional(),
  metadata: Metadata.optional(),
  costBudgetUsd: z
    .number()
    .positive()
    .max(LIMITS.costBudgetUsd)
    .optional()
    .describe("USD the run may spend on model calls; the server's DEFAULT_COST_BUDGET_USD when absent (none when that is unset). The model must have a price."),
  previousRunId: z
    .guid('must be a run id (a UUID)')
    .optional()
    .describe("Continue the conversation of this finished run (the caller's): its messages, then this input; same agent."),
  startAt: z.iso
    .datetime({ offset: true })
    .optional()
    .describe('Not started before this time (ISO-8601, at most a year ahead); the run is QUEUED until then. Its timeoutSeconds counts from then.'),
});
requestSchemas.add(CreateRunBody, { id: 'CreateRunRequest' });
export type CreateRunBody = z.infer<typeof CreateRunBody>;

// A fork continues its source's conversation with its source's agent: neither is chosen here.
export const ForkRunBody = CreateRunBody.omit({ agent: true, previousRunId: true }).extend({
  afterSeq: int(1, LIMITS.maxSeq, "The fork continues the source's conversation after this step; it must end a whole turn."),
  input: text(LIMITS.inputChars, "The first user message in place of the source's; the source's when absent.").optional(),
  model: text(LIMITS.modelChars, "The model to continue with; the source's when absent.").optional(),
});
requestSchemas.add(ForkRunBody, { id: 'ForkRunRequest' });
export type ForkRunBody = z.infer<typeof ForkRunBody>;

export const RunParams = z.strictObject({ id: z.guid().describe('The run id (a UUID).') });
export const StepParams = RunParams.extend({
  seq: z.coerce.number().int().min(1).max(LIMITS.maxSeq).describe('The step number, from 1.'),
});
export const ListRunsQuery = z.strictObject({
  status: z.enum(RUN_STATUSES).optional().describe('Only runs in this status.'),
  limit: z.coerce.number().int().min(1).max(LIMITS.pageSize).default(20).describe('Runs per page.'),
  cursor: z.string().min(1).max(512).optional().describe('The nextCursor of the previous page.'),
  agent: z.string().min(1).max(LIMITS.modelChars).optional().describe('Only runs of this agent.'),
});

// ---- responses ----

const timestamp = z.string().meta({ format: 'date-time' });
const count = z.number().int().nonnegative();

export const ErrorDetail = z.object({
  code: z.string().describe('Stable, machine-readable: invalid_request, not_found, conflict, …'),
  message: z.string(),
  issues: z.array(z.object({ path: z.string(), message: z.string() })).optional().describe('The failing fields (400 only).'),
});
export const ErrorBody = z.object({ error: ErrorDetail });
responseSchemas.add(ErrorBody, { id: 'Error' });
export type ErrorBody = z.infer<typeof ErrorBody>;

export const CreatedRun = z.object({ id: z.guid(), status: z.enum(RUN_STATUSES).describe('QUEUED for a new run; the run\'s status now when an Idempotency-Key answered an earlier one.') });
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

export const ToolCallParams = RunParams.extend({
  toolUseId: z.string().min(1).max(200).describe("The tool call's id (the model's tool_use id), as `waiting.toolCalls` lists it."),
});
export const DecisionBody = z
  .discriminatedUnion('decision', [
    z.strictObject({ decision: z.literal('approve') }).describe('Run the call (for a call found started after a crash: run it again).'),
    z
      .strictObject({ decision: z.literal('deny'), reason: text(2000, 'Why; the model sees it in the is_error tool_result.') })
      .describe('Do not run it; the model is told, with the reason.'),
    z
      .strictObject({ decision: z.literal('complete'), result: z.unknown().describe('Its result: a string, or a value sent as JSON.') })
      .describe('Only for a call found started after a crash: it did happen, and this is its result.'),
  ])
  .describe('A decision about one waiting tool call.');
requestSchemas.add(DecisionBody, { id: 'DecisionRequest' });
export const DecidedRun = z.object({
  id: z.guid(),
  status: z.enum(RUN_STATUSES).describe('WAITING while other calls still wait for a decision; QUEUED once the last one is made.'),
});
responseSchemas.add(DecidedRun, { id: 'DecisionResult' });

export const WaitingJson = z
  .object({
    kind: z.enum(WAITING_KINDS).describe('approval: calls wait to be approved; decision: a call a crash left unfinished; timer: the sleep tool.'),
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
  agentVersion: z.string().nullable().describe('The version label of the agent definition the run was created under; null when it had none.'),
  previousRunId: z.guid().nullable().describe('The run whose conversation this one continues; null for a new conversation.'),
  tenant: z.string().describe('Whose run it is: the tenant of the API key that created it ("default" without one).'),
  status: z.enum(RUN_STATUSES),
  input: z.string(),
  model: z.string(),
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
  providerRequeues: count.describe('Times the run went back to the queue because its model provider kept failing; bounded by its deadline, not by MAX_RUN_ATTEMPTS.'),
  cancelRequested: z.boolean(),
  metadata: z.record(z.string(), z.unknown()),
  lastError: z
    .object({ message: z.string(), at: timestamp, attempt: count.describe('The attempt it ended.') })
    .nullable()
    .describe('Why the last attempt ended without finishing the run (a crash, a database failure, a model outage); null when none did.'),
  nextAttemptAt: timestamp.nullable().describe('When the run is tried again while it waits in the queue for a later time (after a model outage); null otherwise.'),
  forkedFrom: ForkPointJson.nullable().describe('Set for a fork: the run whose steps 1..afterSeq begin its conversation.'),
  waiting: WaitingJson.nullable().describe('While the run is WAITING: what for; null otherwise.'),
});
responseSchemas.add(RunJson, { id: 'Run' });
export type RunJson = z.infer<typeof RunJson>;

export const RunDetailJson = RunJson.extend({
  provider: z.string().nullable().describe('The model provider of its latest model step ("anthropic", "openai" …); null before its first model call.'),
});
responseSchemas.add(RunDetailJson, { id: 'RunDetail' });

export const RunListItemJson = RunJson.extend({
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
  attempts: count.describe('Provider calls the step took, retries included.'),
  latencyMs: count.nullable(),
  worker: z.string().nullable(),
  startedAt: timestamp,
  finishedAt: timestamp.nullable(),
  inherited: z.boolean().describe("True for a fork's steps that belong to the run it was forked from."),
  inheritedFrom: z.guid().nullable().describe('The run an inherited step was recorded in; null for the run\'s own steps.'),
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
