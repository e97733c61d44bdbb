/**
 * The chaos suite's model: a stand-in for the Messages API (POST /v1/messages, streamed or not) that
 * plays the same short agent for every run and counts what it was asked and what it billed, per run.
 * Each run's input names it (`chaos run <n>`, the key of the counts); the turn is the number of assistant messages so far:
 *   turn 0: two tool calls at once · turn 1: one tool call · turn 2: the answer.
 * Tool-use ids are fresh at every call, as a real model's are: a repeated call asks for other ids.
 */
import { randomBytes } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { encode, messageEvents } from '../../test/support/fake-anthropic-sse.ts';

export const MODEL_TURNS = 3;
export const TOOL_NAME = 'effect';

export interface ModelCounts {
  /** Replies sent whole, per run input: the calls paid for. */
  calls: Map<string, number>;
  /** input + output tokens of those replies, per run input (what a run's tokensUsed can be at most). */
  billed: Map<string, number>;
}

export interface ChaosModel extends ModelCounts {
  url: string;
  close(): Promise<void>;
}

const usageOf = (turn: number) => ({
  input_tokens: 100 + 50 * turn,
  output_tokens: 20 + turn,
  cache_creation_input_tokens: 0,
  cache_read_input_tokens: 0,
});

function reply(turn: number, input: string): Record<string, unknown> {
  const toolUse = (i: number) => ({ type: 'tool_use', id: `toolu_${randomBytes(8).toString('hex')}`, name: TOOL_NAME, input: { turn, i } });
  const content =
    turn === 0
      ? [{ type: 'text', text: 'Two things at once.' }, toolUse(0), toolUse(1)]
      : turn === 1
        ? [toolUse(0)]
        : [{ type: 'text', text: `done: ${input}` }];
  return {
    id: `msg_${randomBytes(8).toString('hex')}`,
    type: 'message',
    role: 'assistant',
    model: 'chaos-model',
    content,
    stop_reason: turn < 2 ? 'tool_use' : 'end_turn',
    stop_sequence: null,
    usage: usageOf(turn),
  };
}

/** `latencyMs`: a pause before the answer and between streamed events (a kill has something to land in). */
export async function startChaosModel(latencyMs: number): Promise<ChaosModel> {
  const calls = new Map<string, number>();
  const billed = new Map<string, number>();
  const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', async () => {
      const body = JSON.parse(Buffer.concat(chunks).toString('utf8')) as {
        messages: { role: string; content: unknown }[];
        stream?: boolean;
      };
      const first = body.messages[0]?.content;
      const input = /chaos run \d+/.exec(typeof first === 'string' ? first : JSON.stringify(first))?.[0] ?? '?';
      const turn = Math.min(body.messages.filter((m) => m.role === 'assistant').length, MODEL_TURNS - 1);
      const message = reply(turn, input);
      const u = usageOf(turn);
      // Counted once the whole reply is out: a reply cut by a killed client was never paid for whole.
      res.on('finish', () => {
        calls.set(input, (calls.get(input) ?? 0) + 1);
        billed.set(input, (billed.get(input) ?? 0) + u.input_tokens + u.output_tokens);
      });
      await sleep(latencyMs * Math.random());
      if (!body.stream) {
        res.writeHead(200, { 'content-type': 'application/json', 'request-id': `req_${randomBytes(6).toString('hex')}` });
        res.end(JSON.stringify(message));
        return;
      }
      res.writeHead(200, { 'content-type': 'text/event-stream', 'request-id': `req_${randomBytes(6).toString('hex')}` });
      for (const e of messageEvents(message)) {
        if (res.destroyed) return;
        res.write(encode(e));
        if (e.event === 'content_block_delta') await sleep(latencyMs / 10);
      }
      res.end();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    calls,
    billed,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
