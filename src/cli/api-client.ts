/**
 * The HTTP API as the `runs` commands use it: JSON in and out, the key as `Authorization: Bearer`,
 * and every failure as one line that says what went wrong (the server's own error message, or why
 * the server could not be reached).
 */
import type { ClientConfig } from '../config/environment.ts';

/** A request the server refused, or a server that could not be reached (exit code 1). */
export class ApiCallError extends Error {
  constructor(message: string, readonly status: number | null) {
    super(message);
  }
}

export interface ApiClient {
  readonly url: string;
  /** The API key requests carry, for clients of their own (the event stream). */
  readonly key: string | null;
  get<T>(path: string): Promise<T>;
  post<T>(path: string, body?: unknown): Promise<T>;
  delete(path: string): Promise<void>;
}

/** @unit milliseconds */
const TIMEOUT_MS = 30_000;

export function apiClient(config: Readonly<ClientConfig>, fetchFn: typeof fetch = fetch): ApiClient {
  async function call(method: string, path: string, body?: unknown): Promise<unknown> {
    const headers: Record<string, string> = { accept: 'application/json' };
    if (config.key) headers.authorization = `Bearer ${config.key}`;
    if (body !== undefined) headers['content-type'] = 'application/json';
    let res: Response;
    try {
      res = await fetchFn(`${config.url}${path}`, {
        method,
        headers,
        ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
        signal: AbortSignal.timeout(TIMEOUT_MS),
      });
    } catch (e) {
      const cause = (e as { cause?: { code?: string } }).cause?.code ?? (e as Error).name;
      throw new ApiCallError(`cannot reach ${config.url} (${cause}): is the server running? (--url or DURABLE_AGENT_URL)`, null);
    }
    if (res.status === 204) return undefined;
    const text = await res.text();
    let json: unknown = null;
    try {
      json = text ? JSON.parse(text) : null;
    } catch {
      json = null;
    }
    if (!res.ok) {
      const error = (json as { error?: { message?: string } } | null)?.error;
      const hint = res.status === 401 ? (config.key ? ' (check DURABLE_AGENT_KEY)' : ' (set DURABLE_AGENT_KEY)') : '';
      throw new ApiCallError(`${method} ${path}: ${res.status} ${error?.message ?? res.statusText}${hint}`, res.status);
    }
    return json;
  }
  return {
    url: config.url,
    key: config.key ?? null,
    get: async <T>(path: string) => (await call('GET', path)) as T,
    post: async <T>(path: string, body?: unknown) => (await call('POST', path, body)) as T,
    delete: async (path: string) => {
      await call('DELETE', path);
    },
  };
}
