/**
 * Wires configuration into running parts: database (embedded or DATABASE_URL) → migrations → store →
 * model client → worker and/or HTTP API, with logs, metrics and traces attached. `serve`, `worker`
 * and library users all start here.
 */
import http from 'node:http';
import type { FastifyInstance } from 'fastify';
import { type AuthenticateHook, authFor, type Authenticator } from '../api/auth.ts';
import { loadDashboard } from '../api/dashboard.ts';
import { type AgentDefaults, modelOptionsProblem, type RunDefaults } from '../runs/new-run.ts';
import type { Config } from '../config/environment.ts';
import { ConfigError, UnauthorizedError } from '../domain/errors.ts';
import { migrate, MIGRATIONS_DIR } from '../db/migrate.ts';
import { DEMO_MIGRATIONS_DIR } from '../demo/migrations-dir.ts';
import { listenForWorker, POLL_WITHOUT_LISTEN_MS } from '../db/notifications.ts';
import { type ConnectionBudget, connectionBudget } from './connection-budget.ts';
import { checkConnection, createPool, type Database, resolveDatabase } from '../db/pool.ts';
import { armCrashPoint } from '../engine/crash-points.ts';
import type { EngineEvents } from '../ports/engine-events.ts';
import { Worker } from '../engine/worker.ts';
import { createLlmClient, loadPrices, retryReason } from '../llm/index.ts';
import type { LlmClient, ModelOptions } from '../llm/types.ts';
import type { CompactionOption } from '../core/compaction.ts';
import { logEvents } from '../observability/log-events.ts';
import { createLogger, type Logger } from '../observability/logger.ts';
import type { Metrics } from '../observability/metrics.ts';
import { noRedaction, redactor } from '../core/redact.ts';
import { startRetention, type RetentionSweeper } from './retention-sweeper.ts';
import { ApiKeys } from '../store/api-keys.ts';
import { ReaderAccess } from '../store/reader-access.ts';
import { RunDeletion } from '../store/retention.ts';
import { EventHub } from '../api/event-hub.ts';
import { RunEvents } from '../store/run-events.ts';
import { traceEvents } from '../observability/tracing.ts';
import { RunWaits } from '../runs/run-waits.ts';
import { createRuns, type Runs } from '../runs/runs.ts';
import { TicketStore } from '../demo/tickets-store.ts';
import { leaseKeeperThread } from '../leases/lease-keeper-thread.ts';
import { leaseOnlyLiveness, livenessSession } from '../leases/liveness-session.ts';
import { RunListing } from '../store/run-listing.ts';
import { Sealer } from '../store/encryption.ts';
import { EncryptionKeys } from '../store/encryption-keys.ts';
import { RunOverview } from '../store/run-overview.ts';
import { RunStore } from '../store/run-store.ts';
import { RunRecords } from '../store/run-records.ts';
import { RunStats } from '../store/run-stats.ts';
import { DEFAULT_SYSTEM_PROMPT, demoTools } from '../demo/demo-tools.ts';
import { ToolExecutor } from '../tools/executor.ts';
import { WorkspaceFiles } from '../store/workspace-files.ts';
import type { WorkspaceSettings } from '../workspace/options.ts';
import { startBlobSweep, workspaceAgent } from './workspace-agent.ts';
import { Schedules } from '../store/schedules.ts';
import { createSchedules, type SchedulesApi } from '../runs/schedules.ts';
import { type Scheduler, startScheduler } from './scheduler.ts';
import { type ScheduleDefinition, syncDeclaredSchedules } from './declared-schedules.ts';
import type { McpServer } from '../tools/mcp-config.ts';
import { mcpToolSources } from '../tools/mcp-source.ts';
import type { Tool } from '../tools/types.ts';
import { DEMO_AGENT } from '../domain/types.ts';

export { DEMO_AGENT };

export interface AgentOptions {
  /** The name runs are created under; defaults to "demo". */
  name?: string;
  /** The system prompt; defaults to the built-in support assistant's. */
  system?: string | null;
  /** The tools the model may call; defaults to the built-in demo ticket tools. */
  tools?: readonly Tool[];
  /** The model runs call when they name none; defaults to DEFAULT_MODEL. */
  model?: string | null;
  /** `max_tokens` of each model call; defaults to MAX_TOKENS. */
  maxTokens?: number | null;
  /** How the model is asked to answer (checked by defineAgent); each run's own go over these. */
  modelOptions?: ModelOptions | null;
  /** When long runs compact (checked by defineAgent); the defaults when absent, never with false. */
  compaction?: CompactionOption | null;
  /** The model client its runs call; defaults to the configured provider. */
  llm?: LlmClient | null;
  /** The version label recorded with each run created for it. */
  version?: string | null;
  /** MCP servers whose tools it takes besides `tools` (checked by defineAgent); the worker connects to them. */
  mcpServers?: readonly McpServer[];
  /** A workspace per run (checked by defineAgent), with its built-in tools. */
  workspace?: WorkspaceSettings | null;
}

export interface RuntimeOptions {
  api: boolean;
  worker: boolean;
  /**
   * The agents served (distinct names; the first is the default of a run that names none). A worker
   * claims only their runs. Absent: `agent`, or else the built-in demo agent.
   */
  agents?: readonly AgentOptions[];
  /** One agent: the same as `agents: [agent]`. */
  agent?: AgentOptions;
  /** A model client to use instead of the configured provider (tests, custom providers). */
  llm?: LlmClient;
  /** Where the runtime logs; every line written while a run is driven gets its run_id, step_seq and worker. */
  logger?: Logger;
  /** Listeners of the engine's events, besides the logs, metrics and traces. */
  events?: EngineEvents[];
  /** Authenticates API requests instead of the API keys of the database: the caller's tenant, or null (401). */
  authenticate?: AuthenticateHook;
  /** Schedules declared in code (defineSchedule): made or changed to match at start; see declared-schedules.ts. */
  schedules?: readonly ScheduleDefinition[];
}

export interface Runtime {
  config: Readonly<Config>;
  database: Database;
  /** The connections this process may open, by kind. */
  connections: ConnectionBudget;
  /** The engine's store (claims, checkpoints, leases). */
  store: RunStore;
  /** What people and the API ask of runs (create, read, cancel, decide). */
  records: RunRecords;
  llm: LlmClient;
  logger: Logger;
  /** The Prometheus metrics, kept only where they are served: by the API, or on METRICS_PORT. */
  metrics: Metrics | null;
  worker: Worker | null;
  server: FastifyInstance | null;
  /** Create, read, list, cancel and wait for runs, with the rules of the HTTP API. */
  runs: Runs;
  /** Make, read, change, delete, trigger and backfill schedules, with the rules of the HTTP API. */
  schedules: SchedulesApi;
  /** `http://host:port` of the API (or of the metrics endpoint of a worker-only process). */
  url: string | null;
  /** How API requests are authenticated. */
  auth: Authenticator;
  /** Stops claiming, hands runs back, closes the API and the database pool. Safe to call twice. */
  close(): Promise<void>;
}

function metricsServer(metrics: Metrics, auth: Authenticator, host: string, port: number): Promise<http.Server> {
  const server = http.createServer((req, res) => {
    if (req.method === 'GET' && req.url?.split('?')[0] === '/metrics') {
      // The same rule as the API's /metrics: a key when keys are required.
      auth
        .authenticate(req)
        .then(() => metrics.render())
        .then(
          ({ contentType, body }) => res.writeHead(200, { 'content-type': contentType }).end(body),
          (e: Error) => {
            if (!(e instanceof UnauthorizedError)) return res.writeHead(500).end();
            res.writeHead(401, { 'content-type': 'application/json', 'www-authenticate': 'Bearer realm="durable-agent"' });
            res.end(JSON.stringify({ error: { code: 'unauthorized', message: e.message } }));
          },
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

/** Said once at start: what a transaction pooler changes, and what is slower without a session to hold. */
function warnOfPooler(database: Database, logger: Logger): void {
  if (database.sessionUrl !== null) {
    logger.info(
      'DATABASE_URL goes through a pooler in transaction mode: no statement is prepared by name; LISTEN and the liveness lock use DATABASE_DIRECT_URL',
    );
    return;
  }
  logger.warn(
    `DATABASE_URL goes through a pooler in transaction mode and DATABASE_DIRECT_URL is unset, so nothing can LISTEN or hold a session lock: wake-ups, cancels and live events are looked for every ${POLL_WITHOUT_LISTEN_MS / 1000} s instead of announced, and a dead worker's runs are taken over when their lease lapses (LEASE_SECONDS) instead of within about a second. Set DATABASE_DIRECT_URL to a direct connection to the same database for both`,
  );
}

export async function startRuntime(config: Readonly<Config>, opts: RuntimeOptions): Promise<Runtime> {
  const redact = config.redact ? redactor(config.redact) : noRedaction;
  const logger = opts.logger ?? createLogger({ level: config.logLevel, format: config.logFormat, redact });
  const database = await resolveDatabase(config);
  const connections = connectionBudget(config, database, opts);
  const pool = createPool(database.url, connections.pool, { prepared: !database.transactionPooler });
  const batches = connections.batches > 0 ? createPool(database.url, connections.batches, { genericPlans: true }) : null;
  // No session to LISTEN on or to hold a lock with: what notifications would bring is looked for every second.
  const session = database.sessionUrl;
  // Every part that issues SQL names its tables in this schema (db/schema.ts).
  const schema = config.databaseSchema;
  let worker: Worker | null = null;
  let server: FastifyInstance | null = null;
  let plainMetrics: http.Server | null = null;
  let waits: RunWaits | null = null;
  let retention: RetentionSweeper | null = null;
  let sweeper: { close(): void } | null = null;
  let scheduler: Scheduler | null = null;
  let eventHub: EventHub | null = null;
  let closing: Promise<void> | null = null;
  const close = () =>
    (closing ??= (async () => {
      await retention?.close();
      sweeper?.close();
      await scheduler?.close();
      await waits?.close();
      // Live event streams end first: the server's close waits for open responses.
      await eventHub?.close();
      await server?.close();
      await new Promise((r) => (plainMetrics ? plainMetrics.close(r) : r(undefined)));
      await worker?.stop();
      await Promise.all([pool.end(), batches?.end()]);
      await database.release().catch(() => {});
      logger.flush?.();
    })());

  try {
    await checkConnection(pool, database);
    if (database.transactionPooler) warnOfPooler(database, logger);
    const agents = opts.agents ?? [opts.agent ?? {}];
    const names = agents.map((a) => a.name ?? DEMO_AGENT);
    if (agents.length === 0 || new Set(names).size !== names.length)
      throw new ConfigError(`agents must be a non-empty list of distinct names (got ${names.join(', ')})`);
    // The demo agent's tickets exist only where the demo agent is served.
    const demo = agents.some((a) => a.tools === undefined);
    await migrate(pool, {
      schema,
      dirs: demo ? [MIGRATIONS_DIR, DEMO_MIGRATIONS_DIR] : [MIGRATIONS_DIR],
      legacyAgent: names[0]!,
    });
    const sealer = new Sealer(config.encryptionKeys);
    await new EncryptionKeys(pool, { schema }).check(sealer);
    const store = new RunStore(pool, { schema, redact, sealer, batches: batches ?? undefined });
    const records = new RunRecords(pool, { schema, redact, sealer });
    const listing = new RunListing(pool, { schema, sealer });
    const deletion = new RunDeletion(pool, { schema });
    const auth = authFor(config, new ApiKeys(pool, { schema }), opts.authenticate);
    // Clients given in code (with an agent, or to the runtime) instead of the configured provider.
    const needsConfigured = !opts.llm && agents.some((a) => !a.llm);
    const llmOf = (a: AgentOptions) => a.llm ?? opts.llm ?? null;
    const agentDefaults = new Map<string, AgentDefaults>(
      agents.map((a, i) => [
        names[i]!,
        {
          model: a.model ?? llmOf(a)?.defaultModel ?? config.defaultModel,
          version: a.version ?? null,
          modelOptions: a.modelOptions ?? null,
          maxTokens: a.maxTokens ?? config.maxTokens,
          // Asked only once the runtime has started, when `llm` is set.
          checkOptions: (options) => (llmOf(a) ?? llm).checkOptions?.(options) ?? null,
        },
      ]),
    );
    const prices = loadPrices(config.pricesFile, (message) => logger.warn(message));
    const defaults: RunDefaults = {
      agent: names[0]!,
      model: agentDefaults.get(names[0]!)!.model,
      agents: agentDefaults,
      tokenBudget: config.defaultTokenBudget,
      timeoutSeconds: config.defaultTimeoutSeconds,
      maxSteps: config.maxSteps,
      costBudgetUsd: config.defaultCostBudgetUsd,
      isPriced: (model) => prices.priceOf(model) !== null,
    };
    waits = new RunWaits(session, (id) => records.get(id), logger);
    const runs = createRuns({ store: records, listing, defaults, waits });
    const scheduleStore = new Schedules(pool, { schema, sealer });
    const schedules = createSchedules({
      store: scheduleStore,
      records,
      defaults,
      now: async () => (await pool.query<{ now: Date }>('SELECT now() AS now')).rows[0]!.now,
    });
    if (opts.schedules) await syncDeclaredSchedules(schedules, scheduleStore, opts.schedules, names);
    // Whether the process listens (the API, or a worker's METRICS_PORT). One that does not, a library's
    // worker, has nobody to read metrics: it keeps none, counts no event, and loads no prom-client.
    const listens = opts.api || config.metricsPort !== null;
    const metrics = listens
      ? (await import('../observability/metrics.ts')).createMetrics(new RunStats(pool, { schema }), {
          models: [...prices.models, config.defaultModel],
          agents: names,
        })
      : null;
    // The client of agents without their own (the first agent's own when every agent has one).
    const llm: LlmClient = !needsConfigured
      ? (opts.llm ?? agents[0]!.llm!)
      : createLlmClient(config, {
          onRetry: (error, attempt, waitMs, call) => {
            metrics?.onLlmRetry(retryReason(error));
            logger.warn(
              {
                ...call.logFields,
                attempt,
                wait_ms: waitMs,
                status: error.status,
                request_id: error.requestId,
                err_message: error.message,
              },
              'model call retried',
            );
          },
        });

    for (const [name, a] of agentDefaults) {
      const problem = a.modelOptions && modelOptionsProblem(a.modelOptions, a);
      if (problem) throw new ConfigError(`agent "${name}": ${problem.path}: ${problem.message}`);
    }
    if (opts.worker && needsConfigured && config.llmProviderDefaulted) {
      logger.warn('ANTHROPIC_API_KEY is not set: using the offline demo model (LLM_PROVIDER=demo)');
    }

    let url: string | null = null;
    // Listen before the worker claims anything: a port already taken must fail before runs are held.
    if (listens && auth.mode === 'off') {
      logger.warn(
        { host: config.host },
        `AUTH=off: authentication is OFF. Anyone who can reach ${config.host}:${config.port} reads, cancels and deletes every run of every tenant`,
      );
    }
    if (opts.api) {
      // Loaded only where the API is served: a worker-only process carries no HTTP framework or routes.
      const { createServer } = await import('../api/server.ts');
      const dashboard = loadDashboard();
      if (!dashboard) logger.warn('the dashboard is not built (run npm run build): its pages answer 503');
      eventHub = new EventHub(new RunEvents(pool, { schema, sealer }), {
        databaseUrl: session,
        ...(session === null ? { pollMs: POLL_WITHOUT_LISTEN_MS } : {}),
        logger,
        access: new ReaderAccess(pool, { schema }),
      });
      server = createServer({
        store: records,
        listing,
        defaults,
        checkDatabase: async () => {
          await pool.query('SELECT 1');
        },
        ...(metrics && { metrics: () => metrics.render() }),
        overview: new RunOverview(pool, { schema }),
        deletion,
        dashboard,
        logger,
        auth,
        runEvents: { events: new RunEvents(pool, { schema, sealer }), hub: eventHub },
        files: new WorkspaceFiles(pool, { schema, sealer }),
        schedules,
      });
      url = await server.listen({ host: config.host, port: config.port }).catch((e: NodeJS.ErrnoException) => {
        if (e.code !== 'EADDRINUSE' && e.code !== 'EACCES') throw e;
        throw new ConfigError(
          `cannot listen on ${config.host}:${config.port} (${e.code === 'EADDRINUSE' ? 'in use' : 'not allowed'}); set PORT or --port`,
        );
      });
    } else if (config.metricsPort !== null && metrics) {
      plainMetrics = await metricsServer(metrics, auth, config.host, config.metricsPort);
      const addr = plainMetrics.address() as { port: number };
      url = `http://${config.host}:${addr.port}`;
    }

    if (opts.worker) {
      // Fault injection for crash tests: the process kills itself at that point of the step path.
      if (config.crashAt) armCrashPoint(config.crashAt);
      const tickets = demo ? new TicketStore(pool, { schema }) : null;
      const files = new WorkspaceFiles(pool, { schema, sealer });
      const definitions = await Promise.all(
        agents.map(async (a, i) => {
          const name = names[i]!;
          const withWorkspace = a.workspace ? await workspaceAgent(name, a.workspace, a.tools ?? [], { config, files, logger }) : null;
          return {
            name,
            system: a.system === undefined ? DEFAULT_SYSTEM_PROMPT : a.system,
            tools:
              withWorkspace?.tools ??
              new ToolExecutor(a.tools ?? demoTools(tickets!), config.toolTimeoutMs, config.toolResultMaxBytes, {
                concurrency: config.toolConcurrency,
                logger,
              }),
            maxTokens: a.maxTokens ?? config.maxTokens,
            modelOptions: a.modelOptions ?? null,
            compaction: a.compaction ?? null,
            ...(a.llm ? { llm: a.llm } : {}),
            ...(withWorkspace ? { workspaces: withWorkspace.workspaces } : {}),
            toolSources: mcpToolSources(a.mcpServers ?? [], { logger: logger.child({ agent: name }) }),
          };
        }),
      );
      if (agents.some((a) => a.workspace)) sweeper = startBlobSweep(files, logger);
      worker = new Worker(
        {
          store,
          llm,
          agents: definitions,
          costOf: (model, usage) => prices.costOf(model, usage),
          logger,
          events: [
            logEvents(logger),
            ...(metrics ? [metrics.events] : []),
            traceEvents({ provider: llm.provider, redact }),
            ...(opts.events ?? []),
          ],
          subscribe: (on) =>
            listenForWorker(session, on, (e, retryInMs) =>
              logger.warn({ err_message: e.message, retry_in_ms: retryInMs }, 'LISTEN connection failed; reconnecting'),
            ),
          leaseKeeper: leaseKeeperThread(database.url, {
            schema,
            prepared: !database.transactionPooler,
            stallLimitMs: Math.max(3 * config.leaseMs, config.toolTimeoutMs + config.leaseMs),
          }),
          liveness:
            config.workerLiveness === 'session' && session !== null
              ? livenessSession(session, {
                  schema,
                  log: (level, msg, fields) => logger[level](fields ?? {}, msg),
                })
              : // Behind a transaction pooler with no session URL, the start's warning has said so.
                leaseOnlyLiveness(config.workerLiveness === 'lease' ? (level, msg) => logger[level](msg) : undefined),
        },
        {
          name: config.workerName,
          concurrency: config.workerConcurrency,
          leaseMs: config.leaseMs,
          maxRunAttempts: config.maxRunAttempts,
          pollIntervalMs: session === null ? Math.min(config.pollIntervalMs, POLL_WITHOUT_LISTEN_MS) : config.pollIntervalMs,
          ...(session === null ? { renewIntervalMs: POLL_WITHOUT_LISTEN_MS } : {}),
          shutdownGraceMs: config.shutdownGraceMs,
          shutdownForceMs: config.shutdownForceMs,
          requeueDelayMs: config.retryCapMs,
        },
      );
      await worker.start();
      // Workers keep the database within RETENTION_DAYS: once now, then periodically.
      if (config.retentionMs !== null) retention = startRetention(deletion, { retentionMs: config.retentionMs }, logger);
    }
    // Every process that serves agents makes their schedules' slots; whichever comes first makes each.
    if (opts.api || opts.worker) {
      scheduler = startScheduler({ store: scheduleStore, records, defaults, agents: names, databaseUrl: session, logger });
    }
    return { config, database, connections, store, records, llm, logger, metrics, worker, server, runs, schedules, url, auth, close };
  } catch (e) {
    await close().catch(() => {});
    throw e;
  }
}
