/**
 * The request a MessagesEndpoint makes, without sending it: the headers go to Node as a list, so
 * Node adds no Host of its own and the endpoint must name the host as Node would have.
 */
import { describe, expect, it } from 'vitest';
import { ANTHROPIC_VERSION, MessagesEndpoint } from '../../src/llm/anthropic-http.ts';

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
