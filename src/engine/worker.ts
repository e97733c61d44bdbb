/**
 * The worker: claims runs (up to `concurrency` at once) and drives each. A lease keeper renews the
 * leases of every run it holds in one statement per interval; LISTEN/NOTIFY wakes it when runs are
 * queued (polling only as a fallback) and tells it of cancels, which reach the step in flight at
 * once, as do the run's deadline and a lost lease. On shutdown it stops claiming, lets in-flight
 * steps finish for a grace period, hands every run back, and stops waiting for steps that ignore
 * their signal at a force limit.
 */
import { DEMO_AGENT, type RunId, type TerminalStatus, type Usage } from '../domain/types.ts';
import { LeaseLostError } from '../domain/errors.ts';
import type { LlmClient, ModelOptions } from '../llm/types.ts';
import type { CompactionOption } from '../core/compaction.ts';
import type { Logger } from '../observability/logger.ts';
import type {
  ClaimedRun,
  EngineStore,
  LeaseKeeper,
  LeaseKeeperFactory,
  LeaseOwner,
  OwnerLiveness,
  OwnerLivenessFactory,
} from '../ports/engine-store.ts';
import type { ToolExecutor } from '../tools/executor.ts';
import { type ToolSource, withSourceTools } from '../tools/tool-source.ts';
import { AttemptEnds } from './attempt-end.ts';
import { drive } from './driver.ts';
import { retryingWrites } from './retrying-store.ts';
import { AttemptHandedBack, type PreparedAgent } from './driver-types.ts';
import type { Workspaces } from '../ports/workspace.ts';
import { EventLoopWatch } from './event-loop-watch.ts';
import { combineEvents, type EngineEvents } from '../ports/engine-events.ts';
import { inProcessLeaseKeeper } from './lease-keeper.ts';
import { CancelSignal, followSteps, HeldRun } from './run-stops.ts';
import { Deadlines } from './deadlines.ts';
import { promised } from '../util/promised.ts';

export interface WorkerOptions {
  name: string;
  concurrency: number;
  leaseMs: number;
  /** Claims a run may take without finishing before it is failed as abandoned (a poison run). */
  maxRunAttempts: number;
  pollIntervalMs: number;
  /**
   * @unit milliseconds — how often the leases are renewed, which also brings the cancels and followers
   * of held runs that no notification told of. Default: a third of the lease.
   */
  renewIntervalMs?: number;
  /** How long shutdown waits for in-flight steps before telling them to stop. */
  shutdownGraceMs: number;
  /**
   * How long, once told to stop, steps may take before their runs are handed back without them. A
   * non-idempotent tool is still let finish (its own timeout bounds it). Default 10000.
   */
  shutdownForceMs?: number;
  /** How long a run waits in the queue after its model provider kept failing (at least its retry-after). */
  requeueDelayMs: number;
  /** An event loop blocked at least this long is reported, naming the tool most likely to blame. Default 1000. */
  blockedLoopWarnMs?: number;
}

export interface AgentDefinition {
  /** The name its runs carry; the demo agent's ("demo") when absent. */
  name?: string;
  system: string | null;
  tools: ToolExecutor;
  maxTokens: number;
  /** How the model is asked to answer in its runs (each run's own over these). */
  modelOptions?: ModelOptions | null;
  /** When its runs compact; the defaults when absent or null, never with false. */
  compaction?: CompactionOption | null;
  /** The model client its runs call; the worker's `llm` when absent. */
  llm?: LlmClient;
  /** Where more of its tools come from (MCP servers): started with the worker, closed when it stops. */
  toolSources?: readonly ToolSource[];
  /** Its runs each have a workspace, rebuilt when claimed. */
  workspaces?: Workspaces;
}

/** What the database announces to a worker. */
export interface WorkerNotifications {
  /** A run was queued; also called after every (re)connect, since notifications sent meanwhile are lost. */
  runQueued(): void;
  /** A cancel was requested for this RUNNING run. */
  cancelRequested(runId: string): void;
  /** An event hub began to follow this run: its streamed text is written as it comes from now on. */
  runFollowed?(runId: string): void;
  /**
   * A shared text was deleted with the last step that referred to it (its digest), or, with null,
   * any may have been (a reconnect). The worker stores its own again: its steps keep referring to them.
   */
  blobDeleted?(digest: string | null): void;
}

export interface WorkerDeps {
  store: EngineStore;
  /** The model client of agents that have none of their own. */
  llm: LlmClient;
  /** The agents this worker serves (distinct names): it claims their runs only, and drives each with its own. */
  agents?: readonly AgentDefinition[];
  /** One agent: the same as `agents: [agent]`. */
  agent?: AgentDefinition;
  costOf: (model: string, usage: Usage) => number;
  logger: Logger;
  events?: EngineEvents[];
  /** Subscribes to notifications; without it the worker polls, and hears of cancels from its lease renewals. */
  subscribe?: (on: WorkerNotifications) => { close(): Promise<void> };
  /** Renews the leases of held runs; by default through `store`, on this thread (see lease-keeper.ts). */
  leaseKeeper?: LeaseKeeperFactory;
  /**
   * Owner liveness (store/liveness-session.ts): a dead worker's runs are taken over within about a
   * second instead of when their lease lapses. Without it the lease alone tells.
   */
  liveness?: OwnerLivenessFactory;
  now?: () => Date;
}

export class Worker {
  private readonly owner: LeaseOwner;
  private readonly events: Required<EngineEvents>;
  private readonly held = new Map<RunId, HeldRun>();
  /** The held runs' deadlines, on one timer. */
  private readonly deadlines = new Deadlines<HeldRun>(HeldRun.expire);
  private readonly now: () => Date;
  private readonly ends: AttemptEnds;
  private readonly definitions: ReadonlyMap<string, AgentDefinition>;
  private prepared: Map<string, PreparedAgent> | null = null;
  /** The agents as last prepared, kept when a change of their sources' tools drops `prepared`. */
  private lastPrepared: Map<string, PreparedAgent> | null = null;
  private preparing: Promise<Map<string, PreparedAgent>> | null = null;
  private sourcesStarted: Promise<void> | null = null;
  /** Counts changes of the sources' tools, so a preparation that raced one is not kept. */
  private toolChanges = 0;
  private keeper: LeaseKeeper | null = null;
  private stopping = false;
  /** Asked by each driver before each step (one function for all, not a closure a run). */
  private readonly shouldYield = () => this.stopping;
  private loopDone: Promise<void> | null = null;
  private wakeUp: (() => void) | null = null;
  /** Set by a wake that arrived while the loop was busy, so it is not lost. */
  private woken = false;
  /** False after a claim found fewer runs than it had room for (see loop). */
  private queueMayHaveMore = true;
  /** Settled when the liveness session is back (or lost for good): runs wait on it between steps meanwhile. */
  private liveAgain: { promise: Promise<void>; resolve: () => void } | null = null;
  private subscription: { close(): Promise<void> } | null = null;
  private readonly loopWatch: EventLoopWatch;
  private liveness: OwnerLiveness | null = null;
  /** Owner locks found orphaned: their runs are claimable now; cleared by the claim that reads them. */
  private orphaned: number[] = [];

  constructor(
    private readonly deps: WorkerDeps,
    private readonly opts: WorkerOptions,
  ) {
    this.owner = { worker: opts.name, leaseMs: opts.leaseMs };
    this.now = deps.now ?? (() => new Date());
    const definitions = deps.agents ?? (deps.agent ? [deps.agent] : []);
    this.definitions = new Map(definitions.map((a) => [a.name ?? DEMO_AGENT, a]));
    if (this.definitions.size === 0 || this.definitions.size !== definitions.length)
      throw new Error('a worker needs agents with distinct names');
    this.events = combineEvents(
      ...(deps.events ?? []),
      followSteps(
        this.held,
        (name, agent) => (this.lastPrepared?.get(agent)?.tools ?? this.definitions.get(agent)?.tools)?.isIdempotent(name) ?? true,
      ),
    );
    this.loopWatch = new EventLoopWatch(deps.logger, () => this.held.values(), { thresholdMs: opts.blockedLoopWarnMs ?? 1000 });
    this.ends = new AttemptEnds({
      store: deps.store,
      events: this.events,
      logger: deps.logger,
      owner: this.owner,
      maxRunAttempts: opts.maxRunAttempts,
      requeueDelayMs: opts.requeueDelayMs,
    });
  }

  get name(): string {
    return this.opts.name;
  }

  /** Runs being driven right now. */
  get activeRuns(): number {
    return this.held.size;
  }

  /**
   * The non-idempotent tool calls running now: `stop()` waits for each to end however long it takes
   * (its timeout bounds it), since one cut off would leave its run for a person to decide whether it
   * ran. Shutdown says so, so that a person pressing Ctrl-C knows what the process waits for.
   */
  unstoppableTools(): { runId: RunId; seq: number; tool: string; runningMs: number }[] {
    const now = performance.now();
    return [...this.held.values()].flatMap((h) =>
      h.tool && !h.tool.idempotent ? [{ runId: h.id, seq: h.tool.seq, tool: h.tool.tool, runningMs: now - h.tool.startedAt }] : [],
    );
  }

  /**
   * Stores each agent's prompt and tool texts once under their digests; steps then refer to them by
   * digest. An agent's tools include those its sources offer now; when those change, the next attempt
   * prepares again (a run already talking to the model keeps the definitions it started with).
   */
  private prepare(): Promise<Map<string, PreparedAgent>> {
    if (this.prepared) return Promise.resolve(this.prepared);
    return (this.preparing ??= this.prepareNow().finally(() => (this.preparing = null)));
  }

  private async prepareNow(): Promise<Map<string, PreparedAgent>> {
    const { store, logger } = this.deps;
    await this.startSources();
    const changes = this.toolChanges;
    const prepared = new Map<string, PreparedAgent>();
    for (const [name, agent] of this.definitions) {
      const tools = withSourceTools(agent.tools, agent.toolSources ?? [], (source, tool) =>
        logger.warn(
          { agent: name, tool_source: source, tool_name: tool },
          'a tool source offers a tool whose name is taken; it is left out',
        ),
      );
      const toolDefinitions = tools.definitions();
      prepared.set(name, {
        system: agent.system,
        systemDigest: agent.system ? await store.putBlob(agent.system) : null,
        tools: this.loopWatch.timeTools(tools),
        toolDefinitions,
        toolsDigest: toolDefinitions.length ? await store.putBlob(JSON.stringify(toolDefinitions)) : null,
        maxTokens: agent.maxTokens,
        modelOptions: agent.modelOptions ?? null,
        compaction: agent.compaction ?? null,
        ...(agent.workspaces && { workspaces: agent.workspaces }),
      });
    }
    this.lastPrepared = prepared;
    if (changes === this.toolChanges) this.prepared = prepared;
    return prepared;
  }

  private toolSources(): ToolSource[] {
    return [...this.definitions.values()].flatMap((a) => a.toolSources ?? []);
  }

  /** Starts the tool sources once (each resolves even when it cannot connect); a change of their tools re-prepares. */
  private startSources(): Promise<void> {
    return (this.sourcesStarted ??= (async () => {
      const sources = this.toolSources();
      for (const s of sources) {
        s.onChange(() => {
          this.toolChanges++;
          this.prepared = null;
        });
      }
      await Promise.all(sources.map((s) => s.start()));
    })());
  }

  /** Stores this worker's prompt and tool texts again if `digest` is one of theirs (null: all). */
  private restoreTexts(digest: string | null): void {
    for (const a of this.lastPrepared?.values() ?? []) {
      const texts: [string | null, string | null][] = [
        [a.systemDigest, a.system],
        [a.toolsDigest, a.toolDefinitions.length ? JSON.stringify(a.toolDefinitions) : null],
      ];
      for (const [d, text] of texts) {
        if (d === null || text === null || (digest !== null && digest !== d)) continue;
        this.deps.store
          .putBlob(text)
          .catch((e: Error) => this.deps.logger.warn({ err_message: e.message }, 'could not store the agent texts again'));
      }
    }
  }

  async start(): Promise<void> {
    await this.prepare();
    // The keeper is up before the first claim, so the first leases are renewed in time.
    await this.leases().ready;
    this.liveness =
      this.deps.liveness?.({
        orphaned: (locks) => {
          this.orphaned = locks;
          this.wake();
        },
        lost: () => this.livenessLost(),
        // Runs taken over meanwhile are stopped before the others take their next step.
        regained: () => void this.checkLeases().finally(() => this.resumeSteps()),
      }) ?? null;
    await this.liveness?.ready;
    this.subscription =
      this.deps.subscribe?.({
        runQueued: () => {
          this.queueMayHaveMore = true;
          this.wake();
        },
        cancelRequested: (runId) => this.deliverCancel(runId, 'notification'),
        runFollowed: (runId) => this.held.get(runId as RunId)?.follow(),
        blobDeleted: (digest) => this.restoreTexts(digest),
      }) ?? null;
    this.loopWatch.start();
    this.loopDone = this.loop();
  }

  /**
   * Stops claiming and waits up to the grace period for in-flight steps; then tells them to stop and
   * hands their runs back at the step boundary; past the force limit it stops waiting for steps that
   * ignore their signal (except a non-idempotent tool, which is always let finish).
   */
  async stop(): Promise<void> {
    this.stopping = true;
    this.wake();
    this.resumeSteps(); // runs paused for the liveness session hand themselves back
    await this.loopDone;
    if (!(await this.settledWithin(this.opts.shutdownGraceMs))) {
      for (const h of this.held.values()) h.stop(new AttemptHandedBack());
      if (!(await this.settledWithin(this.opts.shutdownForceMs ?? 10_000))) await this.cutIgnoringSteps();
    }
    this.loopWatch.stop();
    this.deadlines.close();
    // Cancels and lease renewals matter until the last run is settled, so these close last.
    await this.subscription?.close();
    await this.keeper?.close();
    this.keeper = null;
    await Promise.all(this.toolSources().map((s) => s.close()));
    // Last: until the runs are handed back, others must not take them over.
    await this.liveness?.close();
    this.liveness = null;
  }

  /** Claims one run and drives it to the end of this attempt, rethrowing what ended it (for tests and tools). */
  async runOnce(): Promise<{ runId: RunId; status: TerminalStatus | null } | null> {
    await this.prepare();
    const [run] = await this.deps.store.claim(this.owner, 1, [...this.held.keys()], [...this.definitions.keys()]);
    if (!run) return null;
    const h = this.track(run);
    const attempt = this.attempt(h, true);
    h.done = attempt.catch(() => undefined);
    return { runId: run.id, status: await attempt };
  }

  /** An attempt of the loop's ended: its slot is free for a run still queued. */
  private readonly attemptEnded = () => {
    if (this.queueMayHaveMore) this.wake();
  };

  private wake(): void {
    this.woken = true;
    this.wakeUp?.();
  }

  private async loop(): Promise<void> {
    while (!this.stopping) {
      this.woken = false;
      // While its own liveness lock is not held, a worker claims nothing: others would take it over.
      const ownerLock = this.liveness?.ownerLock() ?? null;
      const free = ownerLock === 'lost' ? 0 : this.opts.concurrency - this.held.size;
      let claimed = 0;
      const claimStarted = performance.now();
      if (free > 0) {
        try {
          const orphaned = this.orphaned;
          this.orphaned = [];
          const runs = await this.deps.store.claim(this.owner, free, [...this.held.keys()], [...this.definitions.keys()], {
            ownerLock: ownerLock === 'lost' ? null : ownerLock,
            orphaned,
          });
          if (orphaned.length && runs.length)
            this.deps.logger.info(
              { event: 'runs_taken_over', runs: runs.length, owner_locks: orphaned },
              'took over runs whose worker is gone',
            );
          claimed = runs.length;
          // A claim that left free slots found the queue empty: until a run is queued (NOTIFY) or the poll
          // interval passes, an attempt's end needs no claim — with thousands in flight, one per finished
          // run would each send every held id for nothing.
          this.queueMayHaveMore = runs.length === free || !this.subscription;
          for (const run of runs) {
            const h = this.track(run);
            h.done = this.attempt(h, false).then(this.attemptEnded, this.attemptEnded);
          }
        } catch (e) {
          this.deps.logger.error({ err: e }, 'claim failed; retrying after the poll interval');
        }
      }
      if ((claimed > 0 && claimed === free) || this.woken) continue; // there may be more waiting
      const waitMs = await this.untilNextDue(free > claimed, performance.now() - claimStarted);
      if (this.woken) continue;
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, waitMs);
        this.wakeUp = () => {
          clearTimeout(timer);
          resolve();
        };
      });
      this.wakeUp = null;
    }
  }

  /**
   * How long to sleep before claiming again: the poll interval, or less when a run becomes due sooner
   * (a timer, a delayed start). One timer per worker, not one per run; every NOTIFY of a new timer or
   * queued run wakes the loop, which asks again. `sinceClaimMs`: a run that came due after the claim
   * looked is due now, not at the next poll (measured: one timer in ~100 woke a poll interval late).
   */
  private async untilNextDue(hasRoom: boolean, sinceClaimMs: number): Promise<number> {
    if (!hasRoom || !this.deps.store.nextDueInMs) return this.opts.pollIntervalMs;
    try {
      // A little more than the elapsed time: the claim's now() was taken a moment after claimStarted.
      const due = await this.deps.store.nextDueInMs(Math.ceil(sinceClaimMs) + 5);
      return due === null ? this.opts.pollIntervalMs : Math.min(this.opts.pollIntervalMs, Math.ceil(due));
    } catch (e) {
      this.deps.logger.warn({ err_message: (e as Error).message }, 'could not read the next due time; polling');
      return this.opts.pollIntervalMs;
    }
  }

  private leases(): LeaseKeeper {
    const factory =
      this.deps.leaseKeeper ?? inProcessLeaseKeeper((owner, held, withinMs) => this.deps.store.renewLeases(owner, held, withinMs));
    return (this.keeper ??= factory(
      this.owner,
      Math.max(10, Math.min(this.opts.renewIntervalMs ?? Infinity, Math.floor(this.opts.leaseMs / 3))),
      {
        lost: ({ runId, token }) => {
          const h = this.held.get(runId);
          if (h?.run.lease.token === token) h.stop(new LeaseLostError(runId, this.owner.worker));
        },
        cancelRequested: (runId) => this.deliverCancel(runId, 'lease renewal'),
        followed: (runId) => this.held.get(runId)?.follow(),
        failed: (e) => this.deps.logger.warn({ err_message: e.message }, 'lease renewal failed; retrying at the next interval'),
      },
    ));
  }

  /** This worker's liveness lock is gone for good: others take its runs over, so it stops driving them. */
  private livenessLost(): void {
    for (const h of this.held.values()) h.stop(new LeaseLostError(h.id, this.owner.worker));
    this.resumeSteps(); // the paused ones see their signal and stop
  }

  /** Null while the liveness lock is held (or not used); else what a run waits on before its next step. */
  private readonly untilLive = (): Promise<void> | null => {
    if (this.liveness?.ownerLock() !== 'lost') return null;
    if (!this.liveAgain) {
      let resolve!: () => void;
      const promise = new Promise<void>((r) => (resolve = r));
      this.liveAgain = { promise, resolve };
    }
    return this.liveAgain.promise;
  };

  private resumeSteps(): void {
    this.liveAgain?.resolve();
    this.liveAgain = null;
  }

  /** After its liveness session came back: the runs taken over meanwhile stop at once (not at the next renewal). */
  private async checkLeases(): Promise<void> {
    const held = [...this.held.values()].map((h) => ({ runId: h.id, token: h.run.lease.token }));
    try {
      const renewed = new Set((await this.deps.store.renewLeases(this.owner, held)).map((r) => `${r.runId} ${r.token}`));
      for (const l of held) {
        const h = this.held.get(l.runId);
        if (!renewed.has(`${l.runId} ${l.token}`) && h?.run.lease.token === l.token) h.stop(new LeaseLostError(l.runId, this.owner.worker));
      }
    } catch (e) {
      this.deps.logger.warn({ err_message: (e as Error).message }, 'could not check the leases after the liveness session came back');
    }
  }

  private track(run: ClaimedRun): HeldRun {
    const h = new HeldRun(run);
    this.held.set(run.id, h);
    this.deadlines.add(h, run.deadlineAt.getTime() - this.now().getTime());
    this.leases().hold({ runId: run.id, token: run.lease.token });
    return h;
  }

  private forget(h: HeldRun): void {
    this.deadlines.remove(h);
    if (this.held.get(h.id) !== h) return;
    this.held.delete(h.id);
    this.keeper?.drop(h.id);
  }

  private deliverCancel(runId: string, via: string): void {
    if (this.held.get(runId as RunId)?.stop(new CancelSignal())) {
      this.deps.logger.info(
        { run_id: runId, worker: this.owner.worker, event: 'cancel_delivered', via },
        'cancel delivered to the step in flight',
      );
    }
  }

  /**
   * One attempt at one held run. Returns the terminal status, or null when the run went back to the
   * queue. Not an async function: while the run is driven, which is most of its life, only a reaction
   * on its driver's promise waits here, not a suspended frame (one per run held, thousands of them).
   */
  private attempt(h: HeldRun, rethrow: boolean): Promise<TerminalStatus | null> {
    const { prepared } = this;
    const driving = promised(() => {
      if (h.run.attempts > this.opts.maxRunAttempts) return this.ends.abandon(h);
      return prepared ? this.driveHeld(h, prepared) : this.prepare().then((agents) => this.driveHeld(h, agents));
    });
    return driving.then(
      (status) => {
        this.forget(h);
        return status;
      },
      (e: unknown) => this.attemptFailed(h, e, rethrow),
    );
  }

  private driveHeld(h: HeldRun, agents: ReadonlyMap<string, PreparedAgent>): Promise<TerminalStatus> {
    const { run } = h;
    // The claim took only runs of this worker's agents.
    const agent = agents.get(run.agent);
    if (!agent) throw new Error(`run ${run.id} is a run of agent "${run.agent}", which this worker does not serve`);
    return drive(run, {
      store: retryingWrites(this.deps.store, h.signal),
      llm: this.definitions.get(run.agent)!.llm ?? this.deps.llm,
      agent,
      owner: run.lease,
      events: this.events,
      costOf: this.deps.costOf,
      now: this.now,
      signal: h.signal,
      shouldYield: this.shouldYield,
      untilLive: this.untilLive,
      followers: h, // its own Followers
      cutOff: h,
    });
  }

  private async attemptFailed(h: HeldRun, e: unknown, rethrow: boolean): Promise<TerminalStatus | null> {
    try {
      if (h.cut) return null; // already handed back at the force limit
      return await this.ends.settle(h, e, rethrow);
    } finally {
      this.forget(h);
    }
  }

  /** True when every held run's attempt settled within `ms`. */
  private async settledWithin(ms: number): Promise<boolean> {
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<false>((resolve) => (timer = setTimeout(() => resolve(false), ms)));
    const all = Promise.all([...this.held.values()].map((h) => h.done)).then(() => true);
    try {
      return await Promise.race([all, timeout]);
    } finally {
      clearTimeout(timer);
    }
  }

  /**
   * Past the force limit: runs whose step ignores its signal are handed back without waiting for it
   * (whatever that step writes later is fenced off). A non-idempotent tool is still waited for: cut
   * off, it would leave its run for a human to decide whether it ran.
   */
  private async cutIgnoringSteps(): Promise<void> {
    const waits: Promise<unknown>[] = [];
    for (const h of [...this.held.values()]) {
      if (h.tool && !h.tool.idempotent) {
        waits.push(h.done);
        continue;
      }
      h.cut = true;
      this.forget(h);
      this.deps.logger.warn(
        { run_id: h.id, worker: this.owner.worker, step_seq: h.tool?.seq, tool_name: h.tool?.tool },
        'a step ignored its stop signal past the shutdown force limit; its run is handed back without it',
      );
      waits.push(this.ends.handBack(h));
    }
    await Promise.all(waits);
  }
}
