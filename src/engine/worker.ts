/**
 * The worker: claims runs (up to `concurrency` at once), drives each, keeps their leases alive with a
 * fenced heartbeat, wakes on LISTEN/NOTIFY (polling only as a fallback), and on shutdown stops
 * claiming, lets in-flight steps finish for a grace period and hands every run back to the queue.
 */
import type { RunId, TerminalStatus, Usage } from '../domain.ts';
import { FatalError, LeaseLostError } from '../errors.ts';
import type { LlmClient } from '../llm/types.ts';
import type { Logger } from '../observability/logger.ts';
import type { ClaimedRun, EngineStore, LeaseOwner } from '../store/ports.ts';
import type { ToolExecutor } from '../tools/executor.ts';
import { drive, HandBackSignal, type PreparedAgent, RequeueSignal } from './driver.ts';
import { combineEvents, type EngineEvents } from './events.ts';

export interface WorkerOptions {
  name: string;
  concurrency: number;
  leaseMs: number;
  /** Claims a run may take without finishing before it is failed as abandoned (a poison run). */
  maxRunAttempts: number;
  pollIntervalMs: number;
  /** How long shutdown waits for in-flight steps before cancelling them. */
  shutdownGraceMs: number;
  /** How long a run waits in the queue after its model provider kept failing (at least its retry-after). */
  requeueDelayMs: number;
}

export interface AgentDefinition {
  system: string | null;
  tools: ToolExecutor;
  maxTokens: number;
}

export interface WorkerDeps {
  store: EngineStore;
  llm: LlmClient;
  agent: AgentDefinition;
  costOf: (model: string, usage: Usage) => number;
  logger: Logger;
  events?: EngineEvents[];
  /** Subscribes to "a run was queued" notifications; without it the worker polls. */
  subscribe?: (onNotify: () => void) => { close(): Promise<void> };
  now?: () => Date;
}

interface Held {
  run: ClaimedRun;
  controller: AbortController;
  done: Promise<void>;
}

export class Worker {
  private readonly owner: LeaseOwner;
  private readonly events: Required<EngineEvents>;
  private readonly held = new Map<RunId, Held>();
  private agent: PreparedAgent | null = null;
  private stopping = false;
  private loopDone: Promise<void> | null = null;
  private wakeUp: (() => void) | null = null;
  /** Set by a wake that arrived while the loop was busy, so it is not lost. */
  private woken = false;
  private subscription: { close(): Promise<void> } | null = null;

  constructor(private readonly deps: WorkerDeps, private readonly opts: WorkerOptions) {
    this.owner = { worker: opts.name, leaseMs: opts.leaseMs };
    this.events = combineEvents(...(deps.events ?? []));
  }

  get name(): string {
    return this.opts.name;
  }

  /** Runs being driven right now. */
  get activeRuns(): number {
    return this.held.size;
  }

  /** Stores the prompt and tool texts once under their digests; steps then refer to them by digest. */
  private async prepare(): Promise<PreparedAgent> {
    if (this.agent) return this.agent;
    const { store, agent } = this.deps;
    const toolDefinitions = agent.tools.definitions();
    this.agent = {
      system: agent.system,
      systemDigest: agent.system ? await store.putBlob(agent.system) : null,
      tools: agent.tools,
      toolDefinitions,
      toolsDigest: toolDefinitions.length ? await store.putBlob(JSON.stringify(toolDefinitions)) : null,
      maxTokens: agent.maxTokens,
    };
    return this.agent;
  }

  async start(): Promise<void> {
    await this.prepare();
    this.subscription = this.deps.subscribe?.(() => this.wake()) ?? null;
    this.loopDone = this.loop();
  }

  /** Stops claiming, waits up to the grace period for in-flight steps, then hands every held run back. */
  async stop(): Promise<void> {
    this.stopping = true;
    this.wake();
    await this.loopDone;
    await this.subscription?.close();
    const all = () => Promise.all([...this.held.values()].map((h) => h.done));
    let timer: NodeJS.Timeout | undefined;
    const grace = new Promise<'timeout'>((r) => (timer = setTimeout(() => r('timeout'), this.opts.shutdownGraceMs)));
    if ((await Promise.race([all(), grace])) === 'timeout') {
      for (const h of this.held.values()) h.controller.abort(new HandBackSignal());
      await all();
    }
    clearTimeout(timer);
  }

  /** Claims one run and drives it to the end of this attempt, rethrowing what ended it (for tests and tools). */
  async runOnce(): Promise<{ runId: RunId; status: TerminalStatus | null } | null> {
    await this.prepare();
    const [run] = await this.deps.store.claim(this.owner, 1, [...this.held.keys()]);
    if (!run) return null;
    return { runId: run.id, status: await this.hold(run, true) };
  }

  private wake(): void {
    this.woken = true;
    this.wakeUp?.();
  }

  private async loop(): Promise<void> {
    while (!this.stopping) {
      this.woken = false;
      const free = this.opts.concurrency - this.held.size;
      let claimed = 0;
      if (free > 0) {
        try {
          const runs = await this.deps.store.claim(this.owner, free, [...this.held.keys()]);
          claimed = runs.length;
          for (const run of runs) {
            const controller = new AbortController();
            const h: Held = { run, controller, done: Promise.resolve() };
            this.held.set(run.id, h);
            h.done = this.hold(run, false, controller)
              .then(() => undefined, () => undefined)
              .finally(() => {
                if (this.held.get(run.id) === h) this.held.delete(run.id);
                this.wake();
              });
          }
        } catch (e) {
          this.deps.logger.error({ err: e }, 'claim failed; retrying after the poll interval');
        }
      }
      if ((claimed > 0 && claimed === free) || this.woken) continue; // there may be more waiting
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, this.opts.pollIntervalMs);
        this.wakeUp = () => {
          clearTimeout(timer);
          resolve();
        };
      });
      this.wakeUp = null;
    }
  }

  /** One attempt at one run, with its heartbeat. Returns the terminal status, or null when handed back. */
  private async hold(run: ClaimedRun, rethrow: boolean, controller = new AbortController()): Promise<TerminalStatus | null> {
    const { store, logger } = this.deps;
    let finished = false;
    const heartbeat = setInterval(() => {
      store.renewLease(run.id, run.lease).catch((e: unknown) => {
        if (finished) return;
        if (e instanceof LeaseLostError) controller.abort(e);
        else logger.warn({ err: e, run_id: run.id }, 'lease renewal failed');
      });
    }, Math.max(10, Math.floor(this.opts.leaseMs / 3)));
    try {
      if (run.attempts > this.opts.maxRunAttempts) {
        const last = run.error ? `; last error: ${run.error}` : '';
        const error = `abandoned: claimed ${run.attempts - 1} times without finishing (limit ${this.opts.maxRunAttempts})${last}`;
        await store.finish(run.id, run.lease, { status: 'FAILED', error });
        this.events.runFinished({ run, status: 'FAILED', error, tokensUsed: run.tokensUsed });
        return 'FAILED';
      }
      return await drive(run, {
        store,
        llm: this.deps.llm,
        agent: await this.prepare(),
        owner: run.lease,
        events: this.events,
        costOf: this.deps.costOf,
        now: this.deps.now ?? (() => new Date()),
        signal: controller.signal,
        shouldYield: () => this.stopping,
      });
    } catch (e) {
      const reason = controller.signal.aborted ? controller.signal.reason : e;
      if (reason instanceof HandBackSignal) {
        if (await store.release(run.id, run.lease).catch(() => false)) {
          this.events.attemptEnded({ runId: run.id, worker: this.owner.worker, reason: 'handed-back' });
        }
        return null;
      }
      if (reason instanceof RequeueSignal) {
        const delayMs = Math.max(this.opts.requeueDelayMs, reason.retryAfterMs ?? 0);
        if (await store.release(run.id, run.lease, { countAttempt: true, delayMs, error: reason.message }).catch(() => false)) {
          this.events.attemptEnded({ runId: run.id, worker: this.owner.worker, reason: 'requeued', error: reason });
        }
        return null;
      }
      if (reason instanceof LeaseLostError) {
        this.events.leaseLost({ runId: run.id, worker: this.owner.worker });
      } else {
        const database = !(e instanceof FatalError) && typeof (e as { code?: unknown })?.code === 'string';
        this.events.attemptEnded({ runId: run.id, worker: this.owner.worker, reason: database ? 'database' : 'crash', error: e });
      }
      if (rethrow) throw e;
      return null;
    } finally {
      finished = true;
      clearInterval(heartbeat);
    }
  }
}
