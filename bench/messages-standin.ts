/**
 * A stand-in of the Messages API for `npm run bench`, run as a separate process so its work does not
 * share the worker's event loop. Four turns of a text and a tool call, then an answer; streamed
 * (`stream: true`, text in DELTAS pieces DELTA_MS apart) or whole. Prints {"port": n} when it listens.
 */
import http from 'node:http';

const DELTAS = Number(process.env.DELTAS ?? 10);
const DELTA_MS = Number(process.env.DELTA_MS ?? 0);
/** The answer's length in tokens (about four characters each). */
const ANSWER_TOKENS = Number(process.env.ANSWER_TOKENS ?? 50);
const TOOL_TURNS = Number(process.env.TOOL_TURNS ?? 4);
let n = 0;

const sse = (res: http.ServerResponse, type: string, data: object) =>
  res.write(`event: ${type}\ndata: ${JSON.stringify({ type, ...data })}\n\n`);
const pause = (ms: number) => (ms > 0 ? new Promise((r) => setTimeout(r, ms)) : Promise.resolve());

function pieces(text: string, count: number): string[] {
  const size = Math.ceil(text.length / count);
  return Array.from({ length: Math.ceil(text.length / size) }, (_, i) => text.slice(i * size, (i + 1) * size));
}

http
  .createServer((req, res) => {
    let body = '';
    req.on('data', (c) => (body += c));
    req.on('end', async () => {
      const request = JSON.parse(body) as { stream?: boolean; messages: { role: string }[]; model: string };
      const turns = request.messages.filter((m) => m.role === 'assistant').length;
      const tool = turns < TOOL_TURNS;
      const text = tool ? 'Let me look that up.' : 'word '.repeat(ANSWER_TOKENS).slice(0, ANSWER_TOKENS * 4);
      const toolUse = { type: 'tool_use', id: `toolu_${process.pid}_${++n}`, name: 'noop', input: {} };
      const usage = { input_tokens: 100, output_tokens: tool ? 20 : ANSWER_TOKENS };
      const message = { id: `msg_${n}`, type: 'message', role: 'assistant', model: request.model, stop_sequence: null };
      if (!request.stream) {
        const content = [{ type: 'text', text }, ...(tool ? [toolUse] : [])];
        res.writeHead(200, { 'content-type': 'application/json', 'request-id': `req_${n}` });
        res.end(JSON.stringify({ ...message, content, stop_reason: tool ? 'tool_use' : 'end_turn', usage }));
        return;
      }
      res.writeHead(200, { 'content-type': 'text/event-stream', 'request-id': `req_${n}` });
      sse(res, 'message_start', {
        message: { ...message, content: [], stop_reason: null, usage: { input_tokens: 100, output_tokens: 1 } },
      });
      sse(res, 'content_block_start', { index: 0, content_block: { type: 'text', text: '' } });
      for (const piece of pieces(text, tool ? 2 : DELTAS)) {
        await pause(DELTA_MS);
        sse(res, 'content_block_delta', { index: 0, delta: { type: 'text_delta', text: piece } });
      }
      sse(res, 'content_block_stop', { index: 0 });
      if (tool) {
        sse(res, 'content_block_start', { index: 1, content_block: { ...toolUse, input: {} } });
        sse(res, 'content_block_delta', { index: 1, delta: { type: 'input_json_delta', partial_json: '{}' } });
        sse(res, 'content_block_stop', { index: 1 });
      }
      sse(res, 'message_delta', {
        delta: { stop_reason: tool ? 'tool_use' : 'end_turn', stop_sequence: null },
        usage: { output_tokens: usage.output_tokens },
      });
      sse(res, 'message_stop', {});
      res.end();
    });
  })
  .listen(0, '127.0.0.1', function (this: http.Server) {
    console.log(JSON.stringify({ port: (this.address() as { port: number }).port }));
  });
