/**
 * A real worker process for the waiting tests: a scripted model that asks for one call of TOOL
 * (`charge`, a slow tool that is not idempotent, or the built-in `sleep` for SLEEP_SECONDS), then
 * answers. Each model call and each execution of `charge` is printed as a JSON line.
 */
import { sleepTool } from '../../src/tools/sleep-tool.ts';
import { defineTool } from '../../src/tools/types.ts';
import { testWorker } from './engine.ts';
import { workerProcess } from './worker-harness.ts';
import { toolThenTextLlm } from './scripted-llm.ts';

const { store, options: fromEnv, serve } = workerProcess(4);
const charge = defineTool({
  name: 'charge',
  description: 'charges a card; cannot honour an idempotency key',
  inputSchema: { type: 'object' },
  idempotent: false,
  async execute(_input, ctx) {
    console.log(JSON.stringify({ event: 'tool', runId: ctx.runId, key: ctx.idempotencyKey }));
    await new Promise((r) => setTimeout(r, Number(process.env.SLOW_TOOL_MS ?? 1000)));
    return 'charged';
  },
});
const tool = process.env.TOOL ?? 'charge';
const llm = toolThenTextLlm(tool, tool === 'sleep' ? { seconds: Number(process.env.SLEEP_SECONDS ?? 3) } : {});
const scripted = llm.send.bind(llm);
llm.send = async (req, options) => {
  console.log(JSON.stringify({ event: 'model' }));
  return scripted(req, options);
};
const worker = testWorker(store, llm, [charge, sleepTool()], {
  ...fromEnv,
  // A long poll: only the worker's timer for the nearest due run (and NOTIFY) can wake it in time.
  pollIntervalMs: 60_000,
});
await serve(worker);
