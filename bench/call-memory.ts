/**
 * Memory per model call in flight: `CALLS` calls (default 10,000) of the Anthropic provider at once,
 * streamed, to a local server that holds each answer's headers back for a few seconds; the live heap
 * (after a full collection) with every call waiting, less the heap with the same connections idle,
 * per call. What a worker holds for each run that waits on the model, before the runtime's own state.
 *
 * `npx tsx --expose-gc bench/call-memory.ts [src/llm/anthropic.ts of another checkout, to compare]`
 */
import { fork } from 'node:child_process';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import type { Message } from '../src/domain/types.ts';
import { encode, messageEvents } from '../test/support/fake-anthropic-sse.ts';

process.setSourceMapsEnabled(false);
const serving = process.argv[2] === '--server';
const gc = (globalThis as { gc?: () => void }).gc;
if (!gc && !serving) throw new Error('run with --expose-gc');
const CALLS = Number(process.env.CALLS ?? 10_000);
const HOLD_MS = 3_000;
const module = (!serving && process.argv[2]) || path.join(import.meta.dirname, '../src/llm/anthropic.ts');

// The streamed answer, as the stand-ins of the tests and the agent-loop bench write it.
const answer = messageEvents({
  id: 'msg_1',
  type: 'message',
  role: 'assistant',
  model: 'm',
  content: [{ type: 'text', text: 'ok' }],
  stop_reason: 'end_turn',
  stop_sequence: null,
  usage: { input_tokens: 1, output_tokens: 1 },
})
  .map(encode)
  .join('');

// The server is a process of its own (as the model's API is): its sockets and buffers are not counted.
if (serving) {
  const server = http.createServer((req, res) => {
    req.resume();
    req.on('end', () => setTimeout(() => res.writeHead(200, { 'content-type': 'text/event-stream' }).end(answer), HOLD_MS));
  });
  server.keepAliveTimeout = 60_000;
  server.listen({ port: 0, host: '127.0.0.1', backlog: 4096 }, () => process.send!((server.address() as AddressInfo).port));
} else {
  await measure();
}

async function measure(): Promise<void> {
  const standin = fork(fileURLToPath(import.meta.url), ['--server'], {
    execArgv: ['--import', 'tsx'],
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
  const port = await new Promise<number>((resolve) => standin.once('message', (m) => resolve(m as number)));
  const { AnthropicClient }: typeof import('../src/llm/anthropic.ts') = await import(pathToFileURL(path.resolve(module)).href);
  const client = new AnthropicClient({ apiKey: 'sk-bench', baseUrl: `http://127.0.0.1:${port}`, streaming: true });
  // A conversation of a few turns, as the agent-loop bench's runs send (~1.5 KB of JSON).
  const messages: Message[] = [{ role: 'user', content: 'bench run 1234' }];
  for (let k = 1; k <= 4; k++) {
    messages.push({
      role: 'assistant',
      content: [
        { type: 'text', text: 'Let me look that up.' },
        { type: 'tool_use', id: `toolu_${k}`, name: 'lookup', input: { key: `item-${k}` } },
      ],
    });
    messages.push({ role: 'user', content: [{ type: 'tool_result', tool_use_id: `toolu_${k}`, content: `value of item-${k}` }] });
  }
  const request = {
    model: 'm',
    maxTokens: 1024,
    system: 'You are a bench.',
    messages,
    tools: [{ name: 'lookup', description: 'Looks a key up.', input_schema: { type: 'object' } }],
  };
  /** `CALLS` calls at once, started 500 at a time (a burst of 10,000 connects overflows the listen queue). */
  async function wave(): Promise<{ all: Promise<unknown> }> {
    const calls: Promise<unknown>[] = [];
    for (let i = 0; i < CALLS; i += 500) {
      for (let j = i; j < Math.min(CALLS, i + 500); j++) calls.push(client.send(request));
      await new Promise((r) => setTimeout(r, 20));
    }
    return { all: Promise.all(calls) }; // wrapped: an async function would wait for a promise it returns
  }

  await (
    await wave()
  ).all; // opens one connection per call; they stay for the next wave
  gc!();
  const idle = process.memoryUsage().heapUsed;
  const calls = await wave();
  await new Promise((r) => setTimeout(r, HOLD_MS / 2));
  gc!();
  const waiting = process.memoryUsage().heapUsed;
  await calls.all;
  console.log(
    `${CALLS} calls waiting: ${((waiting - idle) / 2 ** 20).toFixed(1)} MB more live heap than idle, ${Math.round((waiting - idle) / CALLS)} B per call`,
  );
  standin.kill();
  process.exit(0);
}
