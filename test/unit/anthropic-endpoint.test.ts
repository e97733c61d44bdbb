/**
 * The request a MessagesEndpoint makes, without sending it: the headers go to Node as a list, so
 * Node adds no Host of its own and the endpoint must name the host as Node would have; the caller's
 * own headers and betas, and what they may not be; and the proxy the environment names for it.
 */
import { describe, expect, it } from 'vitest';
import { ConfigError } from '../../src/domain/errors.ts';
import { ANTHROPIC_VERSION, MessagesEndpoint } from '../../src/llm/anthropic-http.ts';
import { isExempt, proxyFor } from '../../src/llm/http-pool.ts';

/** The header list the endpoint of `baseUrl` sends a body of `length` bytes with: name, value, name… */
const headerList = (baseUrl: string, length = 42) => {
  const endpoint = new MessagesEndpoint({ apiKey: 'sk-unit', baseUrl, timeoutMs: 1_000 });
  endpoint.check();
  return endpoint.requestOptions(length).headers as string[];
};
const headersOf = (baseUrl: string, length = 42) => {
  const list = headerList(baseUrl, length);
  return Object.fromEntries(Array.from({ length: list.length / 2 }, (_, i) => [list[2 * i]!, list[2 * i + 1]!]));
};

describe('MessagesEndpoint', () => {
  it.each([
    ['http://127.0.0.1:8080', '127.0.0.1:8080'],
    ['http://[::1]:8080/', '[::1]:8080'],
    ['https://api.example.com:443', 'api.example.com'],
    ['http://proxy.internal:80/anthropic', 'proxy.internal'],
    ['https://api.example.com:8443/', 'api.example.com:8443'],
  ])('names the host of %s as %s (IPv6 in brackets, the default port left out)', (baseUrl, host) => {
    expect(headersOf(baseUrl).host).toBe(host);
  });

  it("sends the key, the API version, JSON both ways and the body's length, each header once", () => {
    expect(headerList('https://api.example.com', 1234).filter((_, i) => i % 2 === 0)).toEqual([
      'host',
      'accept',
      'content-type',
      'authorization',
      'anthropic-version',
      'content-length',
    ]);
    expect(headersOf('https://api.example.com', 1234)).toEqual({
      host: 'api.example.com',
      accept: 'application/json',
      'content-type': 'application/json',
      authorization: 'Bearer sk-unit',
      'anthropic-version': ANTHROPIC_VERSION,
      'content-length': '1234',
    });
  });

  it('keeps the path of a base URL, with one slash before v1/messages', () => {
    const path = (baseUrl: string) => new MessagesEndpoint({ apiKey: 'k', baseUrl, timeoutMs: 1 }).requestOptions(0).path;
    expect(path('http://proxy.internal/anthropic')).toBe('/anthropic/v1/messages');
    expect(path('http://proxy.internal/anthropic/')).toBe('/anthropic/v1/messages');
  });

  it('refuses a base URL that is not http(s), before anything is made', () => {
    expect(() => new MessagesEndpoint({ apiKey: 'k', baseUrl: 'ftp://example.com', timeoutMs: 1 }).check()).toThrow(
      /unsupported protocol ftp:/,
    );
  });
});

describe('MessagesEndpoint headers and betas', () => {
  const endpoint = (headers?: Record<string, string>, betas?: string[]) =>
    new MessagesEndpoint({ apiKey: 'sk-unit', baseUrl: 'https://api.example.com', timeoutMs: 1, headers, betas });
  const sent = (headers?: Record<string, string>, betas?: string[]) => endpoint(headers, betas).requestOptions(7).headers as string[];

  it('sends extra headers after its own (names in lower case) and the betas as one anthropic-beta header', () => {
    expect(
      sent({ 'X-Gateway-Tenant': 'team-a', 'cf-aig-authorization': 'Bearer gw' }, ['context-1m-2025-08-07', 'files-api-2025-04-14']),
    ).toEqual([
      'host',
      'api.example.com',
      'accept',
      'application/json',
      'content-type',
      'application/json',
      'authorization',
      'Bearer sk-unit',
      'anthropic-version',
      ANTHROPIC_VERSION,
      'x-gateway-tenant',
      'team-a',
      'cf-aig-authorization',
      'Bearer gw',
      'anthropic-beta',
      'context-1m-2025-08-07,files-api-2025-04-14',
      'content-length',
      '7',
    ]);
    expect(sent({}, [])).toEqual(sent());
    expect(sent({ 'anthropic-beta': 'a,b' }, [])).toContain('anthropic-beta');
  });

  it.each(['x-api-key', 'Anthropic-Version', 'content-type', 'Content-Length', 'host', 'authorization', 'connection', 'transfer-encoding'])(
    'refuses %s, which the transport sets itself, naming it',
    (name) => {
      expect(() => endpoint({ [name]: 'sk-ant-secret-value' })).toThrow(ConfigError);
      expect(() => endpoint({ [name]: 'sk-ant-secret-value' })).toThrow(`headers: "${name}" is set by the client itself`);
      expect(() => endpoint({ [name]: 'sk-ant-secret-value' })).not.toThrow(/secret-value/);
    },
  );

  it('refuses anthropic-beta next to betas, a header twice, a bad name or value, and a beta that is not a name; never showing a value', () => {
    const cases: [Record<string, string> | undefined, string[] | undefined, string][] = [
      [{ 'Anthropic-Beta': 'x' }, ['y'], 'headers: "Anthropic-Beta" cannot be given with betas'],
      [{ 'x-a': '1', 'X-A': '2' }, undefined, 'headers: "X-A" is given twice'],
      [{ 'x y': '1' }, undefined, 'headers: "x y" is not a header name'],
      [{ 'x-token': 'secret\r\nx-injected: 1' }, undefined, 'headers: the value of "x-token" must be a string'],
      [{ 'x-token': 42 as unknown as string }, undefined, 'headers: the value of "x-token" must be a string'],
      [undefined, ['a,b'], 'betas: each must be a beta\'s name, such as "context-1m-2025-08-07" (got "a,b")'],
      [undefined, ['two words'], 'betas: each must be'],
      [undefined, [''], 'betas: each must be'],
    ];
    for (const [headers, betas, message] of cases) {
      expect(() => endpoint(headers, betas)).toThrow(message);
      expect(() => endpoint(headers, betas)).not.toThrow(/secret/);
    }
  });
});

describe('the proxy of the environment', () => {
  const proxy = (target: string, env: NodeJS.ProcessEnv) => proxyFor(new URL(target), env);

  it('is HTTPS_PROXY for an https: endpoint, HTTP_PROXY for an http: one, the lower-case name first, credentials as Basic', () => {
    expect(proxy('https://api.anthropic.com', { HTTPS_PROXY: 'http://proxy.corp:3128' })).toEqual({
      protocol: 'http:',
      host: 'proxy.corp',
      port: 3128,
      authorization: null,
    });
    expect(proxy('https://api.anthropic.com', { https_proxy: 'http://a:1', HTTPS_PROXY: 'http://b:2' })).toMatchObject({ host: 'a' });
    expect(proxy('https://api.anthropic.com', { https_proxy: '', HTTPS_PROXY: 'http://b:2' })).toMatchObject({ host: 'b' });
    expect(proxy('https://api.anthropic.com', { HTTP_PROXY: 'http://b:2' })).toBeNull();
    expect(proxy('http://gateway.internal', { HTTP_PROXY: 'http://b:2', HTTPS_PROXY: 'http://c:3' })).toMatchObject({ host: 'b' });
    expect(proxy('http://gateway.internal', { HTTPS_PROXY: 'http://c:3' })).toBeNull();
    expect(proxy('https://x.example', { HTTPS_PROXY: 'https://u%40corp:p%3Ass@[::1]' })).toEqual({
      protocol: 'https:',
      host: '::1',
      port: 443,
      authorization: `Basic ${Buffer.from('u@corp:p:ss').toString('base64')}`,
    });
    // No scheme: an http:// proxy, as curl takes it.
    expect(proxy('https://x.example', { HTTPS_PROXY: 'proxy.corp:8080' })).toMatchObject({
      protocol: 'http:',
      host: 'proxy.corp',
      port: 8080,
    });
    expect(proxy('https://x.example', { HTTPS_PROXY: 'http://proxy.corp' })).toMatchObject({ port: 80 });
  });

  it('refuses a proxy URL it cannot use with a ConfigError naming the variable, never its value', () => {
    expect(() => proxy('https://x.example', { HTTPS_PROXY: 'socks5://user:hunter2@proxy:1080' })).toThrow(
      'HTTPS_PROXY names a socks5:// proxy: only http:// and https:// proxies are supported',
    );
    expect(() => proxy('https://x.example', { https_proxy: 'http://user:hunter2@exa mple:1' })).toThrow('https_proxy is not a proxy URL');
    for (const value of ['socks5://user:hunter2@proxy:1080', 'http://user:hunter2@exa mple:1']) {
      expect(() => proxy('https://x.example', { HTTPS_PROXY: value })).toThrow(ConfigError);
      expect(() => proxy('https://x.example', { HTTPS_PROXY: value })).not.toThrow(/hunter2/);
    }
    // Exempted by NO_PROXY, the proxy is not even read.
    expect(proxy('https://x.example', { HTTPS_PROXY: 'socks5://proxy:1080', NO_PROXY: 'x.example' })).toBeNull();
  });

  it.each([
    ['*', 'api.anthropic.com', 443, true],
    ['localhost,*', 'api.anthropic.com', 443, true],
    ['anthropic.com', 'api.anthropic.com', 443, true],
    ['anthropic.com', 'anthropic.com', 443, true],
    ['.anthropic.com', 'api.anthropic.com', 443, true],
    ['.anthropic.com', 'anthropic.com', 443, true],
    ['*.anthropic.com', 'api.anthropic.com', 443, true],
    ['thropic.com', 'api.anthropic.com', 443, false],
    ['api.anthropic.com.', 'API.Anthropic.com', 443, true],
    [' example.com , api.anthropic.com ', 'api.anthropic.com', 443, true],
    ['api.anthropic.com:443', 'api.anthropic.com', 443, true],
    ['api.anthropic.com:8443', 'api.anthropic.com', 443, false],
    ['127.0.0.1', '127.0.0.1', 8080, true],
    ['0.0.1', '127.0.0.1', 8080, false],
    ['10.0.0.0/8', '10.1.2.3', 80, true],
    ['10.0.0.0/8', '11.1.2.3', 80, false],
    ['10.0.0.0/8', 'ten.example', 80, false],
    ['::1', '[::1]', 80, true],
    ['[::1]:8080', '[::1]', 8080, true],
    ['[::1]:8080', '[::1]', 80, false],
    ['fd00::/8', '[fd12::5]', 80, true],
    ['', 'api.anthropic.com', 443, false],
  ])('NO_PROXY=%j exempts %s:%d: %s', (noProxy, host, port, exempt) => {
    expect(isExempt(host, port, noProxy)).toBe(exempt);
  });

  it('is left out for a host NO_PROXY (or no_proxy, first) exempts, on the port the URL means', () => {
    expect(proxy('https://api.anthropic.com', { HTTPS_PROXY: 'http://p:1', NO_PROXY: 'api.anthropic.com:443' })).toBeNull();
    expect(proxy('https://api.anthropic.com', { HTTPS_PROXY: 'http://p:1', no_proxy: 'other', NO_PROXY: '*' })).not.toBeNull();
    expect(proxy('http://127.0.0.1:8080', { HTTP_PROXY: 'http://p:1', no_proxy: '127.0.0.1' })).toBeNull();
  });
});
