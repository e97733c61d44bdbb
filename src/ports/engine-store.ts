import type { EarlierRun } from '../core/chain-replay.ts';
import type { NewEvent } from './new-event.ts';
import type { FileChange } from './workspace.ts';
import type {
  BudgetKind,
  ContentBlock,
  DecisionRecord,
  ModelRequestParams,
  Run,
  RunId,
  RunProgress,
  RunStatus,
  Step,
  StepStatus,
  TerminalStatus,
  Usage,
  Waiting,
} from '../domain/types.ts';

/** Who writes, and for how long a successful write extends the lease. Every engine write is fenced on it. */
export interface LeaseOwner {
  worker: string;
  leaseMs: number;
}

/** The right to write to one claimed run: the worker's name plus the token of that claim. */
export interface Lease extends LeaseOwner {
  token: string;
}

/** The times a claimed run keeps as numbers. */
export type HeldTime = 'runAt' | 'lockedUntil' | 'createdAt' | 'updatedAt' | 'finishedAt' | 'nextAttemptAt' | 'scheduledFor';

/** A run as the engine drives it: a Run (which is one), or a claimed run, without the times it keeps apart. */
export type DrivenRun = Omit<Run, HeldTime>;

export interface ClaimedRun extends DrivenRun {
  /** False when the run has no steps yet, so a fresh run needs no read of its (empty) log. */
  hasSteps: boolean;
  /** The lease this claim gave; every later write about the run presents it. */
  lease: Lease;
  /** Not written: a claimed run without metadata shares one frozen object with the others. */
  metadata: Readonly<Record<string, unknown>>;
  /** Its HeldTime fields as epoch milliseconds, null where the Run's is null (see claimed-run.ts). */
  times: { [K in HeldTime]: Run[K] extends Date ? number : number | null };
}

/** How a run goes back to the queue without finishing. */
export interface Release {
  /**
   * True when this attempt counts toward the abandon limit (the driver crashed, the database failed);
   * false for a hand-back at shutdown and for a requeue caused by the model provider.
   */
  countAttempt: boolean;
  /** The model provider kept failing: counted in `providerRequeues` (bounded by the deadline), not in `attempts`. */
  providerRequeue?: boolean;
  /**
   * @unit milliseconds — not claimable again before this delay (any size: a wait past the run's deadline
   * requeues it to the deadline, where it times out). 0 or absent: claimable at once, in its old place.
   */
  delayMs?: number;
  /** Why; recorded as the run's last error (with the time and the attempt), not as its `error` (it has not ended). */
  error?: string;
  /**
   * Usage of model calls this attempt paid for but recorded in no step (a call that failed for good
   * after attempts the provider billed): added to the run's `tokensUsed` (as `budgetTokens`) and,
   * with `costUsd`, to its `costUsd`, so the budget and the cost count what is known to be billed.
   */
  usage?: Usage;
  costUsd?: number;
}

/** What a release did; `false` from `release` when the lease was no longer held. */
export interface Released {
  /** QUEUED, or CANCELLED when a cancel was pending (nobody would drive the run to its next guard). */
  status: 'QUEUED' | 'CANCELLED';
  tokensUsed: number;
  /** When the run may be claimed again. */
  runAt: Date;
}

/** One run a worker holds, as its lease keeper renews it. */
export interface HeldLease {
  runId: RunId;
  token: string;
}

/** What one renewal found of a run still held (its lease extended, or written lately by a step). */
export interface RenewedLease extends HeldLease {
  cancelRequested: boolean;
  /** An event hub follows the run (see step-stream.ts). */
  followed: boolean;
}

/** Told by a lease keeper after each renewal that found something to act on. */
export interface LeaseKeeperListener {
  /** The lease is gone (it lapsed and the run was claimed again, or the run is no longer RUNNING). */
  lost(lease: HeldLease): void;
  /** A cancel was requested for the run (the fallback when the NOTIFY was missed). */
  cancelRequested(runId: RunId): void;
  /** An event hub follows the run (the fallback when the NOTIFY was missed). */
  followed?(runId: RunId): void;
  /** A renewal failed; the keeper tries again at the next interval. */
  failed(error: Error): void;
}

/**
 * Keeps the leases of every run one worker holds alive, renewing them all in one statement per
 * interval: liveness costs per worker, not per run.
 */
export interface LeaseKeeper {
  /** Settles when the keeper can renew (connected, or known not to be yet: it keeps trying). */
  readonly ready: Promise<void>;
  hold(lease: HeldLease): void;
  drop(runId: RunId): void;
  close(): Promise<void>;
}

export type LeaseKeeperFactory = (owner: LeaseOwner, intervalMs: number, listener: LeaseKeeperListener) => LeaseKeeper;

/** Told by owner liveness what it found about other workers and about itself. */
export interface OwnerLivenessListener {
  /** RUNNING runs carry these owner keys, and nobody holds their lock: their workers are gone. */
  orphaned(ownerLocks: number[]): void;
  /** This worker's own lock is gone for good: its runs are being taken over, it must stop driving them. */
  lost(): void;
  /** The session dropped and came back under the same lock: runs taken over meanwhile must be found. */
  regained(): void;
}

/**
 * A worker's liveness, independent of its leases: a lock that vanishes with the worker, so live
 * workers take over its runs at once instead of waiting for their leases to lapse.
 */
export interface OwnerLiveness {
  /** Settles when the first lock is taken, or known not to be yet (it keeps trying). */
  readonly ready: Promise<void>;
  /**
   * What a claim writes as the runs' owner lock: this worker's key; null when it relies on the lease
   * alone; 'lost' while its lock is not held (the worker claims nothing then).
   */
  ownerLock(): number | null | 'lost';
  close(): Promise<void>;
}

export type OwnerLivenessFactory = (listener: OwnerLivenessListener) => OwnerLiveness;

/** What a claim writes and whom it may take over, from owner liveness. */
export interface ClaimLiveness {
  /** Written to the claimed runs (null: the lease alone tells whether this worker lives). */
  ownerLock: number | null;
  /** Owner locks nobody holds: their RUNNING runs are claimable whatever their lease says. */
  orphaned: readonly number[];
}

export interface ModelCheckpoint {
  seq: number;
  request: ModelRequestParams;
  content: ContentBlock[];
  stopReason: string;
  usage: Usage;
  /** What the step counts against the token budget (see `budgetTokens`). */
  budgetTokens: number;
  /** Provider calls the step took, retries included. */
  attempts: number;
  costUsd: number;
  latencyMs: number;
  /** The step's live events not written while it streamed (step.started, the last text): written first. */
  streamed?: readonly NewEvent[];
}

export interface ToolStart {
  seq: number;
  toolUseId: string;
  toolName: string;
  /** The input the model gave the call, for its tool.started event (redacted there). */
  input?: unknown;
}

export interface ToolFinish {
  toolUseId: string;
  /** The tool step's seq, as the caller knows it (the store finds the step by its tool_use id; its events carry the row's own). */
  seq?: number;
  status: Exclude<StepStatus, 'STARTED'>;
  result: string;
  latencyMs: number;
  /** What the call changed in the run's workspace (its contents saved already), recorded with the result. */
  files?: readonly FileChange[];
  /** The call ran again after a crash cut it off (its STARTED row was found on resume). */
  rerun?: boolean;
}

export interface RunEnd {
  status: TerminalStatus;
  output?: string | null;
  error?: string | null;
  /** The final model step's stop reason, when the run ends on one (e.g. "max_tokens" for a cut-short answer). */
  stopReason?: string | null;
  /**
   * Usage of model calls paid for but recorded in no step (a call that failed for good, a reply that
   * could not be stored): `finish` adds it to `tokensUsed` (as `budgetTokens`) and `costUsd` to the cost.
   */
  usage?: Usage;
  costUsd?: number;
  /** The limit that ended the run, when one did: reported to the engine's events, not stored. */
  budget?: BudgetKind;
}

export interface AfterCheckpoint {
  /** Write the STARTED row of the tool call that runs next (unless a cancel was requested meanwhile). */
  startNext?: ToolStart;
  /** The run ends with this step: finish it in the same transaction. */
  end?: RunEnd;
  /** The step asks for calls that need approval: the run goes WAITING in the same transaction. */
  wait?: WaitStart;
}

/**
 * How a run starts waiting: it gives up its lease (and the attempt, as a hand-back does) and is not
 * claimable before `waiting.wakeAt` (a timer), `waiting.expiresAt` (an approval that times out), or
 * ever (until every decision is made). A cancel pending ends it CANCELLED instead.
 */
export interface WaitStart {
  /** `since` is set by the database. */
  waiting: Omit<Waiting, 'since'>;
  /** Pending decisions to record, one per call a person must decide about. */
  decisions?: { toolUseId: string; kind: 'approval' | 'decision'; expiresAt: Date | null }[];
  /** The STARTED row of a timer's call, written with the wait. */
  start?: ToolStart;
}

/** What a wait did: WAITING, or CANCELLED when a cancel was pending. */
export interface Waited extends RunProgress {
  status: 'WAITING' | 'CANCELLED';
}

export interface FencedWrite extends RunProgress {
  /** Whether the STARTED row of `startNext` was written. */
  nextStarted: boolean;
  /** Set when `wait` was given: the status the run went to. */
  waited?: Waited['status'];
}

/** Which write to look for in `recordedWrite`. */
export interface WriteProbe {
  /** A MODEL step at this seq. */
  modelSeq?: number;
  /** The tool step of this tool_use id, finished (DONE or ERROR). */
  finishedToolUseId?: string;
  /** The STARTED row a checkpoint may have written with the step. */
  startNext?: ToolStart;
}

/** What a write whose reply was lost left behind (see retrying-writes.ts). */
export interface RecordedWrite extends RunProgress {
  status: RunStatus;
  /** The run still carries this lease's token: every write since the claim was this driver's. */
  ours: boolean;
  modelStep: boolean;
  toolFinished: boolean;
  nextStarted: boolean;
}

/**
 * The database operations the engine needs. Every write checks that `owner` still holds the run's
 * lease, in the same statement as the write, and raises `LeaseLostError` (writing nothing) if not.
 * Each write returns the run's progress, so the guard needs no query of its own.
 */
export interface EngineStore {
  /**
   * Takes up to `limit` runs of `agents` (the demo agent's when absent) that are QUEUED or due, or
   * RUNNING with a lapsed lease or an owner that is gone (`liveness`); one statement.
   */
  claim(
    owner: LeaseOwner,
    limit: number,
    holding?: readonly RunId[],
    agents?: readonly string[],
    liveness?: ClaimLiveness,
  ): Promise<ClaimedRun[]>;
  steps(runId: RunId): Promise<Step[]>;
  /**
   * Records a model step, and in the same statement what follows it when that is already known (see
   * AfterCheckpoint), saving a round trip and a commit per step.
   */
  checkpointModel(runId: RunId, owner: Lease, cp: ModelCheckpoint, then?: AfterCheckpoint): Promise<FencedWrite>;
  /** Records a tool call as STARTED before it runs. `created` is false when the row already existed. */
  startTool(runId: RunId, owner: Lease, start: ToolStart): Promise<RunProgress & { seq: number; created: boolean }>;
  /**
   * Records a tool's result; `startNext` as for checkpointModel. Throws StepNotStartedError, having
   * written nothing at all, when the tool step is not STARTED.
   */
  finishTool(runId: RunId, owner: Lease, finish: ToolFinish, startNext?: ToolStart): Promise<FencedWrite>;
  finish(runId: RunId, owner: Lease, end: RunEnd): Promise<void>;
  /**
   * Reads what a write may have left when its reply was lost (the connection died around the commit),
   * so a retry that finds its own row already there treats the write as done. Null: no such run.
   */
  recordedWrite(runId: RunId, owner: Lease, probe: WriteProbe): Promise<RecordedWrite | null>;
  /**
   * Renews the leases of many runs in one statement — those that run out within `withinMs` (null or
   * absent: all; see renewWithinMs) — and returns every run still held as the statement starts (the
   * others are lost).
   */
  renewLeases(owner: LeaseOwner, held: readonly HeldLease[], withinMs?: number | null): Promise<RenewedLease[]>;
  /**
   * Puts a run back in the queue: at once and without counting the attempt for a hand-back at
   * shutdown; after a delay when the model provider kept failing; at once, counted, with the cause
   * when the driver crashed. A run with a cancel pending is CANCELLED instead. False when the lease
   * was no longer held.
   */
  release(runId: RunId, owner: Lease, how?: Release): Promise<Released | false>;
  /**
   * Gives back the attempt a lapsed lease cost the run, when the worker that held it lived to see it
   * lost (it stalled; the run did not kill it). Only the claim that took over `lost` is affected, once.
   */
  forgiveLapsedAttempt(runId: RunId, lost: Lease): Promise<boolean>;
  /** Stores a text once under its SHA-256 and returns the digest. */
  putBlob(body: string): Promise<string>;
  /** The text stored under `digest`, or null. */
  blob(digest: string): Promise<string | null>;
  /**
   * The conversations, oldest first, that run `runId`'s own log continues (through `previousRunId`,
   * its own or its fork source's; see lineage-sql.ts), each with its input and steps (a fork's
   * inherited ones included): what the run replays before its own log. One read, at claim time.
   */
  conversationBefore(runId: RunId): Promise<EarlierRun[]>;
  /** Live events of a run this lease holds (streamed text and the like); fenced like every write. */
  appendEvents?(runId: RunId, owner: Lease, events: readonly NewEvent[]): Promise<void>;
  /**
   * The claim's run.started (see RunEvents.claimed): the highest attempt each model step has used so
   * far, and whether an event hub follows the run now.
   */
  eventsClaimed?(runId: RunId, owner: Lease, attempt: number): Promise<EventsClaimed>;
  /** The decisions recorded for the run's tool calls, pending ones included. */
  decisions(runId: RunId): Promise<DecisionRecord[]>;
  /** Makes the run WAITING (see WaitStart); fenced like every engine write. */
  wait(runId: RunId, owner: Lease, start: WaitStart): Promise<Waited>;
  /** Uses up a crash decision ("run it again") as the call runs again; fenced. */
  consumeDecision(runId: RunId, owner: Lease, toolUseId: string): Promise<void>;
  /**
   * @unit milliseconds — until the nearest run that is not claimable yet becomes due (a timer, a
   * delayed start, a requeue); null when there is none. An idle worker sets one timer for it.
   * `lookbackMs`: how long ago its last claim looked; a run that came due since counts as due now (0).
   */
  nextDueInMs?(lookbackMs?: number): Promise<number | null>;
}

/** The attempts of a run no earlier attempt streamed to (most runs): one map for all, not one per run held. */
export const NO_ATTEMPTS: ReadonlyMap<number, number> = new Map();

/** What a claim's first write tells (see EngineStore.eventsClaimed). */
export interface EventsClaimed {
  /** Model step seq → the highest attempt number it has used so far. */
  attempts: ReadonlyMap<number, number>;
  /** An event hub follows the run's live events. */
  followed: boolean;
}
