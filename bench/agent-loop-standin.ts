/**
 * A Messages API stand-in for the agent-loop bench, run as its own process so that its CPU is not the
 * measured process's: POST /v1/messages answers, after `latencyMs`, as the real API streams
 * (`stream: true`: message_start, content blocks with their deltas, message_delta, message_stop, each
 * event its own write) or as one JSON body. The first TURNS − 1 answers of a conversation ask for one
 * tool call, the last one answers in text, so every run makes TURNS model calls and TURNS − 1 tool steps.
 *
 * Started with `--latency-ms=N`; tells its parent `{ port }` over IPC once it listens.
 */
import http from 'node:http';
import { encode, messageEvents } from '../test/support/fake-anthropic-sse.ts';
import { TURNS } from './agent-loop-measure.ts';

const latencyMs = Number(process.argv.find((a) => a.startsWith('--latency-ms='))?.split('=')[1] ?? 0);
/** `--hold` (bench/held-calls.ts): no answer until the parent says `release`; `{ held }` told after each call taken. */
const hold = process.argv.includes('--hold');
let held: (() => void)[] = [];

/** The answer to a conversation that holds `assistantTurns` answers already, streamed or whole, computed once. */
function answer(assistantTurns: number): { events: string[]; json: string } {
  const done = assistantTurns >= TURNS - 1;
  const message = {
    id: `msg_bench_${assistantTurns}`,
    type: 'message',
    role: 'assistant',
    model: 'bench-model',
    content: done
      ? [{ type: 'text', text: 'All five lookups are done; the answer is ready.' }]
      : [
          { type: 'text', text: 'Let me look that up.' },
          { type: 'tool_use', id: `toolu_bench_${assistantTurns + 1}`, name: 'lookup', input: { key: `item-${assistantTurns + 1}` } },
        ],
    stop_reason: done ? 'end_turn' : 'tool_use',
    stop_sequence: null,
    usage: { input_tokens: 400 + 60 * assistantTurns, output_tokens: 30, cache_creation_input_tokens: 0, cache_read_input_tokens: 0 },
  };
  return { events: messageEvents(message).map(encode), json: JSON.stringify(message) };
}

const ANSWERS = Array.from({ length: TURNS }, (_, i) => answer(i));
const ASSISTANT = '"role":"assistant"';

function countTurns(body: string): number {
  let n = 0;
  for (let i = body.indexOf(ASSISTANT); i !== -1; i = body.indexOf(ASSISTANT, i + ASSISTANT.length)) n++;
  return Math.min(n, TURNS - 1);
}

let requests = 0;
const server = http.createServer((req, res) => {
  const chunks: Buffer[] = [];
  req.on('data', (c: Buffer) => chunks.push(c));
  req.on('end', () => {
    const body = Buffer.concat(chunks).toString();
    const { events, json } = ANSWERS[countTurns(body)]!;
    const stream = body.includes('"stream":true');
    const headers = { 'request-id': `req_bench_${++requests}` };
    const reply = () => {
      if (!stream) {
        res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(json), ...headers }).end(json);
        return;
      }
      res.writeHead(200, { 'content-type': 'text/event-stream; charset=utf-8', 'cache-control': 'no-cache', ...headers });
      for (const e of events) res.write(e);
      res.end();
    };
    if (hold) {
      held.push(reply);
      process.send?.({ held: held.length });
    } else if (latencyMs > 0) setTimeout(reply, latencyMs);
    else reply();
  });
});
// Thousands of connections held open at once, each kept alive between a run's calls.
server.keepAliveTimeout = 60_000;
server.headersTimeout = 65_000;
server.maxConnections = 100_000;
server.listen(0, '127.0.0.1', () => {
  process.send?.({ port: (server.address() as { port: number }).port });
});
process.on('disconnect', () => process.exit(0));
process.on('message', (m) => {
  if (m !== 'release') return;
  const replies = held;
  held = [];
  for (const reply of replies) reply();
});
