/**
 * Our stream assembly against the official SDK's (its MessageStream, the package.json version): the
 * same recorded streams (test/fixtures/anthropic-streams/*.sse, replayed by a local server in small
 * chunks that split lines and UTF-8 characters) go through `client.messages.stream(…).finalMessage()`
 * and through AnthropicClient, and must come out as the same message: content, stop reason and usage,
 * and the same text and thinking seen as they streamed. Where ours differs on purpose, the test says
 * how and why. Also: the API version and the beta header our transport sends are the SDK's.
 */
import fs from 'node:fs';
import http, { type IncomingHttpHeaders } from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import Anthropic from '@anthropic-ai/sdk';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LlmError } from '../../src/domain/errors.ts';
import { AnthropicClient } from '../../src/llm/anthropic.ts';
import { normaliseUsage } from '../../src/llm/normalise.ts';
import type { LlmRequest, LlmResponse } from '../../src/llm/types.ts';

const FIXTURES = path.join(import.meta.dirname, '..', 'fixtures', 'anthropic-streams');
const API_KEY = 'sk-ant-conformance-0123456789';
/** Bytes per write: small and odd, so events, lines and multi-byte characters are split across chunks. */
const CHUNK_BYTES = 61;

interface Replay {
  url: string;
  /** The headers of every request, in order. */
  headers: IncomingHttpHeaders[];
  /** The fixture the next requests are answered with. */
  serve(fixture: string): void;
  close(): Promise<void>;
}

/** A local Messages API that answers every POST with the recorded stream, as the API sends one. */
async function startReplay(): Promise<Replay> {
  let stream = Buffer.alloc(0);
  const headers: IncomingHttpHeaders[] = [];
  const server = http.createServer((req, res) => {
    headers.push(req.headers);
    req.resume();
    req.on('end', () => {
      res.writeHead(200, { 'content-type': 'text/event-stream; charset=utf-8', 'cache-control': 'no-cache', 'request-id': 'req_replay' });
      void (async () => {
        for (let at = 0; at < stream.length && !res.destroyed; at += CHUNK_BYTES) {
          res.write(stream.subarray(at, at + CHUNK_BYTES));
          await new Promise((resolve) => setImmediate(resolve));
        }
        res.end();
      })();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    headers,
    serve: (fixture) => (stream = fs.readFileSync(path.join(FIXTURES, fixture))),
    async close() {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

let replay: Replay;
beforeAll(async () => {
  replay = await startReplay();
});
afterAll(async () => {
  await replay.close();
});

const request: LlmRequest = {
  model: 'claude-sonnet-4-6',
  maxTokens: 1024,
  system: null,
  messages: [{ role: 'user', content: 'What is the weather in Paris?' }],
  tools: [],
};

const sdkClient = () => new Anthropic({ apiKey: API_KEY, baseURL: replay.url, maxRetries: 0 });

/** The SDK's final message, and the text and thinking it reported as they streamed. */
async function sdkAnswer(fixture: string): Promise<{ message: Anthropic.Message; text: string[]; thinking: string[] }> {
  replay.serve(fixture);
  const text: string[] = [];
  const thinking: string[] = [];
  const stream = sdkClient()
    .messages.stream({
      model: request.model,
      max_tokens: request.maxTokens,
      messages: [{ role: 'user', content: 'What is the weather in Paris?' }],
    })
    .on('text', (delta) => text.push(delta))
    .on('thinking', (delta) => thinking.push(delta));
  return { message: await stream.finalMessage(), text, thinking };
}

/** Ours, streaming, with the text and thinking it reported as they streamed. */
async function ourAnswer(fixture: string): Promise<{ response: LlmResponse; text: string[]; thinking: string[] }> {
  replay.serve(fixture);
  const text: string[] = [];
  const thinking: string[] = [];
  const response = await new AnthropicClient({ apiKey: API_KEY, baseUrl: replay.url, streaming: true }).send(request, {
    onText: (delta, attempt) => text.push(`${attempt}:${delta}`),
    onThinking: (delta, attempt) => thinking.push(`${attempt}:${delta}`),
  });
  // Every delta came in the call's first (and only) attempt.
  const strip = (deltas: string[]) => deltas.map((d) => (expect(d.startsWith('1:')).toBe(true), d.slice(2)));
  return { response, text: strip(text), thinking: strip(thinking) };
}

/** Content as it is stored and replayed (JSON): the SDK's tool input is a getter, with its JSON buffer in a hidden field. */
const asStored = (content: unknown): unknown => JSON.parse(JSON.stringify(content));

describe('stream assembly, against the official SDK', () => {
  it.each(['text.sse', 'tool-use.sse', 'thinking-tool-use.sse', 'redacted-thinking.sse', 'web-search-citations.sse'])(
    '%s: the same content, stop reason and usage, and the same text and thinking as they streamed',
    async (fixture) => {
      const sdk = await sdkAnswer(fixture);
      const ours = await ourAnswer(fixture);
      expect(asStored(ours.response.content)).toStrictEqual(asStored(sdk.message.content));
      expect(ours.response.stopReason).toBe(sdk.message.stop_reason);
      expect(ours.response.usage).toStrictEqual(normaliseUsage(sdk.message.usage, []));
      expect([ours.response.id, ours.response.model]).toEqual([sdk.message.id, sdk.message.model]);
      expect(ours.text).toEqual(sdk.text);
      expect(ours.thinking).toEqual(sdk.thinking);
      expect(ours.response.warnings).toBeUndefined();
      // Thinking, its signature and redacted thinking are sent back to the API as they came: byte for byte.
      const thinkingBlocks = (content: readonly unknown[]) =>
        content.filter((b) => ['thinking', 'redacted_thinking'].includes((b as { type: string }).type)).map((b) => JSON.stringify(b));
      expect(thinkingBlocks(ours.response.content)).toEqual(thinkingBlocks(sdk.message.content));
    },
  );

  it('the fixtures hold what they are named for (so the comparisons above compare something)', async () => {
    const kinds = async (fixture: string) => (await ourAnswer(fixture)).response.content.map((b) => b.type);
    expect(await kinds('tool-use.sse')).toEqual(['text', 'tool_use', 'tool_use']);
    expect(await kinds('thinking-tool-use.sse')).toEqual(['thinking', 'tool_use']);
    expect(await kinds('redacted-thinking.sse')).toEqual(['redacted_thinking', 'thinking', 'text']);
    expect(await kinds('web-search-citations.sse')).toEqual(['text', 'server_tool_use', 'web_search_tool_result', 'text', 'text']);
    const { response } = await ourAnswer('thinking-tool-use.sse');
    expect(response.content[0]).toMatchObject({ signature: expect.stringMatching(/^EqQBCgIYAhIM1gbcDa9GJw.*==$/) });
    expect(response.content[1]).toMatchObject({ input: { location: 'Paris, France', unit: 'celsius' } });
    const web = (await ourAnswer('web-search-citations.sse')).response.content;
    expect(web[1]).toMatchObject({ input: { query: 'weather Paris today' } });
    expect(web[4]!.citations).toHaveLength(2);
  });

  it('unknown-delta.sse: the same, but for the block an unknown delta was for, which ours keeps and the SDK drops', async () => {
    const sdk = await sdkAnswer('unknown-delta.sse');
    const ours = await ourAnswer('unknown-delta.sse');
    // The deliberate difference: the SDK's MessageStream ignores a delta type it does not know, so its
    // block stays as it started, and what the delta brought is lost. Ours merges the delta into the block,
    // field by field as text and thinking deltas are (strings appended, arrays joined, other values
    // replaced), so a later API's answer is stored and replayed whole, as the non-streaming API answers it.
    expect(sdk.message.content[0]).toStrictEqual({ type: 'future_block', summary: '', sources: [], meta: { version: 1 } });
    expect(ours.response.content[0]).toStrictEqual({
      type: 'future_block',
      summary: 'The conversation so far: a weather question.',
      sources: ['turn-1', 'turn-2'],
      meta: { version: 2 },
    });
    // Everything else is the same; the unknown event is skipped by both.
    expect(asStored(ours.response.content.slice(1))).toStrictEqual(asStored(sdk.message.content.slice(1)));
    expect(ours.response.stopReason).toBe(sdk.message.stop_reason);
    expect(ours.response.usage).toStrictEqual(normaliseUsage(sdk.message.usage, []));
    expect(ours.text).toEqual(sdk.text);
    // Said in the answer's warnings (the engine logs them at warn level), by type, without what the
    // event held; once per process: the next answer with the same types says nothing.
    expect(ours.response.warnings).toEqual([
      'the stream sent a delta of a type this client does not know ("summary_delta"): its fields were merged into its block (said once per process)',
      'the stream sent an event of a type this client does not know ("future_event"): skipped (said once per process)',
    ]);
    expect(JSON.stringify(ours.response.warnings)).not.toContain('no client knows yet');
    expect((await ourAnswer('unknown-delta.sse')).response.warnings).toBeUndefined();
  });

  it('error-mid-stream.sse: both fail; ours with a retryable LlmError of the error type, the usage seen kept', async () => {
    const sdkError = await sdkAnswer('error-mid-stream.sse').then(
      () => null,
      (error: unknown) => error,
    );
    expect(sdkError).toBeInstanceOf(Anthropic.APIError);
    expect(sdkError).toMatchObject({ type: 'overloaded_error' });
    const text: string[] = [];
    replay.serve('error-mid-stream.sse');
    const ours = await new AnthropicClient({ apiKey: API_KEY, baseUrl: replay.url, streaming: true })
      .send(request, { onText: (delta) => text.push(delta) })
      .then(
        () => null,
        (error: unknown) => error,
      );
    expect(ours).toBeInstanceOf(LlmError);
    expect(ours).toMatchObject({ status: 529, type: 'overloaded_error', message: 'Overloaded', retryable: true, requestId: 'req_replay' });
    expect((ours as LlmError).usage).toMatchObject({ inputTokens: 512 });
    expect(text).toEqual(['Let me start with']);
  });
});

describe('request headers, against the official SDK', () => {
  it('sends the anthropic-version the installed SDK sends', async () => {
    replay.headers.length = 0;
    await sdkAnswer('text.sse');
    await ourAnswer('text.sse');
    const [sdk, ours] = replay.headers;
    expect(sdk!['anthropic-version']).toMatch(/^\d{4}-\d{2}-\d{2}$/);
    expect(ours!['anthropic-version']).toBe(sdk!['anthropic-version']);
  });

  it("sends betas as the SDK's beta API does: one anthropic-beta header, comma-separated", async () => {
    const betas = ['context-1m-2025-08-07', 'files-api-2025-04-14'];
    replay.headers.length = 0;
    replay.serve('text.sse');
    await sdkClient()
      .beta.messages.stream({ model: request.model, max_tokens: 16, messages: [{ role: 'user', content: 'hi' }], betas })
      .finalMessage();
    await new AnthropicClient({ apiKey: API_KEY, baseUrl: replay.url, betas }).send(request);
    const [sdk, ours] = replay.headers;
    expect(sdk!['anthropic-beta']).toBe('context-1m-2025-08-07,files-api-2025-04-14');
    expect(ours!['anthropic-beta']).toBe(sdk!['anthropic-beta']);
  });
});
