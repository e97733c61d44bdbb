/**
 * The HTTP API as the `runs` commands use it: JSON in and out, the key as `Authorization: Bearer`,
 * and every failure as one line that says what went wrong (the server's own error message, or why
 * the server could not be reached).
 */
import { errorDetailOf, sendJson } from '../client/http.ts';
import type { ClientConfig } from '../config/environment.ts';

/** A request the server refused, or a server that could not be reached (exit code 1). */
export class ApiCallError extends Error {
  constructor(
    message: string,
    readonly status: number | null,
  ) {
    super(message);
  }
}

export interface ApiClient {
  readonly url: string;
  /** The API key requests carry, for clients of their own (the event stream). */
  readonly key: string | null;
  get<T>(path: string): Promise<T>;
  post<T>(path: string, body?: unknown): Promise<T>;
  patch<T>(path: string, body: unknown): Promise<T>;
  delete(path: string): Promise<void>;
}

/** @unit milliseconds */
const TIMEOUT_MS = 30_000;

export function apiClient(config: Readonly<ClientConfig>, fetchFn: typeof fetch = fetch): ApiClient {
  async function call(method: 'GET' | 'POST' | 'PATCH' | 'DELETE', path: string, body?: unknown): Promise<unknown> {
    const outcome = await sendJson({ baseUrl: config.url, apiKey: config.key, method, path, body, timeoutMs: TIMEOUT_MS, fetch: fetchFn });
    if (!outcome.reached) {
      throw new ApiCallError(`cannot reach ${config.url} (${outcome.cause}): is the server running? (--url or DURABLE_AGENT_URL)`, null);
    }
    if (outcome.status < 200 || outcome.status > 299) {
      const hint = outcome.status === 401 ? (config.key ? ' (check DURABLE_AGENT_KEY)' : ' (set DURABLE_AGENT_KEY)') : '';
      throw new ApiCallError(
        `${method} ${path}: ${outcome.status} ${errorDetailOf(outcome.json)?.message ?? outcome.statusText}${hint}`,
        outcome.status,
      );
    }
    return outcome.json;
  }
  return {
    url: config.url,
    key: config.key ?? null,
    get: async <T>(path: string) => (await call('GET', path)) as T,
    post: async <T>(path: string, body?: unknown) => (await call('POST', path, body)) as T,
    patch: async <T>(path: string, body: unknown) => (await call('PATCH', path, body)) as T,
    delete: async (path: string) => {
      await call('DELETE', path);
    },
  };
}
