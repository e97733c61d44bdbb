/**
 * AnthropicClient's extras against the fake Messages API: thinking text as it streams, a caller's
 * own headers and betas (`anthropic({ headers, betas })`, ANTHROPIC_BETAS), the proxy of the
 * environment (a real HTTP CONNECT proxy in front of the fake API; NO_PROXY; credentials that never
 * show), and blocks of kinds the client does not know, kept and sent back as they came.
 */
import http, { type IncomingHttpHeaders } from 'node:http';
import https from 'node:https';
import net, { type AddressInfo, type Socket } from 'node:net';
import tls from 'node:tls';
import selfsigned from 'selfsigned';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { loadConfig } from '../../src/config/environment.ts';
import { ConfigError } from '../../src/domain/errors.ts';
import { AnthropicClient } from '../../src/llm/anthropic.ts';
import { anthropic } from '../../src/llm/factories.ts';
import { createProvider } from '../../src/llm/index.ts';
import type { LlmRequest } from '../../src/llm/types.ts';
import { storableContent } from '../../src/core/storable.ts';
import { fake, useFakeAnthropic } from '../support/fake-anthropic.ts';
import { failure } from '../support/llm-failure.ts';

const API_KEY = 'sk-ant-test-extras-0123456789';
const server = useFakeAnthropic(API_KEY);

const ask: LlmRequest = {
  model: 'claude-sonnet-4-6',
  maxTokens: 256,
  system: null,
  messages: [{ role: 'user', content: 'hi' }],
  tools: [],
};
const client = (streaming = true, more: { baseUrl?: string } = {}) =>
  new AnthropicClient({ apiKey: API_KEY, baseUrl: more.baseUrl ?? server.url, streaming });

afterEach(() => {
  vi.unstubAllEnvs();
});

describe('thinking as it streams', () => {
  const thinkingReply = () =>
    fake.reply({
      content: [
        { type: 'thinking', thinking: 'First this, then that.', signature: 'c2lnbmF0dXJl' },
        { type: 'text', text: 'The answer.' },
      ],
    });

  it('reports thinking deltas to onThinking and text deltas to onText, numbered by attempt, and stores both blocks whole', async () => {
    server.enqueue(thinkingReply());
    const seen: string[] = [];
    const response = await client().send(ask, {
      onThinking: (text, attempt) => seen.push(`thinking ${attempt}:${text}`),
      onText: (text, attempt) => seen.push(`text ${attempt}:${text}`),
    });
    expect(seen).toEqual([
      'thinking 1:First ',
      'thinking 1:this, ',
      'thinking 1:then ',
      'thinking 1:that.',
      'text 1:The ',
      'text 1:answer.',
    ]);
    expect(response.content).toEqual([
      { type: 'thinking', thinking: 'First this, then that.', signature: 'c2lnbmF0dXJl' },
      { type: 'text', text: 'The answer.' },
    ]);
  });

  it("passes the caller's own failure in onThinking through unchanged, not as the provider's, and closes the stream", async () => {
    server.enqueue({ ...thinkingReply(), stream: { deltaDelayMs: 20 } });
    const own = new Error('the caller broke');
    const error = await client()
      .send(ask, {
        onThinking: () => {
          throw own;
        },
      })
      .catch((e: unknown) => e);
    expect(error).toBe(own);
    await vi.waitFor(() => expect(server.requests[0]!.aborted).toBe(true));
  });
});

describe('headers and betas', () => {
  it('anthropic({ headers, betas }) sends them with every request, beside its own headers', async () => {
    server.text('a').text('b');
    const llm = anthropic({
      apiKey: API_KEY,
      baseUrl: server.url,
      maxAttempts: 1,
      headers: { 'X-Gateway-Route': 'team-a', 'cf-aig-metadata': '{"run":"r1"}' },
      betas: ['context-1m-2025-08-07', 'files-api-2025-04-14'],
    });
    await llm.send(ask);
    await llm.send(ask);
    for (const request of server.requests) {
      expect(request.headers).toMatchObject({
        'x-gateway-route': 'team-a',
        'cf-aig-metadata': '{"run":"r1"}',
        'anthropic-beta': 'context-1m-2025-08-07,files-api-2025-04-14',
        authorization: `Bearer ${API_KEY}`,
      });
      expect(request.invalid).toBeNull();
    }
  });

  it('anthropic() refuses a header the transport owns, or anthropic-beta beside betas, with a ConfigError naming it (not its value)', () => {
    const make = (headers: Record<string, string>, betas?: string[]) => () => anthropic({ apiKey: API_KEY, headers, betas });
    expect(make({ 'X-Api-Key': 'sk-ant-other-secret' })).toThrow(ConfigError);
    expect(make({ 'X-Api-Key': 'sk-ant-other-secret' })).toThrow(
      'anthropic: headers: "X-Api-Key" is set by the client itself and cannot be given',
    );
    expect(make({ 'X-Api-Key': 'sk-ant-other-secret' })).not.toThrow(/other-secret/);
    expect(make({ 'anthropic-version': '2023-06-01' })).toThrow('anthropic: headers: "anthropic-version" is set by the client itself');
    expect(make({ 'anthropic-beta': 'a' }, ['b'])).toThrow('anthropic: headers: "anthropic-beta" cannot be given with betas');
    expect(make({ 'anthropic-beta': 'a' })).not.toThrow();
  });

  it("ANTHROPIC_BETAS (comma-separated) is the beta header of the runtime's own client", async () => {
    const env = { LLM_PROVIDER: 'anthropic', ANTHROPIC_API_KEY: API_KEY, ANTHROPIC_BASE_URL: server.url };
    const config = loadConfig({ ...env, ANTHROPIC_BETAS: ' context-1m-2025-08-07 ,, files-api-2025-04-14 ' });
    expect(config.anthropicBetas).toEqual(['context-1m-2025-08-07', 'files-api-2025-04-14']);
    server.text('a').text('b');
    await createProvider(config).send(ask);
    await createProvider(loadConfig(env)).send(ask);
    expect(server.requests[0]!.headers['anthropic-beta']).toBe('context-1m-2025-08-07,files-api-2025-04-14');
    expect(server.requests[1]!.headers).not.toHaveProperty('anthropic-beta');
    expect(() => loadConfig({ ...env, ANTHROPIC_BETAS: 'one, two words' })).toThrow(
      'invalid configuration: ANTHROPIC_BETAS: must be beta names separated by commas',
    );
  });
});

/** What a CONNECT proxy saw: each tunnel asked for, with the credentials it came with. */
interface Tunnel {
  target: string;
  authorization: string | null;
}

interface TestProxy {
  url: string;
  port: number;
  tunnels: Tunnel[];
  /** Requests sent to the proxy as a forward proxy (absolute URLs): none, when the client tunnels. */
  forwarded: number;
  close(): Promise<void>;
}

/**
 * A real HTTP proxy that only tunnels (CONNECT), as corporate proxies do for https. With `credentials`,
 * a CONNECT without them (Basic) gets 407. `refuseWith` answers every CONNECT with that status.
 */
async function startProxy(opts: { credentials?: string; refuseWith?: number; tls?: https.ServerOptions } = {}): Promise<TestProxy> {
  const tunnels: Tunnel[] = [];
  const sockets = new Set<Socket>();
  let forwarded = 0;
  const onRequest = (_req: http.IncomingMessage, res: http.ServerResponse) => {
    forwarded++;
    res.writeHead(400).end('this proxy only tunnels');
  };
  // With `tls`, an https:// proxy: the client speaks TLS with it, then TLS with the endpoint inside.
  const proxy = opts.tls ? https.createServer(opts.tls, onRequest) : http.createServer(onRequest);
  proxy.on(opts.tls ? 'secureConnection' : 'connection', (socket: Socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
  });
  proxy.on('connect', (req: http.IncomingMessage, client: Socket, head: Buffer) => {
    const authorization = req.headers['proxy-authorization'] ?? null;
    tunnels.push({ target: req.url ?? '', authorization });
    const expected = opts.credentials ? `Basic ${Buffer.from(opts.credentials).toString('base64')}` : null;
    if (opts.refuseWith || (expected && authorization !== expected)) {
      const status = opts.refuseWith ?? 407;
      client.end(`HTTP/1.1 ${status} Refused\r\nproxy-authenticate: Basic realm="test"\r\ncontent-length: 0\r\n\r\n`);
      return;
    }
    const { hostname, port } = new URL(`http://${req.url}`);
    const upstream = net.connect(Number(port), hostname.replace(/^\[(.*)\]$/, '$1'), () => {
      client.write('HTTP/1.1 200 Connection Established\r\n\r\n');
      if (head.length > 0) upstream.write(head);
      upstream.pipe(client);
      client.pipe(upstream);
    });
    sockets.add(upstream);
    upstream.on('close', () => sockets.delete(upstream));
    upstream.on('error', () => client.destroy());
    client.on('error', () => upstream.destroy());
  });
  await new Promise<void>((resolve) => proxy.listen(0, '127.0.0.1', resolve));
  const { port } = proxy.address() as AddressInfo;
  return {
    url: `${opts.tls ? 'https://localhost' : 'http://127.0.0.1'}:${port}`,
    port,
    tunnels,
    get forwarded() {
      return forwarded;
    },
    async close() {
      for (const socket of sockets) socket.destroy();
      await new Promise<void>((resolve) => proxy.close(() => resolve()));
    },
  };
}

describe('through the proxy of the environment', () => {
  const apiHost = () => new URL(server.url).host;

  it.each([
    ['streamed', true],
    ['not streamed', false],
  ])('HTTP_PROXY: an http endpoint is reached through a CONNECT tunnel, kept alive from call to call (%s)', async (_mode, streaming) => {
    const proxy = await startProxy();
    try {
      vi.stubEnv('HTTP_PROXY', proxy.url);
      const llm = client(streaming);
      server.text('one').text('two').text('three');
      const answers = [];
      for (let i = 0; i < 3; i++) answers.push((await llm.send(ask)).content);
      expect(answers).toEqual([[{ type: 'text', text: 'one' }], [{ type: 'text', text: 'two' }], [{ type: 'text', text: 'three' }]]);
      // One tunnel, one connection at the API, three requests: the tunnel is the kept-alive connection.
      expect(proxy.tunnels).toEqual([{ target: apiHost(), authorization: null }]);
      expect(proxy.forwarded).toBe(0);
      expect(server.connections()).toBe(1);
      expect(server.requests.map((r) => [r.path, r.headers.host, r.invalid])).toEqual(Array(3).fill(['/v1/messages', apiHost(), null]));
    } finally {
      await proxy.close();
    }
  });

  it("sends the proxy URL's user and password as Proxy-Authorization to the proxy only, never to the API", async () => {
    const proxy = await startProxy({ credentials: 'proxy-user:p@ss:word' });
    try {
      vi.stubEnv('http_proxy', `http://proxy-user:p%40ss%3Aword@127.0.0.1:${proxy.port}`);
      server.text('through');
      expect((await client().send(ask)).content).toEqual([{ type: 'text', text: 'through' }]);
      expect(proxy.tunnels).toEqual([
        { target: apiHost(), authorization: `Basic ${Buffer.from('proxy-user:p@ss:word').toString('base64')}` },
      ]);
      expect(server.requests[0]!.headers).not.toHaveProperty('proxy-authorization');
    } finally {
      await proxy.close();
    }
  });

  it('fails without retrying when the proxy refuses the credentials (407), saying so without the password or the proxy URL', async () => {
    const proxy = await startProxy({ credentials: 'proxy-user:right' });
    try {
      vi.stubEnv('HTTP_PROXY', `http://proxy-user:wrong-hunter2@127.0.0.1:${proxy.port}`);
      const error = await failure(client().send(ask));
      expect(error).toMatchObject({ status: 0, type: 'proxy_error', retryable: false });
      expect(error.message).toBe(
        `the proxy refused a tunnel to ${apiHost()} (HTTP 407): it wants credentials, given as user:password in the proxy URL`,
      );
      expect(JSON.stringify({ message: error.message, stack: error.stack })).not.toMatch(/hunter2|wrong/);
      expect(server.requests).toHaveLength(0);
    } finally {
      await proxy.close();
    }
  });

  it('a proxy that cannot reach the API (502) or cannot be reached fails retryably, without the password', async () => {
    const proxy = await startProxy({ refuseWith: 502 });
    try {
      vi.stubEnv('HTTP_PROXY', `http://user:hunter2@127.0.0.1:${proxy.port}`);
      expect(await failure(client().send(ask))).toMatchObject({ status: -1, type: 'proxy_error', retryable: true });
    } finally {
      await proxy.close();
    }
    // Nothing listens there any more.
    vi.stubEnv('HTTP_PROXY', `http://user:hunter2@127.0.0.1:${proxy.port}`);
    const error = await failure(client().send(ask));
    expect(error).toMatchObject({ status: -1, type: 'connection_error', retryable: true });
    expect(error.message).toMatch(/ECONNREFUSED/);
    expect(error.message).not.toMatch(/hunter2/);
  });

  it.each([
    ['NO_PROXY', '127.0.0.1'],
    ['no_proxy', 'localhost, 127.0.0.1'],
    ['NO_PROXY', '*'],
    ['NO_PROXY', '127.0.0.0/8'],
  ])('%s=%s: the endpoint is reached directly, the proxy never asked', async (variable, value) => {
    const proxy = await startProxy();
    try {
      vi.stubEnv('HTTP_PROXY', proxy.url);
      vi.stubEnv(variable, value);
      server.text('direct');
      expect((await client().send(ask)).content).toEqual([{ type: 'text', text: 'direct' }]);
      expect(proxy.tunnels).toEqual([]);
      expect(server.requests).toHaveLength(1);
    } finally {
      await proxy.close();
    }
  });

  it('NO_PROXY as host:port exempts that port only; HTTPS_PROXY alone is not used for an http endpoint', async () => {
    const proxy = await startProxy();
    try {
      vi.stubEnv('HTTP_PROXY', proxy.url);
      vi.stubEnv('NO_PROXY', apiHost());
      server.text('direct');
      await client().send(ask);
      expect(proxy.tunnels).toHaveLength(0);
      vi.stubEnv('NO_PROXY', '127.0.0.1:1');
      server.text('a');
      await client().send(ask);
      expect(proxy.tunnels).toHaveLength(1);
      vi.unstubAllEnvs();
      vi.stubEnv('HTTPS_PROXY', proxy.url);
      server.text('b');
      await client().send(ask);
      expect(proxy.tunnels).toHaveLength(1);
    } finally {
      await proxy.close();
    }
  });

  it('a proxy variable that cannot be used fails the client as it is made, naming the variable only', () => {
    vi.stubEnv('HTTP_PROXY', 'socks5://user:hunter2@127.0.0.1:1080');
    const make = () => anthropic({ apiKey: API_KEY, baseUrl: server.url });
    expect(make).toThrow(ConfigError);
    expect(make).toThrow('anthropic: HTTP_PROXY names a socks5:// proxy: only http:// and https:// proxies are supported');
    expect(make).not.toThrow(/hunter2/);
  });

  /** The CAs TLS trusts by default can be changed on Node 22.19+ and 24.5+ (newer than the @types/node here). */
  const trust = tls as unknown as {
    getCACertificates?(type: 'default'): string[];
    setDefaultCACertificates?(certificates: string[]): void;
  };
  // Trusting a certificate at run time (tls.setDefaultCACertificates) came with Node 22.19 and 24.5.
  const canTrust = typeof trust.setDefaultCACertificates === 'function';

  /**
   * A certificate for localhost made for this test (no private key is kept in the repository), trusted
   * by TLS for the rest of the test.
   */
  const localhostCertificate = async (): Promise<{ key: string; cert: string }> => {
    const made = await selfsigned.generate([{ name: 'commonName', value: 'localhost' }], {
      keyType: 'ec',
      algorithm: 'sha256',
      extensions: [{ name: 'subjectAltName', altNames: [{ type: 2, value: 'localhost' }] }],
    });
    trust.setDefaultCACertificates!([...trust.getCACertificates!('default'), made.cert]);
    return { key: made.private, cert: made.cert };
  };

  it.skipIf(!canTrust)(
    'HTTPS_PROXY: an https endpoint is reached through the tunnel, TLS with the endpoint itself, kept alive',
    async () => {
      const defaults = trust.getCACertificates!('default');
      const closing: (() => Promise<void>)[] = [];
      try {
        const certificate = await localhostCertificate();
        const seen: IncomingHttpHeaders[] = [];
        const api = https.createServer(certificate, (req, res) => {
          seen.push(req.headers);
          req.resume();
          req.on('end', () => {
            const body = JSON.stringify(fake.text('over tls').body);
            res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) }).end(body);
          });
        });
        await new Promise<void>((resolve) => api.listen(0, '127.0.0.1', resolve));
        closing.push(async () => {
          api.closeAllConnections();
          await new Promise<void>((resolve) => api.close(() => resolve()));
        });
        const proxy = await startProxy({ credentials: 'u:p' });
        closing.push(() => proxy.close());
        const secureProxy = await startProxy({ tls: certificate });
        closing.push(() => secureProxy.close());
        const baseUrl = `https://localhost:${(api.address() as AddressInfo).port}`;
        const target = new URL(baseUrl).host;

        vi.stubEnv('HTTPS_PROXY', `http://u:p@127.0.0.1:${proxy.port}`);
        const llm = new AnthropicClient({ apiKey: API_KEY, baseUrl, streaming: false });
        for (let i = 0; i < 2; i++) expect((await llm.send(ask)).content).toEqual([{ type: 'text', text: 'over tls' }]);
        expect(proxy.tunnels).toEqual([{ target, authorization: `Basic ${Buffer.from('u:p').toString('base64')}` }]);
        expect(seen.map((h) => h.host)).toEqual([target, target]);

        // An https:// proxy: TLS with the proxy, and inside the tunnel TLS with the endpoint.
        vi.stubEnv('HTTPS_PROXY', secureProxy.url);
        expect((await new AnthropicClient({ apiKey: API_KEY, baseUrl, streaming: false }).send(ask)).content).toEqual([
          { type: 'text', text: 'over tls' },
        ]);
        expect(secureProxy.tunnels).toEqual([{ target, authorization: null }]);
      } finally {
        for (const close of closing.reverse()) await close();
        trust.setDefaultCACertificates!(defaults);
      }
    },
  );
});

describe('blocks of kinds the client does not know', () => {
  const content = [
    { type: 'server_tool_use', id: 'srvtoolu_01', name: 'web_search', input: { query: 'weather "Paris"' } },
    {
      type: 'web_search_tool_result',
      tool_use_id: 'srvtoolu_01',
      content: [{ type: 'web_search_result', url: 'https://example.com', title: 'Ex', encrypted_content: 'EqgfCioI', page_age: null }],
    },
    {
      type: 'text',
      text: 'Sunny.',
      citations: [
        { type: 'web_search_result_location', cited_text: 'Sunny', url: 'https://example.com', title: 'Ex', encrypted_index: 'Eo8B' },
      ],
    },
    { type: 'future_block', payload: { nested: [1, 'two', null] }, note: 'kept as it came' },
  ];

  it.each([
    ['streamed', true],
    ['not streamed', false],
  ])('are kept as the API sent them, stay so when made storable, and are sent back untouched (%s)', async (_mode, streaming) => {
    server.enqueue(fake.reply({ content, stopReason: 'end_turn' })).text('next');
    const llm = client(streaming);
    const first = await llm.send(ask);
    expect(first.content).toEqual(content);
    expect(storableContent(first.content)).toBe(first.content);
    await llm.send({
      ...ask,
      messages: [...ask.messages, { role: 'assistant', content: first.content }, { role: 'user', content: 'and now?' }],
    });
    expect(server.requests[1]!.body.messages[1].content).toEqual(content);
  });
});
