/**
 * What the driver is given (its agent and its dependencies) and the exceptions that end an attempt
 * without ending the run: the types the driver, the worker and the tool batch share.
 */
import type { Usage } from '../domain/types.ts';
import type { CompactionOption } from '../core/compaction.ts';
import type { LlmClient, ModelOptions, ToolDefinition } from '../llm/types.ts';
import type { EngineEvents } from '../ports/engine-events.ts';
import type { EngineStore, Lease } from '../ports/engine-store.ts';
import type { RunWorkspace, Workspaces } from '../ports/workspace.ts';
import type { ToolExecutor } from '../tools/executor.ts';
import type { Followers } from './step-stream.ts';

/** The agent a worker runs: its prompt and tools, with the digests under which their texts are stored. */
export interface PreparedAgent {
  system: string | null;
  systemDigest: string | null;
  tools: ToolExecutor;
  /** The tools as the model is told of them, computed once. */
  toolDefinitions: readonly ToolDefinition[];
  toolsDigest: string | null;
  maxTokens: number;
  /** How the model is asked to answer in its runs (each run's own over these); null or absent: the provider's defaults. */
  modelOptions?: ModelOptions | null;
  /** When its runs compact (see compaction.ts); absent or null: the defaults, false: never. */
  compaction?: CompactionOption | null;
  /** The agent's runs each have a workspace (defineAgent's `workspace`), rebuilt here when claimed. */
  workspaces?: Workspaces;
}

export interface DriverDeps {
  store: EngineStore;
  llm: LlmClient;
  agent: PreparedAgent;
  /** The lease of this claim: every write presents it. */
  owner: Lease;
  events: Required<EngineEvents>;
  costOf: (model: string, usage: Usage) => number;
  now: () => Date;
  /** Aborted when the run must be given up at once; in-flight calls are cancelled. */
  signal: AbortSignal;
  /** True when the worker is shutting down: hand the run back at the next step boundary. */
  shouldYield: () => boolean;
  /**
   * Null while the worker may drive; else settles when it may again. Its liveness session dropped: no
   * step starts until the session is back under the same lock (or the run is stopped, its runs being
   * taken over). A step in flight finishes; its writes are fenced as ever.
   */
  untilLive?: () => Promise<void> | null;
  /**
   * Where a model call cut off by the signal (cancel, deadline, lost lease, hand-back) leaves the usage
   * it had already reported: billed, and recorded in no step. The write that ends the attempt adds it
   * to the run. (The worker's held run itself: a callback would be a closure more per run in flight.)
   */
  cutOff?: { unrecorded: Unrecorded | null };
  /** Whether somebody follows the run's live events (see step-stream.ts); nobody, when absent. */
  followers?: Followers;
  /** The run's workspace, opened by `drive` for an agent with `workspaces`. */
  workspace?: RunWorkspace;
}

/** The worker is shutting down; the run goes back to the queue with nothing lost. */
export class AttemptHandedBack extends Error {
  constructor() {
    super('run handed back at a step boundary');
  }
}

/** The run started to wait (for a person or a timer) and holds nothing now: the attempt is over. */
export class AttemptWaiting extends Error {
  constructor() {
    super('the run is waiting');
  }
}

/** Model calls paid for but recorded in no step: the write that ends or requeues the attempt adds them. */
export interface Unrecorded {
  usage: Usage;
  costUsd: number;
}

/** The model provider kept failing in a way that passes; put the run back in the queue for later. */
export class AttemptRequeued extends Error {
  constructor(
    message: string,
    readonly retryAfterMs: number | null,
    /** What the failed attempts of the call were billed (pass it on in the release: `Release.usage`/`costUsd`). */
    readonly unrecorded: Unrecorded | null = null,
  ) {
    super(message);
  }
}
