/**
 * The `durable-agent` command: serve | worker | migrate. Every command reads the same configuration;
 * flags override environment variables. Exit codes: 0 done, 1 failed while running, 2 bad usage or
 * configuration (one readable line, no stack trace).
 */
import { parseArgs } from 'node:util';
import { type Config, type Env, loadConfig } from './config.ts';
import { migrate } from './db/migrate.ts';
import { checkConnection, createPool, resolveDatabase } from './db/pool.ts';
import { DurableAgentError } from './errors.ts';
import { startRuntime } from './runtime.ts';

const HELP = `durable-agent — a durable runtime for LLM agents on PostgreSQL

Usage: durable-agent <command> [options]

Commands:
  serve            the HTTP API and a worker in one process
    --no-worker      the API only (run workers as separate processes)
  worker           a worker only: claims runs and drives them
  migrate          apply database migrations, then exit

Options:
  --port <n>       API port (PORT, default 8080)
  --host <addr>    API address (HOST, default 127.0.0.1)
  --help           this text

Configuration comes from environment variables (DATABASE_URL, ANTHROPIC_API_KEY, WORKER_CONCURRENCY,
LEASE_SECONDS, LOG_FORMAT, …); see the README. With DATABASE_URL unset, an embedded PostgreSQL keeps
its data under ./.data/ and is shared by every process of the project on this machine.
`;

class UsageError extends Error {}

function parse(argv: string[]) {
  try {
    const { values, positionals } = parseArgs({
      args: argv,
      allowPositionals: true,
      options: {
        help: { type: 'boolean', short: 'h' },
        'no-worker': { type: 'boolean' },
        port: { type: 'string' },
        host: { type: 'string' },
      },
    });
    return { values, positionals };
  } catch (e) {
    throw new UsageError((e as Error).message);
  }
}

function banner(config: Readonly<Config>, url: string, database: string, provider: string, withWorker: boolean): string {
  const lines = [
    `durable-agent listening on ${url}`,
    `  database: ${database}`,
    `  model:    ${provider === 'demo' ? 'demo (offline stand-in; set ANTHROPIC_API_KEY for Claude)' : `${provider}, default ${config.defaultModel}`}`,
    `  worker:   ${withWorker ? `${config.workerName}, up to ${config.workerConcurrency} runs at once` : 'none in this process (--no-worker)'}`,
    `  web UI:   ${url}/ (the dashboard)`,
    '',
    'Start a run:',
    `  curl -s -X POST ${url}/api/runs -H 'Content-Type: application/json' \\`,
    `    -d '{"input":"Which acme tickets are overdue?","tokenBudget":50000,"timeoutSeconds":300}'`,
    `Then: curl -s ${url}/api/runs/<id>   and   curl -s ${url}/api/runs/<id>/timeline`,
    '',
  ];
  return lines.join('\n');
}

/** Resolves when the process is asked to stop; a second signal exits at once. */
function untilSignal(): Promise<NodeJS.Signals> {
  return new Promise((resolve) => {
    const onSignal = (signal: NodeJS.Signals) => {
      process.once(signal, () => process.exit(130));
      resolve(signal);
    };
    process.once('SIGINT', onSignal);
    process.once('SIGTERM', onSignal);
  });
}

async function run(argv: string[]): Promise<number> {
  const { values, positionals } = parse(argv);
  const [command, ...rest] = positionals;
  if (values.help || !command) {
    process.stdout.write(HELP);
    return values.help ? 0 : 2;
  }
  if (rest.length) throw new UsageError(`unexpected argument "${rest[0]}"`);
  const overrides: Partial<Env> = {};
  if (values.port !== undefined) overrides.PORT = values.port as never;
  if (values.host !== undefined) overrides.HOST = values.host;
  const config = loadConfig(process.env, overrides);

  switch (command) {
    case 'migrate': {
      const database = await resolveDatabase(config);
      const pool = createPool(database.url, 1);
      try {
        await checkConnection(pool, database);
        const applied = await migrate(pool);
        process.stdout.write(applied.length ? `applied ${applied.join(', ')} to ${database.description}\n` : `${database.description} is up to date\n`);
      } finally {
        await pool.end();
        await database.release();
      }
      return 0;
    }
    case 'serve':
    case 'worker': {
      const withWorker = command === 'worker' || !values['no-worker'];
      const runtime = await startRuntime(config, { api: command === 'serve', worker: withWorker });
      if (config.llmProviderDefaulted && withWorker) {
        runtime.logger.warn('ANTHROPIC_API_KEY is not set: using the offline demo model (LLM_PROVIDER=demo)');
      }
      if (command === 'serve') {
        process.stdout.write(banner(config, runtime.url!, runtime.database.description, runtime.llm.provider, withWorker));
      } else {
        runtime.logger.info(
          { database: runtime.database.description, provider: runtime.llm.provider, metrics: runtime.url ? `${runtime.url}/metrics` : undefined },
          `worker ${config.workerName} started`,
        );
      }
      const signal = await untilSignal();
      runtime.logger.info({ signal }, 'shutting down: handing back runs in flight');
      await runtime.close();
      return 0;
    }
    default:
      throw new UsageError(`unknown command "${command}" (try --help)`);
  }
}

export async function main(argv: string[]): Promise<number> {
  try {
    return await run(argv);
  } catch (e) {
    if (e instanceof UsageError || e instanceof DurableAgentError) {
      process.stderr.write(`durable-agent: ${e.message}\n`);
      return 2;
    }
    process.stderr.write(`durable-agent: ${e instanceof Error ? e.message : String(e)}\n`);
    return 1;
  }
}
