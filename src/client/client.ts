/**
 * `createClient`: the HTTP API from a browser, a worker or another Node program, typed from the
 * API's own schemas. Every method is one request; a refusal or an unreachable server is an
 * `ApiError` saying which. `runs.events` follows a run live (see followRun).
 */
import { followRun, type FollowRunOptions } from '../events/follow.ts';
import type { RunEvent, UnknownRunEvent } from '../events/protocol.ts';
import { errorDetailOf, sendJson } from './http.ts';
import type {
  CancelResult,
  CreatedRun,
  CreateRunRequest,
  DecisionRequest,
  DecisionResult,
  ForkedRun,
  ForkRunRequest,
  ListRunsRequest,
  RunDetail,
  RunEventPage,
  RunPage,
  StepDetail,
  TimelineStep,
} from './types.ts';

export interface ClientOptions {
  /** Where the API is, e.g. `http://127.0.0.1:8080` or `/agent` behind your own server. */
  baseUrl: string;
  /** An API key (`dak_…`), sent as `Authorization: Bearer`. Never put one in code a browser downloads. */
  apiKey?: string;
  /** Default the global fetch. */
  fetch?: typeof fetch;
  /** @unit milliseconds — the limit of one request (following events has none). Default 30000. */
  timeoutMs?: number;
}

export interface RequestOptions {
  signal?: AbortSignal;
}

/** A request the server refused (`status` and the API's `code`), or a server not reached (`status` null). */
export class ApiError extends Error {
  constructor(
    message: string,
    readonly status: number | null,
    /** The API's machine-readable code: invalid_request, not_found, conflict, … */
    readonly code: string | null = null,
    /** The failing fields of a 400. */
    readonly issues: readonly { path: string; message: string }[] = [],
  ) {
    super(message);
    this.name = 'ApiError';
  }
}

export interface RunsClient {
  /** Queues a run. The same `idempotencyKey` with the same body within 24 hours answers the same run. */
  create(request: CreateRunRequest, options?: RequestOptions & { idempotencyKey?: string }): Promise<CreatedRun>;
  get(id: string, options?: RequestOptions): Promise<RunDetail>;
  /** One page, newest first; pass `nextCursor` as `cursor` for the next. */
  list(query?: ListRunsRequest, options?: RequestOptions): Promise<RunPage>;
  cancel(id: string, options?: RequestOptions): Promise<CancelResult>;
  /** Approves, denies or completes one tool call a WAITING run holds. */
  decide(id: string, toolUseId: string, decision: DecisionRequest, options?: RequestOptions): Promise<DecisionResult>;
  /** The run's steps, without their bodies. */
  timeline(id: string, options?: RequestOptions): Promise<TimelineStep[]>;
  /** One step with its request and response. */
  step(id: string, seq: number, options?: RequestOptions): Promise<StepDetail>;
  fork(id: string, request: ForkRunRequest, options?: RequestOptions): Promise<ForkedRun>;
  /** Deletes a finished run. */
  delete(id: string, options?: RequestOptions): Promise<void>;
  /** One JSON page of the run's events after `after`. */
  eventPage(id: string, page?: { after?: number; limit?: number }, options?: RequestOptions): Promise<RunEventPage>;
  /** The run's events as they happen, each once and in order, until run.finished (see followRun). */
  events(id: string, options?: Omit<FollowRunOptions, 'apiKey' | 'fetch'>): AsyncGenerator<RunEvent | UnknownRunEvent>;
}

export interface Client {
  readonly baseUrl: string;
  readonly runs: RunsClient;
}

/** @unit milliseconds */
const TIMEOUT_MS = 30_000;

const segment = (value: string | number) => encodeURIComponent(String(value));

function queryString(values: Record<string, string | number | undefined>): string {
  const params = new URLSearchParams();
  for (const [name, value] of Object.entries(values)) if (value !== undefined) params.set(name, String(value));
  const text = params.toString();
  return text ? `?${text}` : '';
}

export function createClient(options: ClientOptions): Client {
  if (typeof options?.baseUrl !== 'string') throw new TypeError('createClient: baseUrl must be a string (e.g. "http://127.0.0.1:8080")');
  const baseUrl = options.baseUrl.replace(/\/+$/, '');
  const fetchFn = options.fetch ?? ((input, init) => fetch(input, init));
  const timeoutMs = options.timeoutMs ?? TIMEOUT_MS;

  async function call<T>(
    method: 'GET' | 'POST' | 'DELETE',
    path: string,
    body: unknown,
    request: RequestOptions & { headers?: Record<string, string> } = {},
  ): Promise<T> {
    const outcome = await sendJson({
      baseUrl,
      apiKey: options.apiKey,
      method,
      path,
      body,
      timeoutMs,
      signal: request.signal,
      fetch: fetchFn,
      ...(request.headers ? { headers: request.headers } : {}),
    });
    if (!outcome.reached) throw new ApiError(`${method} ${path}: cannot reach ${baseUrl || 'the API'} (${outcome.cause})`, null);
    if (outcome.status < 200 || outcome.status > 299) {
      const detail = errorDetailOf(outcome.json);
      throw new ApiError(
        `${method} ${path}: ${outcome.status} ${detail?.message ?? outcome.statusText}`,
        outcome.status,
        detail?.code ?? null,
        detail?.issues ?? [],
      );
    }
    return outcome.json as T;
  }

  const run = (id: string) => `/api/runs/${segment(id)}`;
  const runs: RunsClient = {
    create: (request, { idempotencyKey, ...rest } = {}) =>
      call('POST', '/api/runs', request, {
        ...rest,
        ...(idempotencyKey === undefined ? {} : { headers: { 'idempotency-key': idempotencyKey } }),
      }),
    get: (id, request) => call('GET', run(id), undefined, request),
    list: (query = {}, request) => call('GET', `/api/runs${queryString(query)}`, undefined, request),
    cancel: (id, request) => call('POST', `${run(id)}/cancel`, undefined, request),
    decide: (id, toolUseId, decision, request) => call('POST', `${run(id)}/tool-calls/${segment(toolUseId)}/decision`, decision, request),
    timeline: (id, request) => call('GET', `${run(id)}/timeline`, undefined, request),
    step: (id, seq, request) => call('GET', `${run(id)}/steps/${segment(seq)}`, undefined, request),
    fork: (id, request, options) => call('POST', `${run(id)}/fork`, request, options),
    delete: async (id, request) => {
      await call('DELETE', run(id), undefined, request);
    },
    eventPage: (id, page = {}, request) => call('GET', `${run(id)}/events${queryString(page)}`, undefined, request),
    events: (id, follow = {}) =>
      followRun(baseUrl, id, { ...follow, ...(options.apiKey ? { apiKey: options.apiKey } : {}), fetch: fetchFn }),
  };
  return { baseUrl, runs };
}
