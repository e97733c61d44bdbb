/**
 * A real worker process for crash tests: a scripted model (one slow tool call, then an answer) and a
 * tool that takes SLOW_TOOL_MS, so the parent can SIGKILL it mid-step. Configured by environment.
 */
import { defineTool } from '../../src/tools/types.ts';
import { testWorker } from './engine.ts';
import { workerProcess } from './worker-harness.ts';
import { toolThenTextLlm } from './scripted-llm.ts';

const { pool, store, options: fromEnv, serve } = workerProcess(4);
const slow = defineTool({
  name: 'slow',
  description: 'takes a while',
  inputSchema: { type: 'object' },
  async execute(_input, ctx) {
    console.log(JSON.stringify({ event: 'tool', runId: ctx.runId, key: ctx.idempotencyKey }));
    await new Promise((r) => setTimeout(r, Number(process.env.SLOW_TOOL_MS ?? 1000)));
    // The effect, honouring the idempotency key as a tool must (a table the test made, when it made one).
    if (process.env.EFFECT_TABLE) {
      await pool.query(`INSERT INTO ${process.env.EFFECT_TABLE} (key, worker) VALUES ($1, $2) ON CONFLICT (key) DO NOTHING`, [
        ctx.idempotencyKey,
        process.env.WORKER_NAME,
      ]);
    }
    console.log(JSON.stringify({ event: 'tool done', runId: ctx.runId, key: ctx.idempotencyKey }));
    return 'slow result';
  },
});
const worker = testWorker(store, toolThenTextLlm('slow'), [slow], {
  ...fromEnv,
});
await serve(worker);
