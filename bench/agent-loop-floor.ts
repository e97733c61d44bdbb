/**
 * The floor of the agent-loop bench: the same work with no runtime at all. `inFlight` loops in one
 * process, each taking runs until `runs` are done; a run is the conversation with the stand-in (one
 * request per model call, its streamed answer read and its events parsed, the messages growing as
 * they would) with one autocommitted INSERT per step — the model's answer, then the tool's result —
 * on a pool of 24. Nothing else: no claim, no lease, no fence, no budget, no log, no metric.
 *
 * `--transport=http` (the floor the runtime is held to) makes the calls as the runtime does: node:http
 * on kept-alive connections, every freed one kept; `--transport=fetch`, with `fetch` (undici), the way
 * most code would, and about half as fast on this work.
 *
 * A child of bench/agent-loop.ts: argv `--url=postgres… --model-url=http://… --in-flight=N --runs=R
 * --transport=http|fetch`; reports an AgentLoopFigures over IPC. BENCH_AGENT_LOOP_SNAPSHOT takes heap
 * snapshots at the same step counts as the runtime's side (see stepCounter); BENCH_AGENT_LOOP_TRACE prints
 * its resident memory by mapping at the end, as the runtime's side does.
 */
import http from 'node:http';
import pg from 'pg';
import { type AgentLoopFigures, allocationProfile, arg, measure, residentByMapping, stepCounter } from './agent-loop-measure.ts';

const url = arg('url');
const modelUrl = arg('model-url');
const inFlight = Number(arg('in-flight'));
const runs = Number(arg('runs'));
const transport = arg('transport');
if (transport !== 'http' && transport !== 'fetch') throw new Error(`--transport must be http or fetch, not ${transport}`);

const HEADERS = { 'content-type': 'application/json', 'x-api-key': 'bench', 'anthropic-version': '2023-06-01' };
// As the runtime's pool: every connection a call frees is kept for the next (4 s idle), not Node's 256.
const agent = new http.Agent({ keepAlive: true, keepAliveMsecs: 4_000, maxFreeSockets: Number.MAX_SAFE_INTEGER });
const messagesUrl = new URL('/v1/messages', modelUrl);

/** One call's streamed answer, as text. */
function post(body: string): Promise<string> {
  if (transport === 'fetch') return fetch(messagesUrl, { method: 'POST', headers: HEADERS, body }).then((res) => res.text());
  return new Promise((resolve, reject) => {
    const req = http.request(
      messagesUrl,
      { method: 'POST', agent, headers: { ...HEADERS, 'content-length': Buffer.byteLength(body) } },
      (res) => {
        res.setEncoding('utf8');
        let text = '';
        res.on('data', (chunk: string) => (text += chunk));
        res.on('end', () => resolve(text));
        res.on('error', reject);
      },
    );
    req.on('error', reject);
    req.end(body);
  });
}

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
const name = arg('name');
const counter = stepCounter(name, runs);
async function loop(): Promise<void> {
  for (let run = next++; run < runs; run = next++) {
    const messages: any[] = [{ role: 'user', content: `bench run ${run}` }];
    for (let seq = 1; ; seq++) {
      const answer = await post(
        JSON.stringify({ model: 'claude-sonnet-4-6', max_tokens: 1024, system: 'You are a bench.', messages, tools: TOOLS, stream: true }),
      );
      const { content, stopReason } = assemble(answer);
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

const allocations = await allocationProfile(name);
const figures: AgentLoopFigures = await measure(async (started) => {
  started();
  await Promise.all(Array.from({ length: inFlight }, loop));
  return counter.steps;
});
if (process.env.BENCH_AGENT_LOOP_TRACE) residentByMapping(name);
await pool.end();
await allocations?.();
process.send!(figures, () => process.exit(0));
