/**
 * A real worker process whose runs each call the tool `work` once: for a run whose input starts with
 * "block" the tool busy-loops for BLOCK_MS (a synchronous computation blocking the event loop), for the
 * others it waits WORK_MS without blocking (BLOCKS=0: this process never blocks). For a run whose input
 * starts with "model-block" the model call itself blocks for MODEL_BLOCK_MS. Prints a JSON line per
 * tool start and one when a block ends; its own log lines
 * (warnings and up) go to stdout as JSON too. Configured by environment.
 */
import { createLogger } from '../../src/observability/logger.ts';
import { leaseKeeperThread } from '../../src/leases/lease-keeper-thread.ts';
import { defineTool } from '../../src/tools/types.ts';
import { testWorker } from './engine.ts';
import { workerProcess } from './worker-harness.ts';
import { response, ScriptedLlm, usage } from './scripted-llm.ts';

const blockMs = Number(process.env.BLOCK_MS ?? 2000);
const { url, store, options: fromEnv, serve } = workerProcess(8);
const llm = new ScriptedLlm((req) => {
  const first = req.messages[0]!.content as string;
  const last = req.messages[req.messages.length - 1]!;
  if (typeof last.content === 'string') {
    // The runtime's own work blocking the loop (as reading a huge model reply would), in no tool.
    if (first.startsWith('model-block')) {
      const until = Date.now() + Number(process.env.MODEL_BLOCK_MS ?? 1500);
      while (Date.now() < until);
    }
    const id = `toolu_${Math.random().toString(36).slice(2, 12)}`;
    return response([{ type: 'tool_use', id, name: 'work', input: { block: first.startsWith('block') } }], 'tool_use', usage(100, 20));
  }
  return response([{ type: 'text', text: 'done' }], 'end_turn', usage(150, 5));
});
const work = defineTool({
  name: 'work',
  description: 'works, sometimes synchronously for a long time',
  inputSchema: { type: 'object' },
  async execute(input, ctx) {
    console.log(JSON.stringify({ event: 'tool', runId: ctx.runId, key: ctx.idempotencyKey }));
    if ((input as { block?: boolean }).block && process.env.BLOCKS !== '0') {
      const until = Date.now() + blockMs;
      while (Date.now() < until); // a synchronous computation: nothing else in this process runs meanwhile
      console.log(JSON.stringify({ event: 'unblocked', runId: ctx.runId }));
    } else {
      await new Promise((r) => setTimeout(r, Number(process.env.WORK_MS ?? 300)));
    }
    return 'worked';
  },
});
const worker = testWorker(store, llm, [work], {
  ...fromEnv,
  maxRunAttempts: Number(process.env.MAX_RUN_ATTEMPTS ?? 5),
  concurrency: Number(process.env.CONCURRENCY ?? 16),
  // STALL_LIMIT_MS: how long the loop may be blocked before the leases lapse (3 × the lease by default).
  ...(process.env.STALL_LIMIT_MS ? { leaseKeeper: leaseKeeperThread(url, { stallLimitMs: Number(process.env.STALL_LIMIT_MS) }) } : {}),
  logger: createLogger({ level: 'warn' }),
});
await serve(worker);
