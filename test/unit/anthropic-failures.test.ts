import { describe, expect, it } from 'vitest';
import { connectionFailed, errorBodyFields, fromErrorResponse, isTimeout } from '../../src/llm/anthropic-failures.ts';

describe('errorBodyFields', () => {
  it("reads the type and message of the API's error body, and nothing from anything else", () => {
    expect(errorBodyFields({ type: 'error', error: { type: 'overloaded_error', message: 'Overloaded' } })).toEqual({
      type: 'overloaded_error',
      message: 'Overloaded',
    });
    expect(errorBodyFields({ type: 'error', error: { type: 7, message: { text: 'x' } } })).toEqual({ type: null, message: null });
    for (const body of [undefined, null, 'Bad Gateway', 42, [], {}, { error: null }, { error: 'text' }]) {
      expect(errorBodyFields(body)).toEqual({ type: null, message: null });
    }
  });
});

describe('fromErrorResponse', () => {
  it('without an HTTP status (an error event) takes the status its type stands for, and "HTTP <status>" without a message', () => {
    const headers = new Headers({ 'request-id': 'req_1', 'retry-after': '2', 'x-should-retry': 'true' });
    expect(fromErrorResponse({ status: undefined, type: 'overloaded_error', message: null, headers }, { apiKey: 'k' })).toMatchObject({
      status: 529,
      message: 'HTTP 529',
      type: 'overloaded_error',
      requestId: 'req_1',
      retryAfterMs: 2000,
      retryable: true,
    });
    expect(fromErrorResponse({ status: 418, type: null, message: 'teapot', headers: null }, { requestId: 'req_ctx' })).toMatchObject({
      status: 418,
      requestId: 'req_ctx',
      retryable: false,
    });
  });
});

describe('isTimeout', () => {
  it('takes an abort nobody asked for and a connect timeout of the HTTP stack as a timeout, a refused connection not', () => {
    expect(isTimeout(new DOMException('This operation was aborted', 'AbortError'))).toBe(true);
    const connectTimeout = Object.assign(new Error('Connect Timeout Error (attempted address: example:443, timeout: 10000ms)'), {
      name: 'ConnectTimeoutError',
    });
    expect(isTimeout(new TypeError('fetch failed', { cause: connectTimeout }))).toBe(true);
    const refused = Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:9'), { code: 'ECONNREFUSED' });
    expect(isTimeout(new TypeError('fetch failed', { cause: refused }))).toBe(false);
    expect(connectionFailed(new TypeError('fetch failed', { cause: refused }))).toMatchObject({
      status: -1,
      type: 'connection_error',
      message: 'connection error: fetch failed (ECONNREFUSED)',
    });
  });
});

describe('isTimeout, node:http', () => {
  it("takes the connection pool's connect limit and the system's ETIMEDOUT as a timeout, a hang-up or a reset not", () => {
    expect(isTimeout(new Error('connect timed out after 10000 ms'))).toBe(true);
    expect(isTimeout(Object.assign(new Error('connect ETIMEDOUT 10.0.0.1:443'), { code: 'ETIMEDOUT' }))).toBe(true);
    expect(isTimeout(Object.assign(new Error('socket hang up'), { code: 'ECONNRESET' }))).toBe(false);
    expect(isTimeout(Object.assign(new Error('read ECONNRESET'), { code: 'ECONNRESET' }))).toBe(false);
    const refused = Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:9'), { code: 'ECONNREFUSED' });
    expect(connectionFailed(refused)).toMatchObject({
      status: -1,
      type: 'connection_error',
      message: 'connection error: connect ECONNREFUSED 127.0.0.1:9',
    });
  });
});
