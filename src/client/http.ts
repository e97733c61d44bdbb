/**
 * One JSON request to the HTTP API, shared by the typed client (client.ts) and the CLI's `runs`
 * commands: the key as `Authorization: Bearer`, a time limit, and the body read as JSON when it is.
 * It says whether the server was reached and what it answered; each caller words its own errors.
 * Browser-safe: nothing here may import a Node module.
 */

export interface JsonRequest {
  /** The API's base URL, without a trailing slash. */
  baseUrl: string;
  apiKey?: string | null | undefined;
  method: 'GET' | 'POST' | 'PATCH' | 'DELETE';
  /** From `/api/…`, query string included. */
  path: string;
  body?: unknown;
  headers?: Record<string, string>;
  /** @unit milliseconds */
  timeoutMs: number;
  /** The caller's own abort: it rejects with the signal's reason instead of reporting the server unreachable. */
  signal?: AbortSignal | undefined;
  fetch: typeof fetch;
}

export type JsonOutcome =
  /** No answer: `cause` is the network's error code (ECONNREFUSED …) or the error's name (TimeoutError …). */
  | { reached: false; cause: string }
  /** `json` is undefined for a 204, null for an empty body or one that is not JSON. */
  | { reached: true; status: number; statusText: string; json: unknown };

/** The `error` of the API's error shape `{"error":{"code","message","issues"}}`, when the body has one. */
export interface ApiErrorDetail {
  code?: string;
  message?: string;
  issues?: { path: string; message: string }[];
}

export function errorDetailOf(json: unknown): ApiErrorDetail | undefined {
  const error = (json as { error?: unknown } | null)?.error;
  return typeof error === 'object' && error !== null ? (error as ApiErrorDetail) : undefined;
}

export async function sendJson(request: JsonRequest): Promise<JsonOutcome> {
  const { baseUrl, apiKey, method, path, body, timeoutMs, signal } = request;
  const headers: Record<string, string> = { accept: 'application/json', ...request.headers };
  if (apiKey) headers.authorization = `Bearer ${apiKey}`;
  if (body !== undefined) headers['content-type'] = 'application/json';
  const timeout = AbortSignal.timeout(timeoutMs);
  let res: Response;
  try {
    res = await request.fetch(`${baseUrl}${path}`, {
      method,
      headers,
      ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
      signal: signal ? AbortSignal.any([timeout, signal]) : timeout,
    });
  } catch (e) {
    if (signal?.aborted) throw signal.reason;
    const cause = (e as { cause?: { code?: string } }).cause?.code ?? (e as Error).name;
    return { reached: false, cause };
  }
  if (res.status === 204) return { reached: true, status: 204, statusText: res.statusText, json: undefined };
  const text = await res.text();
  let json: unknown;
  try {
    json = text ? JSON.parse(text) : null;
  } catch {
    json = null;
  }
  return { reached: true, status: res.status, statusText: res.statusText, json };
}
