/**
 * One worker process of the chaos suite: the real runtime (`startRuntime`, configured by environment
 * as `durable-agent worker` is, DURABLE_AGENT_CRASH_AT included) with the suite's one tool. It prints
 * a line for every claim, so the suite knows how often each run was taken up (stdout to a pipe is
 * written synchronously: a line printed is a line read, even if the process is killed next).
 */
import pg from 'pg';
// The built package (npm run build), not the sources: a worker starts in a fraction of the time, and
// the suite restarts workers all the time.
import { defineTool } from '../../dist/index.js';
import { loadConfig, startRuntime } from '../../dist/internals.js';
import { TOOL_NAME } from './model.ts';

const config = loadConfig();
const toolMs = Number(process.env.CHAOS_TOOL_MS ?? 20);
const db = new pg.Pool({ connectionString: config.databaseUrl!, max: 4, application_name: 'chaos-tool' });
db.on('error', () => {}); // an idle connection whose backend was terminated: the next query opens another

/**
 * A tool with an effect outside the run's log, honouring its idempotency key as a real one must: the
 * effect is keyed (a second execution under the same key changes nothing). Every execution is also
 * logged, so the suite can count how often a key ran.
 */
const effect = defineTool({
  name: TOOL_NAME,
  description: 'applies an effect once per idempotency key',
  inputSchema: { type: 'object' },
  async execute(_input, ctx) {
    await new Promise((r) => setTimeout(r, toolMs * Math.random()));
    await db.query('INSERT INTO chaos.execution (key, run_id, worker) VALUES ($1, $2, $3)', [
      ctx.idempotencyKey,
      ctx.runId,
      config.workerName,
    ]);
    await db.query('INSERT INTO chaos.effect (key, run_id) VALUES ($1, $2) ON CONFLICT (key) DO NOTHING', [ctx.idempotencyKey, ctx.runId]);
    return `applied ${ctx.idempotencyKey}`;
  },
});

const runtime = await startRuntime(config, {
  api: false,
  worker: true,
  agent: { system: 'You are the chaos agent.', tools: [effect], model: 'chaos-model' },
  events: [{ runClaimed: ({ run }) => console.log(JSON.stringify({ claimed: run.id })) }],
});
console.log(JSON.stringify({ ready: config.workerName }));
process.on('SIGTERM', () => {
  void runtime
    .close()
    .then(() => db.end())
    .finally(() => process.exit(0));
});
