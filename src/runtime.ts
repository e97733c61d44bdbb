/**
 * Wires configuration into running parts: database (embedded or DATABASE_URL) → migrations → store →
 * model client → worker and/or HTTP API, with logs, metrics and traces attached. `serve`, `worker`
 * and library users all start here.
 */
import http from 'node:http';
import type { FastifyInstance } from 'fastify';
import { createServer } from './api/server.ts';
import type { Config } from './config.ts';
import { ConfigError } from './errors.ts';
import { migrate } from './db/migrate.ts';
import { listenForWorker } from './db/notifications.ts';
import { checkConnection, createPool, type Database, poolSizeFor, resolveDatabase } from './db/pool.ts';
import { Worker } from './engine/worker.ts';
import { createLlmClient, loadPrices, retryReason } from './llm/index.ts';
import type { LlmClient } from './llm/types.ts';
import { logEvents } from './observability/log-events.ts';
import { createLogger, type Logger } from './observability/logger.ts';
import { createMetrics, type Metrics } from './observability/metrics.ts';
import { traceEvents } from './observability/tracing.ts';
import { TicketStore } from './store/demo-tickets.ts';
import { leaseKeeperThread } from './store/lease-keeper-thread.ts';
import { RunListing } from './store/run-listing.ts';
import { RunStore } from './store/run-store.ts';
import { countRunsByStatus, queueDepth } from './store/run-stats.ts';
import { DEFAULT_SYSTEM_PROMPT, demoTools } from './tools/demo-tools.ts';
import { ToolExecutor } from './tools/executor.ts';
import type { Tool } from './tools/types.ts';

export interface AgentOptions {
  /** The system prompt; defaults to the built-in support assistant's. */
  system?: string | null;
  /** The tools the model may call; defaults to the built-in demo ticket tools. */
  tools?: Tool[];
}

export interface RuntimeOptions {
  api: boolean;
  worker: boolean;
  agent?: AgentOptions;
  /** A model client to use instead of the configured provider (tests, custom providers). */
  llm?: LlmClient;
  logger?: Logger;
}

export interface Runtime {
  config: Readonly<Config>;
  database: Database;
  store: RunStore;
  llm: LlmClient;
  logger: Logger;
  metrics: Metrics;
  worker: Worker | null;
  server: FastifyInstance | null;
  /** `http://host:port` of the API (or of the metrics endpoint of a worker-only process). */
  url: string | null;
  /** Stops claiming, hands runs back, closes the API and the database pool. Safe to call twice. */
  close(): Promise<void>;
}

function metricsServer(metrics: Metrics, host: string, port: number): Promise<http.Server> {
  const server = http.createServer((req, res) => {
    if (req.method === 'GET' && req.url?.split('?')[0] === '/metrics') {
      metrics.render().then(
        ({ contentType, body }) => res.writeHead(200, { 'content-type': contentType }).end(body),
        () => res.writeHead(500).end(),
      );
    } else {
      res.writeHead(404, { 'content-type': 'application/json' }).end('{"error":{"code":"not_found","message":"only /metrics here"}}');
    }
  });
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => resolve(server));
  });
}

export async function startRuntime(config: Readonly<Config>, opts: RuntimeOptions): Promise<Runtime> {
  const logger = opts.logger ?? createLogger({ level: config.logLevel, format: config.logFormat });
  const database = await resolveDatabase(config);
  const pool = createPool(database.url, poolSizeFor(opts.worker ? config.workerConcurrency : 0) + (opts.api ? 6 : 0));
  let worker: Worker | null = null;
  let server: FastifyInstance | null = null;
  let plainMetrics: http.Server | null = null;
  let closing: Promise<void> | null = null;
  const close = () =>
    (closing ??= (async () => {
      await server?.close();
      await new Promise((r) => (plainMetrics ? plainMetrics.close(r) : r(undefined)));
      await worker?.stop();
      await pool.end();
      await database.release().catch(() => {});
      logger.flush?.();
    })());

  try {
    await checkConnection(pool, database);
    await migrate(pool);
    const store = new RunStore(pool);
    const metrics = createMetrics({ countRunsByStatus: () => countRunsByStatus(pool), queueDepth: () => queueDepth(pool) });
    const prices = loadPrices(config.pricesFile, (message) => logger.warn(message));
    const llm =
      opts.llm ??
      createLlmClient(config, {
        onRetry: (error, attempt, waitMs) => {
          metrics.onLlmRetry(retryReason(error));
          logger.warn({ attempt, wait_ms: waitMs, status: error.status, request_id: error.requestId, err_message: error.message }, 'model call retried');
        },
      });

    let url: string | null = null;
    // Listen before the worker claims anything: a port already taken must fail before runs are held.
    if (opts.api) {
      server = createServer({
        store,
        listing: new RunListing(pool),
        defaults: {
          model: config.defaultModel,
          tokenBudget: config.defaultTokenBudget,
          timeoutSeconds: config.defaultTimeoutSeconds,
          maxSteps: config.maxSteps,
        },
        checkDatabase: async () => {
          await pool.query('SELECT 1');
        },
        metrics: () => metrics.render(),
        logger,
      });
      url = await server.listen({ host: config.host, port: config.port }).catch((e: NodeJS.ErrnoException) => {
        if (e.code !== 'EADDRINUSE' && e.code !== 'EACCES') throw e;
        throw new ConfigError(`cannot listen on ${config.host}:${config.port} (${e.code === 'EADDRINUSE' ? 'in use' : 'not allowed'}); set PORT or --port`);
      });
    } else if (config.metricsPort !== null) {
      plainMetrics = await metricsServer(metrics, config.host, config.metricsPort);
      const addr = plainMetrics.address() as { port: number };
      url = `http://${config.host}:${addr.port}`;
    }

    if (opts.worker) {
      const tools = opts.agent?.tools ?? demoTools(new TicketStore(pool));
      worker = new Worker(
        {
          store,
          llm,
          agent: {
            system: opts.agent?.system === undefined ? DEFAULT_SYSTEM_PROMPT : opts.agent.system,
            tools: new ToolExecutor(tools, config.toolTimeoutMs),
            maxTokens: config.maxTokens,
          },
          costOf: (model, usage) => prices.costOf(model, usage),
          logger,
          events: [logEvents(logger), metrics.events, traceEvents({ provider: llm.provider })],
          subscribe: (on) =>
            listenForWorker(database.url, on, (e, retryInMs) =>
              logger.warn({ err_message: e.message, retry_in_ms: retryInMs }, 'LISTEN connection failed; reconnecting'),
            ),
          leaseKeeper: leaseKeeperThread(database.url),
        },
        {
          name: config.workerName,
          concurrency: config.workerConcurrency,
          leaseMs: config.leaseMs,
          maxRunAttempts: config.maxRunAttempts,
          pollIntervalMs: config.pollIntervalMs,
          shutdownGraceMs: config.shutdownGraceMs,
          shutdownForceMs: config.shutdownForceMs,
          requeueDelayMs: config.retryCapMs,
        },
      );
      await worker.start();
    }
    return { config, database, store, llm, logger, metrics, worker, server, url, close };
  } catch (e) {
    await close().catch(() => {});
    throw e;
  }
}
