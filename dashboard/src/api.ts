/**
 * Every request of the page goes through `api()`. It sends the API key kept for this browser session
 * (sessionStorage: gone when the tab closes, never in a cookie or the URL) as `Authorization: Bearer`,
 * and on a 401 asks for a key through the prompt main.ts installs, then sends the request again. A
 * page behind a proxy that adds the header itself never sees a 401, so it never sees the form.
 */
const KEY_STORAGE = 'durable-agent.api-key';

export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
  ) {
    super(message);
  }
}

export const apiKey = {
  get(): string | null {
    return sessionStorage.getItem(KEY_STORAGE);
  },
  set(key: string): void {
    sessionStorage.setItem(KEY_STORAGE, key);
  },
  clear(): void {
    sessionStorage.removeItem(KEY_STORAGE);
  },
};

/** Asks the person for a key; `refused` says the stored one was not accepted. */
export type KeyPrompt = (reason: { refused: boolean; message: string }) => Promise<string>;

let prompt: KeyPrompt | null = null;
/** One form for every request that got a 401 at the same time. */
let pendingKey: Promise<string> | null = null;

export function setKeyPrompt(p: KeyPrompt): void {
  prompt = p;
}

export interface ApiInit {
  method?: 'GET' | 'POST' | 'PATCH' | 'DELETE';
  body?: unknown;
  signal?: AbortSignal;
}

async function errorOf(res: Response): Promise<ApiError> {
  const body = (await res.json().catch(() => null)) as { error?: { code?: string; message?: string } } | null;
  return new ApiError(res.status, body?.error?.code ?? 'http_error', body?.error?.message ?? `${res.status} ${res.statusText}`);
}

/** The response of a request, sent with the key (asked for again on a 401); a failure status is an ApiError. */
async function send(path: string, init: ApiInit, accept: string): Promise<Response> {
  for (;;) {
    const key = apiKey.get();
    const headers: Record<string, string> = { accept };
    if (key) headers.authorization = `Bearer ${key}`;
    if (init.body !== undefined) headers['content-type'] = 'application/json';
    let res: Response;
    try {
      res = await fetch(path, {
        method: init.method ?? 'GET',
        headers,
        body: init.body === undefined ? null : JSON.stringify(init.body),
        signal: init.signal ?? null,
        credentials: 'same-origin',
      });
    } catch (e) {
      if ((e as Error).name === 'AbortError') throw e;
      throw new ApiError(0, 'unreachable', 'cannot reach the server');
    }
    if (res.status === 401 && prompt) {
      const current = apiKey.get();
      // Another request got a new key while this one was on its way: try again with that.
      if (current !== null && current !== key) continue;
      const { message } = await errorOf(res);
      if (key) apiKey.clear();
      pendingKey ??= prompt({ refused: key !== null, message }).finally(() => (pendingKey = null));
      apiKey.set(await pendingKey);
      continue;
    }
    if (!res.ok) throw await errorOf(res);
    return res;
  }
}

export async function api<T>(path: string, init: ApiInit = {}): Promise<T> {
  const res = await send(path, init, 'application/json');
  return (res.status === 204 ? null : await res.json()) as T;
}

/** A response that is not JSON (a workspace file): its bytes and its content type. */
export async function apiBytes(path: string, init: ApiInit = {}): Promise<{ contentType: string; bytes: Uint8Array }> {
  const res = await send(path, init, '*/*');
  return { contentType: res.headers.get('content-type') ?? '', bytes: new Uint8Array(await res.arrayBuffer()) };
}
