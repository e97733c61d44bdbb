/**
 * The floor of the agent-loop bench: the same work with no runtime at all. `inFlight` loops in one
 * process, each taking runs until `runs` are done; a run is the conversation with the stand-in (a raw
 * `fetch` per model call, its streamed answer read and its events parsed, the messages growing as
 * they would) with one autocommitted INSERT per step — the model's answer, then the tool's result —
 * on a pool of 24. Nothing else: no claim, no lease, no fence, no budget, no log, no metric.
 *
 * A child of bench/agent-loop.ts: argv `--url=postgres… --model-url=http://… --in-flight=N --runs=R`;
 * reports an AgentLoopFigures over IPC. BENCH_AGENT_LOOP_SNAPSHOT takes heap snapshots at the same
 * step counts as the runtime's side (see stepCounter).
 */
import pg from 'pg';
import { type AgentLoopFigures, arg, measure, stepCounter } from './agent-loop-measure.ts';

const url = arg('url');
const modelUrl = arg('model-url');
const inFlight = Number(arg('in-flight'));
const runs = Number(arg('runs'));

const pool = new pg.Pool({ connectionString: url, max: 24 });
await pool.query(
  'CREATE TABLE IF NOT EXISTS bench_floor_step (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, run int, seq int, body text)',
);

const TOOLS = [
  { name: 'lookup', description: 'Looks a key up.', input_schema: { type: 'object', properties: { key: { type: 'string' } } } },
];

/** The message the streamed events of one answer add up to (content blocks and stop reason). */
function assemble(sse: string): { content: any[]; stopReason: string } {
  const content: any[] = [];
  const json: string[] = [];
  let stopReason = '';
  for (const line of sse.split('\n')) {
    if (!line.startsWith('data: ')) continue;
    const e = JSON.parse(line.slice(6));
    if (e.type === 'content_block_start') {
      content[e.index] = e.content_block;
      json[e.index] = '';
    } else if (e.type === 'content_block_delta' && e.delta.type === 'text_delta') content[e.index].text += e.delta.text;
    else if (e.type === 'content_block_delta' && e.delta.type === 'input_json_delta') json[e.index] += e.delta.partial_json;
    else if (e.type === 'content_block_stop' && json[e.index]) content[e.index].input = JSON.parse(json[e.index]!);
    else if (e.type === 'message_delta') stopReason = e.delta.stop_reason;
  }
  return { content, stopReason };
}

let next = 0;
const counter = stepCounter('floor', runs);
async function loop(): Promise<void> {
  for (let run = next++; run < runs; run = next++) {
    const messages: any[] = [{ role: 'user', content: `bench run ${run}` }];
    for (let seq = 1; ; seq++) {
      const res = await fetch(`${modelUrl}/v1/messages`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-api-key': 'bench', 'anthropic-version': '2023-06-01' },
        body: JSON.stringify({
          model: 'claude-sonnet-4-6',
          max_tokens: 1024,
          system: 'You are a bench.',
          messages,
          tools: TOOLS,
          stream: true,
        }),
      });
      const { content, stopReason } = assemble(await res.text());
      await pool.query('INSERT INTO bench_floor_step (run, seq, body) VALUES ($1, $2, $3)', [run, seq, JSON.stringify(content)]);
      counter.step();
      messages.push({ role: 'assistant', content });
      if (stopReason !== 'tool_use') break;
      const use = content.find((b) => b.type === 'tool_use');
      const result = `value of ${use.input.key}`;
      await pool.query('INSERT INTO bench_floor_step (run, seq, body) VALUES ($1, $2, $3)', [run, ++seq, result]);
      counter.step();
      messages.push({ role: 'user', content: [{ type: 'tool_result', tool_use_id: use.id, content: result }] });
    }
  }
}

const figures: AgentLoopFigures = await measure(async (started) => {
  started();
  await Promise.all(Array.from({ length: inFlight }, loop));
  return counter.steps;
});
await pool.end();
process.send!(figures, () => process.exit(0));
