import { waitFor } from './wait-for.ts';
import { listenForWorker } from '../../src/db/notifications.ts';
import { FatalError } from '../../src/domain/errors.ts';
import { Worker, type WorkerNotifications, type WorkerOptions } from '../../src/engine/worker.ts';
import type { LlmClient } from '../../src/llm/types.ts';
import { createLogger, type Logger } from '../../src/observability/logger.ts';
import { leaseKeeperThread } from '../../src/leases/lease-keeper-thread.ts';
import { livenessSession } from '../../src/leases/liveness-session.ts';
import type { EngineStore, LeaseKeeperFactory, ModelCheckpoint, OwnerLivenessFactory } from '../../src/ports/engine-store.ts';
import type { RunRecords } from '../../src/store/run-records.ts';
import { ToolExecutor } from '../../src/tools/executor.ts';
import { defineTool, type Tool } from '../../src/tools/types.ts';
import type { EngineEvents } from '../../src/ports/engine-events.ts';
import type { ContentBlock, Usage } from '../../src/domain/types.ts';

/** A crash: escapes the tool executor and the driver, as an unexpected error would. */
export class SimulatedCrash extends FatalError {}

export const silentLogger = createLogger({ level: 'silent' });

export function testWorker(
  store: EngineStore,
  llm: LlmClient,
  tools: Tool[],
  opts: Partial<WorkerOptions> & {
    name: string;
    /** The agent it serves (its runs only); "demo", the agent of runs that name none, when absent. */
    agent?: string;
    /** Its system prompt; "You are a test agent." when absent. */
    system?: string;
    events?: EngineEvents[];
    toolTimeoutMs?: number;
    /** Idempotent calls of one turn that run at once (TOOL_CONCURRENCY); the executor's default when absent. */
    toolConcurrency?: number;
    /** LISTEN/NOTIFY on this database: wakes on queued runs, hears cancels. */
    subscribeUrl?: string;
    /** Wired as the runtime wires a worker: LISTEN/NOTIFY, the lease keeper thread and owner liveness on this database. */
    databaseUrl?: string;
    /** Owner liveness; with `databaseUrl`, a session lock on it unless this is false. */
    liveness?: OwnerLivenessFactory | false;
    leaseKeeper?: LeaseKeeperFactory;
    logger?: Logger;
    /** Prices model calls; every call is free when absent. */
    costOf?: (model: string, usage: Usage) => number;
    /** The clock the guard reads (deadlines); the real one when absent. */
    now?: () => Date;
  },
): Worker {
  const listenUrl = opts.subscribeUrl ?? opts.databaseUrl;
  const leaseKeeper = opts.leaseKeeper ?? (opts.databaseUrl ? leaseKeeperThread(opts.databaseUrl) : undefined);
  const liveness =
    opts.liveness === false ? undefined : (opts.liveness ?? (opts.databaseUrl ? livenessSession(opts.databaseUrl) : undefined));
  return new Worker(
    {
      store,
      llm,
      agent: {
        ...(opts.agent ? { name: opts.agent } : {}),
        system: opts.system ?? 'You are a test agent.',
        tools: new ToolExecutor(tools, opts.toolTimeoutMs ?? 10_000, undefined, {
          ...(opts.toolConcurrency ? { concurrency: opts.toolConcurrency } : {}),
          ...(opts.logger ? { logger: opts.logger } : {}),
        }),
        maxTokens: 1024,
      },
      costOf: opts.costOf ?? (() => 0),
      logger: opts.logger ?? silentLogger,
      events: opts.events ?? [],
      ...(opts.now ? { now: opts.now } : {}),
      ...(listenUrl ? { subscribe: (on: WorkerNotifications) => listenForWorker(listenUrl, on, () => {}) } : {}),
      ...(leaseKeeper ? { leaseKeeper } : {}),
      ...(liveness ? { liveness } : {}),
    },
    {
      name: opts.name,
      concurrency: opts.concurrency ?? 4,
      leaseMs: opts.leaseMs ?? 30_000,
      maxRunAttempts: opts.maxRunAttempts ?? 5,
      pollIntervalMs: opts.pollIntervalMs ?? 100,
      shutdownGraceMs: opts.shutdownGraceMs ?? 5_000,
      shutdownForceMs: opts.shutdownForceMs ?? 5_000,
      requeueDelayMs: opts.requeueDelayMs ?? 50,
    },
  );
}

export function newRun(records: Pick<RunRecords, 'create'>, input = 'find x', extra: Partial<Parameters<RunRecords['create']>[0]> = {}) {
  return records.create({ input, model: 'test-model', tokenBudget: 10_000, timeoutSeconds: 300, maxSteps: 50, ...extra });
}

/** Makes the run's lease lapse now, as if its worker had died LEASE_SECONDS ago. */
export async function expireLease(pool: import('pg').Pool, runId: string): Promise<void> {
  await pool.query(`UPDATE durable_agent.run SET locked_until = now() - interval '1 second' WHERE id = $1`, [runId]);
}

export { waitFor };

/** Until a worker's LISTEN connection (the one that hears of cancels and new runs) is up on `pool`'s database. */
export function workerListening(pool: import('pg').Pool): Promise<boolean> {
  return waitFor(
    "the worker's LISTEN connection",
    async () =>
      (
        await pool.query(
          `SELECT 1 FROM pg_stat_activity WHERE datname = current_database() AND application_name = 'durable-agent-listener' AND query LIKE 'LISTEN %run_cancel%'`,
        )
      ).rowCount! > 0,
    5_000,
  );
}

/** A model step's checkpoint as a store test writes it: `content` answered at `seq`, one token in and out, free. */
export function modelCheckpoint(seq: number, content: ContentBlock[], more: Partial<ModelCheckpoint> = {}): ModelCheckpoint {
  return {
    seq,
    request: { model: 'm', maxTokens: 10, systemDigest: null, toolsDigest: null },
    content,
    stopReason: content.some((b) => b.type === 'tool_use') ? 'tool_use' : 'end_turn',
    usage: { inputTokens: 1, outputTokens: 1, cacheCreationInputTokens: 0, cacheReadInputTokens: 0 },
    budgetTokens: 2,
    attempts: 1,
    costUsd: 0,
    latencyMs: 0,
    ...more,
  };
}

/** A tool whose calls work until the test lets them end (`release`); `started()` says whether one began. */
export function heldTool(name = 'work'): { tool: Tool; started: () => boolean; release: () => void } {
  let release!: () => void;
  const mayEnd = new Promise<void>((r) => (release = r));
  let started = false;
  const tool = defineTool({
    name,
    description: 'works until the test lets it end',
    inputSchema: { type: 'object' },
    async execute() {
      started = true;
      await mayEnd;
      return 'worked';
    },
  });
  return { tool, started: () => started, release };
}
