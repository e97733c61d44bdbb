/**
 * What a request about runs may hold, as zod schemas: the HTTP API parses its bodies, queries and
 * paths with them and the library API (runs.ts) its options, so both refuse the same input with the
 * same message. Schemas with an id in `requestSchemas` become named OpenAPI components.
 */
import { z } from 'zod';
import { RUN_STATUSES } from '../domain/types.ts';
import { ModelOptionsSchema } from '../llm/model-options.ts';
import { InputBlocks } from '../core/content-blocks.ts';
import { storableString, textProblem } from '../core/text-problems.ts';

export const requestSchemas = z.registry<{ id: string }>();

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

const text = (max: number, description: string) => storableString(max).describe(description);
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
    // TextEncoder rather than Buffer: these schemas are type-checked for the browser too (the dashboard's types).
    if (problem) ctx.addIssue({ code: 'custom', message: problem });
    else if (new TextEncoder().encode(JSON.stringify(m)).length > LIMITS.metadataBytes) {
      ctx.addIssue({ code: 'custom', message: `must be at most ${LIMITS.metadataBytes} bytes as JSON` });
    }
  })
  .describe(`Any JSON object, kept with the run; at most ${LIMITS.metadataBytes} bytes as JSON.`);

/** A task as text. */
export const TaskText = text(LIMITS.inputChars, 'The task as text.');

export const CreateRunBody = z.strictObject({
  input: z
    .union([TaskText, InputBlocks])
    .describe('The task: the first user message of the conversation, as text or as content blocks (text, images, documents).'),
  agent: text(
    LIMITS.modelChars,
    "The agent to run, by name; the server's first agent when absent (the previous run's with previousRunId).",
  ).optional(),
  model: text(LIMITS.modelChars, "The model to call; the server's DEFAULT_MODEL when absent.").optional(),
  tokenBudget: int(1, LIMITS.tokenBudget, 'Tokens the run may use (input, cache writes and output).').optional(),
  timeoutSeconds: int(1, LIMITS.timeoutSeconds, 'Wall-clock limit from now; the run is TIMED_OUT after it.').optional(),
  maxSteps: int(1, LIMITS.maxSteps, "Step cap; at most the server's MAX_STEPS.").optional(),
  metadata: Metadata.optional(),
  modelOptions: ModelOptionsSchema.optional().describe(
    "How the model is asked to answer: thinking, temperature, topP, topK, stopSequences, toolChoice, maxTokens; over the agent's modelOptions, field by field.",
  ),
  costBudgetUsd: z
    .number()
    .positive()
    .max(LIMITS.costBudgetUsd)
    .optional()
    .describe(
      "USD the run may spend on model calls; the server's DEFAULT_COST_BUDGET_USD when absent (none when that is unset). The model must have a price.",
    ),
  previousRunId: z
    .guid('must be a run id (a UUID)')
    .optional()
    .describe("Continue the conversation of this finished run (the caller's): its messages, then this input; same agent."),
  startAt: z.iso
    .datetime({ offset: true })
    .optional()
    .describe(
      'Not started before this time (ISO-8601, at most a year ahead); the run is QUEUED until then. Its timeoutSeconds counts from then.',
    ),
});
requestSchemas.add(CreateRunBody, { id: 'CreateRunRequest' });
export type CreateRunBody = z.infer<typeof CreateRunBody>;

// A fork continues its source's conversation with its source's agent: neither is chosen here.
export const ForkRunBody = CreateRunBody.omit({ agent: true, previousRunId: true }).extend({
  afterSeq: int(1, LIMITS.maxSeq, "The fork continues the source's conversation after this step; it must end a whole turn."),
  input: z
    .union([TaskText, InputBlocks])
    .optional()
    .describe("The first user message in place of the source's (text or content blocks); the source's when absent."),
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
  scheduleId: z.guid().optional().describe('Only runs this schedule made.'),
});

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
