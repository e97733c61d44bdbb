/**
 * What AnthropicClient's kept-alive connections (one pool per client) are answerable for, against
 * the fake Messages API, which counts the connections it accepts: calls share connections, a
 * connection the server closed while idle fails no call, and a connection whose answer was abandoned
 * (aborted, timed out, refused by the caller's callback) is closed rather than reused.
 */
import { describe, expect, it, vi } from 'vitest';
import { AnthropicClient } from '../../src/llm/anthropic.ts';
import type { LlmRequest } from '../../src/llm/types.ts';
import { fake, useFakeAnthropic } from '../support/fake-anthropic.ts';
import { failure } from '../support/llm-failure.ts';

const API_KEY = 'sk-ant-test-connections-0123456789';
const server = useFakeAnthropic(API_KEY);

const ask: LlmRequest = {
  model: 'claude-sonnet-4-6',
  maxTokens: 256,
  system: 'Be brief.',
  messages: [{ role: 'user', content: 'hi' }],
  tools: [],
};
const client = (streaming: boolean, timeoutMs?: number) =>
  new AnthropicClient({ apiKey: API_KEY, baseUrl: server.url, streaming, timeoutMs });
const text = async (promise: Promise<{ content: unknown[] }>) => ((await promise).content[0] as { text: string }).text;
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe.each([
  ['streamed', true],
  ['not streamed', false],
])('kept-alive connections, %s', (_mode, streaming) => {
  it('sends many calls one after another over one connection, error answers included', async () => {
    const anthropic = client(streaming);
    for (let i = 0; i < 20; i++) {
      if (i % 5 === 4) server.error(529, 'overloaded_error', 'Overloaded');
      else server.text(`answer ${i}`);
    }
    for (let i = 0; i < 20; i++) {
      if (i % 5 === 4) expect(await failure(anthropic.send(ask))).toMatchObject({ status: 529 });
      else expect(await text(anthropic.send(ask))).toBe(`answer ${i}`);
    }
    expect(server.requests).toHaveLength(20);
    expect(server.connections()).toBe(1);
  });

  // 300: more than the 256 free sockets Node's Agent keeps by default (it destroyed the rest).
  it.each([6, 300])('opens one connection per call running at once (%i), and reuses every one for the next wave', async (calls) => {
    const anthropic = client(streaming);
    server.fallback(fake.text('same'));
    await Promise.all(Array.from({ length: calls }, () => anthropic.send(ask)));
    await Promise.all(Array.from({ length: calls }, () => anthropic.send(ask)));
    expect(server.requests).toHaveLength(2 * calls);
    expect(server.connections()).toBe(calls);
  });

  it('sends a call again, on a new connection, when the server drops it on a kept-alive one: the call does not fail', async () => {
    const anthropic = client(streaming);
    server.text('first').hangUp().text('second');
    expect(await text(anthropic.send(ask))).toBe('first');
    // The server closing an idle connection just as the next request goes out on it looks like this.
    expect(await text(anthropic.send(ask))).toBe('second');
    expect(server.requests.map((r) => r.status)).toEqual([200, null, 200]);
    expect(server.connections()).toBe(2);
    // Sent again whole (its text is made again for the resend): the same body, the same length.
    expect(server.requests[2]!.body).toEqual(server.requests[0]!.body);
    expect(server.requests[2]!.headers['content-length']).toBe(server.requests[0]!.headers['content-length']);
  });

  it('sends it again only after a kept-alive connection: dropped on the new one too, the call fails as a connection error', async () => {
    const anthropic = client(streaming);
    server.text('first').hangUp().hangUp().text('unused');
    await anthropic.send(ask);
    const error = await failure(anthropic.send(ask));
    expect(error).toMatchObject({ status: -1, type: 'connection_error', retryable: true });
    expect(error.message).toMatch(/socket hang up/);
    expect(server.requests).toHaveLength(3);
    expect(server.pending()).toBe(1);
  });

  it('uses a new connection when the server closed the idle one between two calls, at once or a while before', async () => {
    const anthropic = client(streaming);
    server.text('a').text('b').text('c');
    expect(await text(anthropic.send(ask))).toBe('a');
    server.closeIdleConnections();
    expect(await text(anthropic.send(ask))).toBe('b');
    server.closeIdleConnections();
    await sleep(50); // kept: "a while before" is the scenario, the close seen by the client before its next call
    expect(await text(anthropic.send(ask))).toBe('c');
    expect(server.requests.map((r) => r.status)).toEqual([200, 200, 200]);
    expect(server.connections()).toBe(3);
  });

  it("closes the connection of a call aborted before its answer's headers, and the next call opens another", async () => {
    const anthropic = client(streaming);
    server.delay(5_000).text('too late').text('next');
    const controller = new AbortController();
    setTimeout(() => controller.abort(), 100);
    expect(await failure(anthropic.send(ask, { signal: controller.signal }))).toMatchObject({ type: 'aborted' });
    await vi.waitFor(() => expect(server.requests[0]!.aborted).toBe(true));
    expect(await text(anthropic.send(ask))).toBe('next');
    expect(server.connections()).toBe(2);
  });

  it('closes the connection of a call that timed out waiting for its headers, and the next call opens another', async () => {
    const anthropic = client(streaming, 200);
    server.delay(5_000).text('too late').text('next');
    expect(await failure(anthropic.send(ask))).toMatchObject({ type: 'timeout' });
    await vi.waitFor(() => expect(server.requests[0]!.aborted).toBe(true));
    expect(await text(anthropic.send(ask))).toBe('next');
    expect(server.connections()).toBe(2);
  });

  it('closes the connection of an answer cut off mid-body, and the next call opens another', async () => {
    const anthropic = client(streaming);
    server.enqueue(fake.cut(fake.text('one two three four five six'), 2)).text('next');
    expect(await failure(anthropic.send(ask))).toMatchObject({ status: -1, type: 'incomplete_response' });
    expect(await text(anthropic.send(ask))).toBe('next');
    expect(server.connections()).toBe(2);
  });
});

describe('kept-alive connections, streamed', () => {
  it('closes the connection when the caller aborts in the middle of the answer; the next call opens another', async () => {
    const anthropic = client(true);
    server.enqueue({ ...fake.text('one two three four five six'), stream: { deltaDelayMs: 100 } }).text('next');
    const controller = new AbortController();
    let texts = 0;
    const error = await failure(anthropic.send(ask, { signal: controller.signal, onText: () => ++texts === 2 && controller.abort() }));
    expect(error).toMatchObject({ type: 'aborted' });
    await vi.waitFor(() => expect(server.requests[0]!.aborted).toBe(true));
    expect(await text(anthropic.send(ask))).toBe('next');
    expect(server.connections()).toBe(2);
  });

  it("closes the connection when the caller's callback throws in the middle of the answer; the next call opens another", async () => {
    const anthropic = client(true);
    server.enqueue({ ...fake.text('one two three four five six'), stream: { deltaDelayMs: 50 } }).text('next');
    const bug = new RangeError('caller bug');
    const error = await anthropic
      .send(ask, {
        onText: () => {
          throw bug;
        },
      })
      .catch((e: unknown) => e);
    expect(error).toBe(bug);
    await vi.waitFor(() => expect(server.requests[0]!.aborted).toBe(true));
    expect(await text(anthropic.send(ask))).toBe('next');
    expect(server.connections()).toBe(2);
  });
});
