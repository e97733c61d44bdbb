/**
 * A real worker process for the crash test of parallel tool calls: a model that asks for three tools
 * in one turn (one quick, two slow), then answers with the tool_use ids of the results it was sent,
 * in the order it got them. Each tool execution is printed, so the parent sees which calls ran where.
 */
import { defineTool } from '../../src/tools/types.ts';
import { testWorker } from './engine.ts';
import { workerProcess } from './worker-harness.ts';
import { response, ScriptedLlm, usage } from './scripted-llm.ts';

const { store, options: fromEnv, serve } = workerProcess(6);
const timed = defineTool<{ ms: number }>({
  name: 'timed',
  description: 'takes the given time',
  inputSchema: { type: 'object' },
  async execute(input, ctx) {
    console.log(JSON.stringify({ event: 'tool', runId: ctx.runId, key: ctx.idempotencyKey }));
    await new Promise((r) => setTimeout(r, input.ms));
    return `result of ${ctx.idempotencyKey}`;
  },
});
const llm = new ScriptedLlm((req) => {
  const last = req.messages[req.messages.length - 1]!;
  if (typeof last.content === 'string') {
    const uses = [
      { id: 'toolu_fast', ms: 100 },
      { id: 'toolu_slow1', ms: 4000 },
      { id: 'toolu_slow2', ms: 4000 },
    ].map((u) => ({ type: 'tool_use', id: u.id, name: 'timed', input: { ms: u.ms } }));
    return response(uses, 'tool_use', usage(100, 20));
  }
  const ids = (last.content as unknown as { tool_use_id: string }[]).map((b) => b.tool_use_id);
  return response([{ type: 'text', text: ids.join(',') }], 'end_turn', usage(150, 5));
});
const worker = testWorker(store, llm, [timed], {
  ...fromEnv,
});
await serve(worker);
