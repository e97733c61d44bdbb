/**
 * The Messages API stand-in of bench/held-calls.ts: it answers nothing until its parent says `release`,
 * then answers every call it holds at once, streamed, as bench/agent-loop-standin.ts does (a tool call
 * for each of the first five answers of a conversation, text for the sixth). Tells its parent `{ port }`
 * once it listens and `{ held }` after each call it takes.
 */
import http from 'node:http';
import { encode, messageEvents } from '../test/support/fake-anthropic-sse.ts';

const ASSISTANT = '"role":"assistant"';
const answersIn = (body: string) => body.split(ASSISTANT).length - 1;

let held: { res: http.ServerResponse; turn: number }[] = [];
const server = http.createServer((req, res) => {
  const chunks: Buffer[] = [];
  req.on('data', (c: Buffer) => chunks.push(c));
  req.on('end', () => {
    held.push({ res, turn: answersIn(Buffer.concat(chunks).toString()) });
    process.send!({ held: held.length });
  });
});
server.keepAliveTimeout = 600_000;
server.listen(0, '127.0.0.1', () => process.send!({ port: (server.address() as { port: number }).port }));

process.on('message', (m) => {
  if (m !== 'release') return;
  const calls = held;
  held = [];
  for (const { res, turn } of calls) {
    const done = turn >= 5;
    const message = {
      id: `msg_${turn}`,
      type: 'message',
      role: 'assistant',
      model: 'bench-model',
      content: done
        ? [{ type: 'text', text: 'All done.' }]
        : [
            { type: 'text', text: 'Let me look that up.' },
            { type: 'tool_use', id: `toolu_${turn + 1}`, name: 'lookup', input: { key: `item-${turn + 1}` } },
          ],
      stop_reason: done ? 'end_turn' : 'tool_use',
      stop_sequence: null,
      usage: { input_tokens: 400, output_tokens: 30, cache_creation_input_tokens: 0, cache_read_input_tokens: 0 },
    };
    res.writeHead(200, { 'content-type': 'text/event-stream; charset=utf-8', 'request-id': 'req_held' });
    for (const event of messageEvents(message)) res.write(encode(event));
    res.end();
  }
});
