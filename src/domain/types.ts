/**
 * The project's vocabulary.
 *
 * - run: one agent task, a row in `run`. It is the unit that is queued, claimed, driven and finished.
 * - step: one checkpointed unit of work inside a run, a row in `run_step`: a MODEL call or a TOOL call.
 *   Steps are numbered 1, 2, 3 … by `seq`; the ordered steps are the log, and the log is the truth.
 * - worker: a loop that claims runs and drives them; its name is written to `locked_by` and `run_step.worker`.
 * - lease: the worker's right to drive a run until `locked_until`. Every write is fenced on it: a write
 *   by a worker that no longer holds the lease changes nothing and raises `LeaseLostError`.
 * - attempt: one claim of a run. A run that is claimed too often without finishing is abandoned. A
 *   hand-back at shutdown, a requeue after a model outage and a lease lost while its worker was alive
 *   but stalled give the attempt back: none of them is the run's doing.
 * - checkpoint: the single transaction that records a finished step together with its token counts
 *   and a renewal of the lease.
 * - replay: the pure fold from the ordered steps to the conversation and the work still pending.
 * - guard: the pure check, before every step, of cancel, deadline, token budget, cost budget and step cap.
 * - driver: the state machine that guards, decides the next action and performs it.
 * - fork: a run that continues another run's conversation from after one of its steps, with another
 *   model or another first input. It refers to the source's steps instead of copying them.
 * - agent: a definition in code (name, system prompt, tools). A run names its agent; a worker drives
 *   only the runs of the agents it has.
 * - conversation: a run may continue a finished run (`previousRunId`); its model sees the earlier
 *   runs' messages, then its own input. Nothing is copied: replay follows the chain.
 * - waiting: a run that holds nothing (no lease, no memory) until a person decides about its tool calls
 *   (an approval, or a decision about a call a crash left unfinished) or a time comes (a timer).
 * - decision: what a person says about one waiting tool call: approve, deny (with a reason) or, for a
 *   call found started after a crash, complete (it did happen; this is its result).
 * - tenant: whose runs these are. An API key belongs to one tenant; a request made with it sees and
 *   creates that tenant's runs only.
 */

export type RunId = string & { readonly __brand: 'RunId' };

/** The agent of the built-in demo (the support assistant and its ticket tools); also the agent of runs that name none. */
export const DEMO_AGENT = 'demo';

/** The tenant of runs created without an API key (no keys yet, AUTH=off, the library's own calls). */
export const DEFAULT_TENANT = 'default';

export const RUN_STATUSES = ['QUEUED', 'RUNNING', 'WAITING', 'SUCCEEDED', 'FAILED', 'CANCELLED', 'TIMED_OUT'] as const;
export type RunStatus = (typeof RUN_STATUSES)[number];
export type TerminalStatus = Exclude<RunStatus, 'QUEUED' | 'RUNNING' | 'WAITING'>;
export const TERMINAL_STATUSES: readonly TerminalStatus[] = ['SUCCEEDED', 'FAILED', 'CANCELLED', 'TIMED_OUT'];

export function isTerminal(status: RunStatus): status is TerminalStatus {
  return (TERMINAL_STATUSES as readonly RunStatus[]).includes(status);
}

export const STEP_KINDS = ['MODEL', 'TOOL'] as const;
export type StepKind = (typeof STEP_KINDS)[number];
export const STEP_STATUSES = ['STARTED', 'DONE', 'ERROR'] as const;
export type StepStatus = (typeof STEP_STATUSES)[number];

/** Which limit stopped a run: its token budget, its money budget, its step cap or its deadline. */
export type BudgetKind = 'tokens' | 'cost' | 'steps' | 'time';

/**
 * Extended thinking: `enabled` with a budget of output tokens for it (at least 1,024, below the call's
 * max tokens), `adaptive` where the model decides how much to think, or `disabled` (a run's way to turn
 * its agent's thinking off).
 */
export type ThinkingOption = { type: 'enabled'; budgetTokens: number } | { type: 'adaptive' } | { type: 'disabled' };

/** Which tool the model must call: any it likes or none (`auto`), one at least (`any`), none (`none`), or this one. */
export type ToolChoice = 'auto' | 'any' | 'none' | { name: string };

/**
 * How the model is asked to answer, per agent (`defineAgent({ modelOptions })`) and per run (over the
 * agent's). Absent fields are the provider's defaults.
 */
export interface ModelOptions {
  thinking?: ThinkingOption;
  temperature?: number;
  topP?: number;
  topK?: number;
  stopSequences?: readonly string[];
  toolChoice?: ToolChoice;
  /** `max_tokens` of each call (the agent's `maxTokens`, the runtime's MAX_TOKENS when absent). */
  maxTokens?: number;
}

/** The options a provider sends with one call (thinking only when on); the call's max tokens is `LlmRequest.maxTokens`. */
export type CallOptions = Readonly<
  Omit<ModelOptions, 'maxTokens' | 'thinking'> & { thinking?: Exclude<ThinkingOption, { type: 'disabled' }> }
>;

/** A content block of the Messages API, kept verbatim: blocks we do not interpret pass through untouched. */
export interface ContentBlock {
  type: string;
  [key: string]: unknown;
}
export interface TextBlock extends ContentBlock {
  type: 'text';
  text: string;
}
export interface ToolUseBlock extends ContentBlock {
  type: 'tool_use';
  id: string;
  name: string;
  input: unknown;
}
export interface ToolResultBlock extends ContentBlock {
  type: 'tool_result';
  tool_use_id: string;
  /** The result's text, or its content blocks (text and images) for a tool that returned `{ content }`. */
  content: string | ContentBlock[];
  is_error?: boolean;
}

export interface Message {
  role: 'user' | 'assistant';
  content: string | ContentBlock[];
}

export function isToolUse(block: ContentBlock): block is ToolUseBlock {
  return block.type === 'tool_use' && typeof block.id === 'string' && typeof block.name === 'string';
}

/** The text of the text blocks, joined with `separator` (none: a reply's blocks are one text; a blank line for a person's). */
export function textOf(content: readonly ContentBlock[], separator = ''): string {
  return content
    .filter((b): b is TextBlock => b.type === 'text' && typeof b.text === 'string')
    .map((b) => b.text)
    .join(separator);
}

/** Token counts of one model call, as the provider reports them. */
export interface Usage {
  inputTokens: number;
  outputTokens: number;
  cacheCreationInputTokens: number;
  cacheReadInputTokens: number;
}

/**
 * Tokens that count against a run's budget. Cache reads are left out on purpose: they are the cheap
 * re-reading of a prefix the run already paid for, so counting them would make a long cached run
 * look more expensive than an uncached one. Cache writes are new input and do count.
 */
/** The most tokens one count may hold: the range of the PostgreSQL integer columns that store it. */
export const MAX_TOKEN_COUNT = 2 ** 31 - 1;

/** The sum of two usages, each count kept within MAX_TOKEN_COUNT. */
export function addUsage(a: Usage, b: Usage | null | undefined): Usage {
  if (!b) return a;
  const add = (x: number, y: number) => Math.min(x + y, MAX_TOKEN_COUNT);
  return {
    inputTokens: add(a.inputTokens, b.inputTokens),
    outputTokens: add(a.outputTokens, b.outputTokens),
    cacheCreationInputTokens: add(a.cacheCreationInputTokens, b.cacheCreationInputTokens),
    cacheReadInputTokens: add(a.cacheReadInputTokens, b.cacheReadInputTokens),
  };
}

export function budgetTokens(u: Usage): number {
  return u.inputTokens + u.cacheCreationInputTokens + u.outputTokens;
}

export interface Run {
  id: RunId;
  /** The agent that drives it, by name; a worker claims only the runs of agents it serves. */
  agent: string;
  /** The version label of the agent definition it was created under; null when that had none. */
  agentVersion: string | null;
  /** The finished run whose conversation this one continues; null for a new conversation. */
  previousRunId: RunId | null;
  /** Whose run it is: the tenant of the API key that created it ("default" when created without one). */
  tenant: string;
  status: RunStatus;
  /** The task, as text: for an input sent as content blocks, the text of its text blocks. */
  input: string;
  /** The input as the content blocks it was sent as (text, images, documents); null for a text input. */
  inputContent: ContentBlock[] | null;
  model: string;
  /**
   * How the model is asked to answer (thinking, sampling, tool choice, max tokens), fixed when the run
   * was made: its agent's, its own over them. Null for a run made with neither (its agent's apply).
   */
  modelOptions: ModelOptions | null;
  tokenBudget: number;
  tokensUsed: number;
  costUsd: number;
  /** USD the run may spend on model calls; null: no money limit. */
  costBudgetUsd: number | null;
  maxSteps: number;
  deadlineAt: Date;
  runAt: Date;
  lockedBy: string | null;
  lockedUntil: Date | null;
  cancelRequested: boolean;
  attempts: number;
  metadata: Record<string, unknown>;
  createdAt: Date;
  updatedAt: Date;
  finishedAt: Date | null;
  output: string | null;
  /** The final model step's stop reason; "max_tokens" means the output was cut short. */
  stopReason: string | null;
  error: string | null;
  /** Why the last attempt ended without finishing the run (a crash, a database failure, a model outage). */
  lastError: AttemptError | null;
  /** Set while the run waits in the queue for a later time (a requeue after a model outage). */
  nextAttemptAt: Date | null;
  /** Times the run went back to the queue because the model provider kept failing; not counted in `attempts`. */
  providerRequeues: number;
  /** The run whose conversation, through step `afterSeq`, this run continues (a fork); null for any other run. */
  forkedFrom: ForkPoint | null;
  /** What the run waits for while WAITING; the last wait (or null) in any other status. */
  waiting: Waiting | null;
  /** The schedule that made it (a slot, or a trigger); null for a run made otherwise. */
  scheduleId: string | null;
  /** The time of the slot it was made for; null for a run made otherwise (a trigger included). */
  scheduledFor: Date | null;
}

/** Where a fork starts: the source run's steps 1..afterSeq are the fork's first steps, read from the source. */
export interface ForkPoint {
  runId: RunId;
  afterSeq: number;
}

export const WAITING_KINDS = ['approval', 'decision', 'timer'] as const;
export type WaitingKind = (typeof WAITING_KINDS)[number];

/** A tool call a waiting run holds: the model's tool_use, not run. */
export interface PendingToolCall {
  toolUseId: string;
  toolName: string;
  input: unknown;
}

export interface Waiting {
  kind: WaitingKind;
  since: Date;
  toolCalls: PendingToolCall[];
  /** A timer's wake-up time. */
  wakeAt: Date | null;
  /** When pending approvals are denied with "approval timed out". */
  expiresAt: Date | null;
}

/** What a person decides about a waiting tool call. */
export type Decision =
  | { decision: 'approve' }
  | { decision: 'deny'; reason: string }
  /** Only for a call found started after a crash: it did happen, and this is its result. */
  | { decision: 'complete'; result: unknown };

/** One recorded decision, or a pending one (decision null), as the engine reads it back. */
export interface DecisionRecord {
  toolUseId: string;
  /** 'approval': asked for before the call runs; 'decision': the call was found started after a crash. */
  kind: 'approval' | 'decision';
  decision: Decision['decision'] | null;
  reason: string | null;
  /** 'complete': the result text the model sees. */
  result: string | null;
  expiresAt: Date | null;
}

/** The cause of an attempt that ended without finishing its run. */
export interface AttemptError {
  message: string;
  at: Date;
  /** The attempt (claim number) it ended. */
  attempt: number;
}

/** What a model step stores of its request: the parameters, never the message list (that is the log). */
export interface ModelRequestParams {
  model: string;
  maxTokens: number;
  /** Digest of the system prompt text, stored once in `content_blob`. */
  systemDigest: string | null;
  /** Digest of the tool definitions JSON, stored once in `content_blob`. */
  toolsDigest: string | null;
  /** The model client's provider, e.g. "anthropic" or "openai"; absent in steps recorded before it was kept. */
  provider?: string;
  /** The call's model options (thinking, sampling, tool choice) as sent; absent: none. */
  options?: CallOptions;
  /** Set on a compaction step: its answer is a summary standing for all but the last `keptMessages` messages. */
  compaction?: { keptMessages: number };
}

export interface Step {
  runId: RunId;
  seq: number;
  kind: StepKind;
  status: StepStatus;
  toolName: string | null;
  toolUseId: string | null;
  /** MODEL: the request parameters; TOOL: null (the input is the tool_use block of the model step). */
  request: ModelRequestParams | null;
  /** MODEL: the assistant content blocks; TOOL: the result text (null while STARTED). */
  response: ContentBlock[] | string | null;
  stopReason: string | null;
  inputTokens: number;
  outputTokens: number;
  cacheCreationInputTokens: number;
  cacheReadInputTokens: number;
  costUsd: number;
  /** Calls to the provider this step took (retries included); 1 for tool steps. */
  attempts: number;
  latencyMs: number | null;
  worker: string | null;
  startedAt: Date;
  finishedAt: Date | null;
}

/** A step without its bodies (request, response): what a timeline shows. */
export type StepSummary = Omit<Step, 'request' | 'response'>;

/** What the worker learns about its run from every fenced write, so guard needs no extra query. */
export interface RunProgress {
  tokensUsed: number;
  cancelRequested: boolean;
}

/**
 * A schedule: runs of an agent made from a cron expression in a time zone, one per slot (a time the
 * expression names), whichever process makes it. What each run is created with is `run`.
 */
export interface Schedule {
  id: string;
  tenant: string;
  /** Unique per tenant; a slot's run is known by the schedule's name and the slot's time. */
  name: string;
  cron: string;
  timezone: string;
  agent: string;
  run: ScheduledRun;
  /** 'skip': no run for a slot while the schedule's previous run is still active. */
  overlap: 'skip' | 'allow';
  /** What is made of slots missed while no process was there: the latest, all (at most 100), none. */
  catchUp: 'none' | 'latest' | 'all';
  /** @unit seconds — missed slots older than this are never made; null: no limit. */
  catchUpWindowSeconds: number | null;
  /** @unit seconds — each run starts up to this long after its slot, at random (0: at the slot). */
  jitterSeconds: number;
  startAt: Date | null;
  endAt: Date | null;
  paused: boolean;
  /** 'code': declared with defineSchedule, kept in step with the code at start; 'api': made by a request. */
  source: 'api' | 'code';
  /** The next slot; null when there is none (paused, or past endAt). */
  nextRunAt: Date | null;
  lastRunId: RunId | null;
  lastRunAt: Date | null;
  /** The status of the last run it made, when that run still exists. */
  lastRunStatus: RunStatus | null;
  skipped: { missed: number; overlap: number; lastReason: string | null; lastAt: Date | null };
  createdAt: Date;
  updatedAt: Date;
}

/** What a schedule's runs are created with (as a run's request would say it). */
export interface ScheduledRun {
  input: string;
  model?: string;
  tokenBudget?: number;
  costBudgetUsd?: number;
  timeoutSeconds?: number;
  maxSteps?: number;
  metadata?: Record<string, unknown>;
}
