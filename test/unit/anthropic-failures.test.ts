import { describe, expect, it } from 'vitest';
import { connectionFailed, errorBodyFields, fromErrorAnswer, isTimeout } from '../../src/llm/anthropic-failures.ts';

describe('errorBodyFields', () => {
  it("reads the type and message of the API's error body, and nothing from anything else", () => {
    expect(errorBodyFields({ type: 'error', error: { type: 'overloaded_error', message: 'Overloaded' } })).toEqual({ type: 'overloaded_error', message: 'Overloaded' });
    expect(errorBodyFields({ type: 'error', error: { type: 7, message: { text: 'x' } } })).toEqual({ type: null, message: null });
    for (const body of [undefined, null, 'Bad Gateway', 42, [], {}, { error: null }, { error: 'text' }]) {
      expect(errorBodyFields(body)).toEqual({ type: null, message: null });
    }
  });
});

describe('fromErrorAnswer', () => {
  it('without an HTTP status (an error event) takes the status its type stands for, and "HTTP <status>" without a message', () => {
    const headers = new Headers({ 'request-id': 'req_1', 'retry-after': '2', 'x-should-retry': 'true' });
    expect(fromErrorAnswer({ status: undefined, type: 'overloaded_error', message: null, headers }, { apiKey: 'k' })).toMatchObject({
      status: 529, message: 'HTTP 529', type: 'overloaded_error', requestId: 'req_1', retryAfterMs: 2000, retryable: true,
    });
    expect(fromErrorAnswer({ status: 418, type: null, message: 'teapot', headers: null }, { requestId: 'req_ctx' })).toMatchObject({ status: 418, requestId: 'req_ctx', retryable: false });
  });
});

describe('isTimeout', () => {
  it('takes an abort nobody asked for and a connect timeout of the HTTP stack as a timeout, a refused connection not', () => {
    expect(isTimeout(new DOMException('This operation was aborted', 'AbortError'))).toBe(true);
    const connectTimeout = Object.assign(new Error('Connect Timeout Error (attempted address: example:443, timeout: 10000ms)'), { name: 'ConnectTimeoutError' });
    expect(isTimeout(new TypeError('fetch failed', { cause: connectTimeout }))).toBe(true);
    const refused = Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:9'), { code: 'ECONNREFUSED' });
    expect(isTimeout(new TypeError('fetch failed', { cause: refused }))).toBe(false);
    expect(connectionFailed(new TypeError('fetch failed', { cause: refused }))).toMatchObject({ status: -1, type: 'connection_error', message: 'connection error: fetch failed (ECONNREFUSED)' });
  });
});
