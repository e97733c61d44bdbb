/**
 * The `durable-agent` command: serve | worker | migrate | help. Every command reads the same
 * configuration; flags override environment variables. Exit codes: 0 done, 1 failed while running,
 * 2 bad usage or configuration (one readable line, no stack trace; usage errors add the usage).
 *
 * Only node:util and the error classes are imported up front: `--help` and a mistyped command answer
 * at once, while the runtime's modules (database, HTTP server, model SDK) take about a second to load.
 */
import type { Config, Env } from '../config/environment.ts';
import { DurableAgentError } from '../domain/errors.ts';
import { parseOptions, UsageError } from './usage.ts';

const USAGE = `durable-agent — a durable runtime for LLM agents on PostgreSQL

Usage: durable-agent <command> [options]

Commands:
  serve            the HTTP API and a worker in one process
    --no-worker      the API only (run workers as separate processes)
  worker           a worker only: claims runs and drives them
  migrate          apply database migrations, then exit
  runs             list, show, steps, tail, approve, deny, complete, fork, cancel and delete
                   the runs of a running server; purge old runs from the database (runs --help)
  schedules        list, create, pause, resume, trigger and delete the schedules of a running
                   server (schedules --help)
  keys             create, list and revoke API keys (keys --help)
  encryption       status and rotate: the keys stored values are encrypted with (encryption --help)
  help             this text

Options:
  --config <file>  serve or worker: your agent, from a module whose default export is
                   { agents: [defineAgent(…)], schedules?: [defineSchedule(…)] }; without it,
                   the built-in demo agent
  --port <n>       API port (PORT, default 8080)
  --host <addr>    API address (HOST, default 127.0.0.1)
  --help           this text

Configuration comes from environment variables (DATABASE_URL, ANTHROPIC_API_KEY, LLM_PROVIDER=openai
with OPENAI_API_KEY and OPENAI_BASE_URL, WORKER_CONCURRENCY, LEASE_SECONDS, LOG_FORMAT,
OTEL_EXPORTER_OTLP_ENDPOINT, …); see the README. With DATABASE_URL unset, an embedded PostgreSQL keeps
its data under ./.data/ and is shared by every process of the project on this machine.
`;

const COMMANDS = ['serve', 'worker', 'migrate', 'help'] as const;
type Command = (typeof COMMANDS)[number];

/** Command groups with subcommands and options of their own, each in its module under cli/. */
const GROUPS: Record<string, () => Promise<(argv: string[]) => Promise<number>>> = {
  runs: async () => (await import('./runs.ts')).runsCommand,
  schedules: async () => (await import('./schedules.ts')).schedulesCommand,
  keys: async () => (await import('./keys.ts')).keysCommand,
  encryption: async () => (await import('./encryption.ts')).encryptionCommand,
};

function parse(argv: string[]) {
  return parseOptions({
    args: argv,
    allowPositionals: true,
    options: {
      help: { type: 'boolean', short: 'h' },
      'no-worker': { type: 'boolean' },
      config: { type: 'string' },
      port: { type: 'string' },
      host: { type: 'string' },
    },
  });
}

/** The banner's line on authentication: whether requests need a key, and how to get one. */
function authLine(mode: 'keys' | 'hook' | 'off', required: boolean): string {
  if (mode === 'off') return 'OFF (AUTH=off): anyone who reaches this address reads, cancels and deletes every run';
  if (required) return 'API keys required (Authorization: Bearer <key>); durable-agent keys create --tenant <name> makes one';
  return 'none yet: no API key exists and the API listens on loopback (durable-agent keys create --tenant <name> turns keys on)';
}

/**
 * Where to look next. The `runs` commands find the API at DURABLE_AGENT_URL, by default the default
 * address of `serve`: on any other address the hint carries the variable, or they would ask the wrong
 * server (or none).
 */
function cliHint(url: string, key: string, cliUrl: string): string[] {
  if (url === cliUrl) return [`Then: curl -s${key} ${url}/api/runs/<id>   or   durable-agent runs list`];
  return [
    `Then: curl -s${key} ${url}/api/runs/<id>   or   DURABLE_AGENT_URL=${url} durable-agent runs list`,
    `  (the runs commands ask ${cliUrl} unless told: export DURABLE_AGENT_URL=${url} once in your shell)`,
  ];
}

function banner(
  config: Readonly<Config>,
  url: string,
  cliUrl: string,
  database: string,
  connections: string,
  provider: string,
  agent: string | null,
  withWorker: boolean,
  traces: string | null,
  auth: string,
  keyed: boolean,
): string {
  const example = agent ? '{"input":"Hello!"}' : '{"input":"Which acme tickets are overdue?","tokenBudget":50000,"timeoutSeconds":300}';
  const key = keyed ? ` -H "Authorization: Bearer $DURABLE_AGENT_KEY"` : '';
  const lines = [
    `durable-agent listening on ${url}`,
    `  database: ${database}`,
    `            ${connections}`,
    `  agent:    ${agent ?? 'demo (the built-in support assistant; --config for yours)'}`,
    `  model:    ${provider === 'demo' ? 'demo (offline stand-in; set ANTHROPIC_API_KEY for Claude)' : `${provider}, default ${config.defaultModel}`}`,
    `  worker:   ${withWorker ? `${config.workerName}, up to ${config.workerConcurrency} runs at once` : 'none in this process (--no-worker)'}`,
    `  web UI:   ${url}/ (the dashboard)`,
    ...(traces ? [`  traces:   OTLP to ${traces}`] : []),
    `  auth:     ${auth}`,
    '',
    'Start a run:',
    `  curl -s -X POST ${url}/api/runs -H 'Content-Type: application/json'${key} \\`,
    `    -d '${example}'`,
    ...cliHint(url, key, cliUrl),
    '',
  ];
  return lines.join('\n');
}

async function migrateCommand(config: Readonly<Config>): Promise<number> {
  const { checkConnection, createPool, resolveDatabase } = await import('../db/pool.ts');
  const { migrate } = await import('../db/migrate.ts');
  const database = await resolveDatabase(config);
  const pool = createPool(database.url, 1, { prepared: !database.transactionPooler });
  try {
    await checkConnection(pool, database);
    const applied = await migrate(pool, { schema: config.databaseSchema });
    process.stdout.write(
      applied.length ? `applied ${applied.join(', ')} to ${database.description}\n` : `${database.description} is up to date\n`,
    );
  } finally {
    await pool.end();
    await database.release();
  }
  return 0;
}

/** With OTEL_* naming a collector, the SDK exporting this process's spans; otherwise null, and nothing is loaded. */
async function otelExport(config: Readonly<Config>) {
  if (!config.otel) return null;
  const { startOtelExport } = await import('../observability/otel-export.ts');
  return startOtelExport(config.otel, { 'service.instance.id': config.workerName });
}

async function serveCommand(
  config: Readonly<Config>,
  command: 'serve' | 'worker',
  withWorker: boolean,
  configFile: string | undefined,
): Promise<number> {
  let agents;
  let schedules;
  if (configFile !== undefined) {
    const { loadAgentsConfig } = await import('../agents/config-module.ts');
    ({ agents, schedules } = await loadAgentsConfig(configFile));
  }
  const { startRuntime } = await import('../runtime/start-runtime.ts');
  const { describeBudget } = await import('../runtime/connection-budget.ts');
  const { announceExit, announceShutdown, EXIT_NOW, untilSignal } = await import('./shutdown.ts');
  // Registered before the runtime starts, so the first run claimed is traced too.
  const otel = await otelExport(config);
  try {
    const runtime = await startRuntime(config, {
      api: command === 'serve',
      worker: withWorker,
      ...(agents ? { agents } : {}),
      ...(schedules ? { schedules } : {}),
    });
    otel?.reportTo(runtime.logger);
    if (command === 'serve') {
      const required = await runtime.auth.required();
      const auth = authLine(runtime.auth.mode, required);
      const { loadClientConfig } = await import('../config/environment.ts');
      process.stdout.write(
        banner(
          config,
          runtime.url!,
          loadClientConfig({}).url,
          runtime.database.description,
          describeBudget(runtime.connections, runtime.database),
          runtime.llm.provider,
          agents ? agents.map((a) => a.name).join(', ') : null,
          withWorker,
          otel?.tracesUrl ?? null,
          auth,
          required,
        ),
      );
    } else {
      runtime.logger.info(
        {
          database: runtime.database.description,
          connections: describeBudget(runtime.connections, runtime.database),
          provider: runtime.llm.provider,
          agents: agents?.map((a) => a.name) ?? ['demo'],
          metrics: runtime.url ? `${runtime.url}/metrics` : undefined,
          traces: otel?.tracesUrl,
        },
        `worker ${config.workerName} started`,
      );
    }
    const signal = await untilSignal((second) => {
      announceExit(runtime.worker, runtime.logger, second);
      process.exit(EXIT_NOW);
    });
    runtime.logger.info({ signal }, 'shutting down: handing back runs in flight');
    announceShutdown(runtime.worker, runtime.logger, config.toolTimeoutMs);
    await runtime.close();
  } finally {
    // The spans of the last runs are still in the batch: sent before the process exits.
    await otel?.shutdown();
  }
  return 0;
}

async function run(argv: string[]): Promise<number> {
  const group = argv[0] !== undefined ? GROUPS[argv[0]] : undefined;
  if (group) return (await group())(argv.slice(1));
  const { values, positionals } = parse(argv);
  const [command, ...rest] = positionals;
  if (values.help || command === 'help') {
    process.stdout.write(USAGE);
    return 0;
  }
  if (command === undefined) throw new UsageError('no command given');
  if (!(COMMANDS as readonly string[]).includes(command)) throw new UsageError(`unknown command "${command}"`);
  if (rest.length) throw new UsageError(`unexpected argument "${rest[0]}"`);
  if (values.config !== undefined && command !== 'serve' && command !== 'worker')
    throw new UsageError('--config applies to serve and worker');
  if (values['no-worker'] && command !== 'serve') throw new UsageError('--no-worker applies to serve');

  const { loadConfig } = await import('../config/environment.ts');
  const overrides: Partial<Env> = {};
  // Flag values are strings, parsed and checked by the same schema as the environment's.
  if (values.port !== undefined) overrides.PORT = values.port as never;
  if (values.host !== undefined) overrides.HOST = values.host;
  const config = loadConfig(undefined, overrides);

  switch (command as Exclude<Command, 'help'>) {
    case 'migrate':
      return migrateCommand(config);
    case 'serve':
      return serveCommand(config, 'serve', !values['no-worker'], values.config);
    case 'worker':
      return serveCommand(config, 'worker', true, values.config);
  }
}

export async function main(argv: string[]): Promise<number> {
  try {
    return await run(argv);
  } catch (e) {
    if (e instanceof UsageError) {
      process.stderr.write(`durable-agent: ${e.message}\n\n${e.usage ?? USAGE}`);
      return 2;
    }
    if (e instanceof DurableAgentError) {
      process.stderr.write(`durable-agent: ${e.message}\n`);
      return 2;
    }
    process.stderr.write(`durable-agent: ${e instanceof Error ? e.message : String(e)}\n`);
    return 1;
  }
}
