/**
 * The API's JSON as the dashboard reads it (the server's zod schemas in src/api are the reference;
 * /openapi.json describes them). Fields that later versions of the API add are optional here, so the
 * page works against both: `waiting` (a WAITING run's pending tool calls), `lastError`, `nextAttemptAt`.
 */
export type RunStatus = 'QUEUED' | 'RUNNING' | 'WAITING' | 'SUCCEEDED' | 'FAILED' | 'CANCELLED' | 'TIMED_OUT';
export type StepKind = 'MODEL' | 'TOOL';
export type StepStatus = 'STARTED' | 'DONE' | 'ERROR';

export interface PendingToolCall {
  toolUseId: string;
  toolName: string;
  input: unknown;
}

export interface Waiting {
  kind: 'approval' | 'decision' | 'timer';
  since: string;
  toolCalls?: PendingToolCall[];
  wakeAt?: string | null;
  expiresAt?: string | null;
}

export interface Run {
  id: string;
  status: RunStatus | string;
  input: string;
  model: string;
  /** The agent that drives the run, by name. */
  agent: string;
  tokenBudget: number;
  tokensUsed: number;
  costUsd: number;
  maxSteps: number;
  deadlineAt: string;
  createdAt: string;
  updatedAt: string;
  finishedAt: string | null;
  output: string | null;
  error: string | null;
  stopReason: string | null;
  attempts: number;
  cancelRequested: boolean;
  metadata: Record<string, unknown>;
  waiting?: Waiting | null;
  /** Why the last attempt ended without finishing the run (a model outage, a crash). */
  lastError?: { message: string; at: string; attempt: number } | null;
  /** When a queued run is tried again, while it waits for a later time. */
  nextAttemptAt?: string | null;
}

export interface RunListItem extends Run {
  stepCount: number;
  durationMs: number | null;
}

export interface RunPage {
  runs: RunListItem[];
  nextCursor: string | null;
}

export interface TimelineStep {
  seq: number;
  kind: StepKind;
  status: StepStatus;
  toolName: string | null;
  toolUseId: string | null;
  stopReason: string | null;
  inputTokens: number;
  outputTokens: number;
  cacheCreationInputTokens: number;
  cacheReadInputTokens: number;
  costUsd: number;
  attempts: number;
  latencyMs: number | null;
  worker: string | null;
  startedAt: string;
  finishedAt: string | null;
  /** A fork's step that belongs to the run it was forked from. */
  inherited?: boolean;
}

export interface ContentBlock {
  type: string;
  [key: string]: unknown;
}

export interface Message {
  role: 'user' | 'assistant';
  content: string | ContentBlock[];
}

export interface ModelRequest {
  model: string;
  max_tokens: number;
  system?: string;
  tools?: { name: string; description: string; input_schema: Record<string, unknown> }[];
  messages: Message[];
}

export interface ToolRequest {
  toolUseId: string;
  name: string;
  input: unknown;
}

export interface StepDetail extends TimelineStep {
  request: ModelRequest | ToolRequest | null;
  response: ContentBlock[] | string | null;
}

export interface UsageTotals {
  steps: number;
  inputTokens: number;
  outputTokens: number;
  cacheWriteTokens: number;
  cacheReadTokens: number;
  costUsd: number;
}

export interface OverviewWindow {
  since: string;
  bucketSeconds: number;
  runsCreated: Record<string, number>;
  totals: UsageTotals;
  series: (UsageTotals & { start: string })[];
  latency: { kind: StepKind; steps: number; p50Ms: number | null; p95Ms: number | null }[];
}

export interface Overview {
  at: string;
  runsByStatus: Record<string, number>;
  hour: OverviewWindow;
  day: OverviewWindow;
}
