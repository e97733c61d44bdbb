/**
 * The HTTP server: fastify with the route table of routes-runs.ts and routes-ops.ts. Requests are
 * parsed with zod (no fastify schema compiler), every error leaves in the one shape of errors.ts, and
 * nothing a client sends can cause a 500. Where to listen is the caller's business; while it is a
 * loopback address, requests a browser page could forge are refused (loopback-guard.ts).
 */
import { STATUS_CODES } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Duplex } from 'node:stream';
import Fastify, { type FastifyInstance, type FastifyReply, LogController } from 'fastify';
import { InputError } from '../domain/errors.ts';
import type { Logger } from '../observability/logger.ts';
import { authOff, type Authenticator } from './auth.ts';
import { type DashboardFiles, registerDashboard } from './dashboard.ts';
import { parseInput, toHttpError, type HttpError } from './errors.ts';
import { isLoopbackAddress, loopbackRefusal } from './loopback-guard.ts';
import { openApiDocument } from './openapi.ts';
import { type ApiRoute, BODY_LIMIT } from './route.ts';
import { opsRoutes, type OpsDeps } from './routes-ops.ts';
import { overviewRoutes, type OverviewDeps } from './routes-overview.ts';
import { type AccessConfig, accessHook, accessOf, routeParams, runFor } from './run-access.ts';
import { runRoutes, type RunsDeps } from './routes-runs.ts';
import { eventRoutes, type EventsDeps } from './routes-events.ts';
import { type FilesDeps, filesRoutes } from './routes-files.ts';
import { schedulesRoutes, type SchedulesRoutesDeps } from './routes-schedules.ts';

export type { RunDefaults } from './routes-runs.ts';

/**
 * How long a client may take, so a slow or stalled one cannot hold sockets and memory for ever
 * (a request that took too long is answered 408).
 * @unit milliseconds
 */
export interface ClientTimeouts {
  /** From connecting to the end of the request headers. */
  headersMs: number;
  /** From connecting to the end of the request body: a client trickling its body is cut off here. */
  requestMs: number;
  /** A socket with no traffic in either direction is closed after this long. */
  idleMs: number;
  /** How often the two limits above are checked; a client is cut off at most this much late. */
  checkIntervalMs: number;
}

export const CLIENT_TIMEOUTS: ClientTimeouts = { headersMs: 10_000, requestMs: 30_000, idleMs: 60_000, checkIntervalMs: 1_000 };

export interface ApiDeps extends RunsDeps, OpsDeps, OverviewDeps {
  /** Request lines (method, url, status, time; never bodies) and 500s go here; none when absent or false. */
  logger?: Logger | false | undefined;
  timeouts?: Partial<ClientTimeouts> | undefined;
  /** The dashboard at /: its built files, or null when it is not built (its pages say how). Absent: no dashboard. */
  dashboard?: DashboardFiles | null | undefined;
  /** Who may ask what (auth.ts); absent: every request is let in and sees every tenant. */
  auth?: Authenticator | undefined;
  /** A run's live events; absent: those routes are not served. */
  runEvents?: EventsDeps | undefined;
  /** A run's workspace files; absent: those routes are not served. */
  files?: FilesDeps['files'] | undefined;
  /** Schedules; absent: those routes are not served. */
  schedules?: SchedulesRoutesDeps['schedules'] | undefined;
}

/** fastify's form of a route's path: `{id}` is `:id`, the wildcard parameter `*`. */
const fastifyPath = (r: Pick<ApiRoute, 'path' | 'wildcard'>) =>
  r.path.replace(/\{(\w+)\}/g, (_, name: string) => (name === r.wildcard ? '*' : `:${name}`));
const escapeRegExp = (s: string) => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
/** Matches the paths fastify routes to this route, and no others (so a trailing slash is a 404, as fastify routes it). */
const pathPattern = (r: Pick<ApiRoute, 'path' | 'wildcard'>) => {
  const parts = r.path.split(/(\{\w+\})/);
  return new RegExp(`^${parts.map((p) => (p === `{${r.wildcard}}` ? '.+' : /^\{\w+\}$/.test(p) ? '[^/]+' : escapeRegExp(p))).join('')}$`);
};

/** JSON is UTF-8 (RFC 8259); bytes that are not are refused, not turned into U+FFFD and stored. */
const utf8 = new TextDecoder('utf-8', { fatal: true });
const notUtf8 = () => new InputError('invalid request body: body: is not valid UTF-8', [{ path: 'body', message: 'is not valid UTF-8' }]);

/**
 * A request Node could not read (too slow, headers too large, not HTTP) is answered on the bare
 * socket, before fastify sees it, still in our error shape; what the client sent is not logged.
 */
function clientError(err: NodeJS.ErrnoException, socket: Duplex): void {
  if (err.code === 'ECONNRESET' || socket.destroyed) return;
  const [status, code, message] =
    err.code === 'ERR_HTTP_REQUEST_TIMEOUT'
      ? [408, 'request_timeout', 'the request was not received in time']
      : err.code === 'HPE_HEADER_OVERFLOW'
        ? [431, 'headers_too_large', 'the request headers are too large']
        : [400, 'bad_request', 'the request is not valid HTTP'];
  const body = JSON.stringify({ error: { code, message } });
  if (socket.writable) {
    socket.write(
      `HTTP/1.1 ${status} ${STATUS_CODES[status]}\r\nConnection: close\r\nContent-Type: application/json; charset=utf-8\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`,
    );
  }
  socket.destroy();
}

function send(reply: FastifyReply, e: HttpError): FastifyReply {
  if (e.headers) reply.headers(e.headers);
  return reply.code(e.status).type('application/json; charset=utf-8').send(e.body);
}

export function createServer(deps: ApiDeps): FastifyInstance {
  const timeouts = { ...CLIENT_TIMEOUTS, ...deps.timeouts };
  const app = Fastify({
    // Failures only: a line per request would drown the run lines, and bodies never reach the log.
    ...(deps.logger
      ? { loggerInstance: deps.logger, logController: new LogController({ disableRequestLogging: true }) }
      : { logger: false }),
    bodyLimit: BODY_LIMIT,
    requestTimeout: timeouts.requestMs,
    connectionTimeout: timeouts.idleMs,
    http: { headersTimeout: timeouts.headersMs, connectionsCheckingInterval: timeouts.checkIntervalMs },
    // Malformed URLs (bad percent-encoding) fail before routing; they still get our error shape.
    frameworkErrors: (err, _req, reply) => void send(reply, toHttpError(err)),
    clientErrorHandler: clientError,
  }) as unknown as FastifyInstance;

  // While bound to loopback, refuse what only a browser page of another site would send.
  app.addHook('onRequest', async (req, reply) => {
    const bound = app.server.address() as AddressInfo | string | null;
    if (bound === null || typeof bound === 'string' || !isLoopbackAddress(bound.address)) return;
    const refusal = loopbackRefusal(req.method, req.headers.host, req.headers.origin);
    if (refusal) return send(reply, refusal);
  });
  // fastify routes `/api/runs/` to `/api/runs/:id` with an empty id: that path names no run and no route.
  app.addHook('onRequest', async (req, reply) => {
    const params = req.params as Record<string, string | undefined> | undefined;
    if (params && Object.values(params).includes('')) return reply.callNotFound();
  });
  // Then who is asking, and for a run route, whether the run is theirs: before the body is read.
  app.addHook('onRequest', accessHook(deps.auth ?? authOff(), deps.store));

  // JSON only: fastify also parses text/plain by default, which must be a 415 here instead.
  app.removeAllContentTypeParsers();
  const parseJson = app.getDefaultJsonParser('error', 'error');
  app.addContentTypeParser('application/json', { parseAs: 'buffer' }, (req, body, done) => {
    // An empty body is no body (e.g. a cancel sent with a JSON content type); routes that need one say so.
    if (body.length === 0) return done(null, undefined);
    let text: string;
    try {
      text = utf8.decode(body as Buffer);
    } catch {
      return done(notUtf8(), undefined);
    }
    void parseJson(req, text, done);
  });

  app.setErrorHandler((err, req, reply) => {
    const e = toHttpError(err);
    if (e.status === 503) req.log.warn({ err }, 'request failed: the database cannot be reached');
    else if (e.status >= 500) req.log.error({ err }, 'request failed');
    return send(reply, e);
  });
  app.setNotFoundHandler((req, reply) => {
    const where = (req.url.split('?')[0] ?? '').slice(0, 200);
    // A known path asked with another method is a 405 that says which methods it takes.
    const allowed = routes.filter((r) => pathPattern(r).test(where)).map((r) => r.method);
    if (allowed.length) {
      reply.header('allow', allowed.join(', '));
      const message = `${req.method} is not allowed on ${where}; use ${allowed.join(' or ')}`;
      return send(reply, { status: 405, body: { error: { code: 'method_not_allowed', message } } });
    }
    return send(reply, { status: 404, body: { error: { code: 'not_found', message: `no route ${req.method} ${where}` } } });
  });

  let document: unknown;
  const routes: ApiRoute[] = [
    ...runRoutes(deps),
    ...(deps.runEvents ? eventRoutes(deps.runEvents) : []),
    ...(deps.files ? filesRoutes({ files: deps.files }) : []),
    ...(deps.schedules ? schedulesRoutes({ schedules: deps.schedules }) : []),
    ...overviewRoutes(deps),
    ...opsRoutes(deps, () => (document ??= openApiDocument(routes))),
  ];
  for (const r of routes) {
    app.route({
      method: r.method,
      url: fastifyPath(r),
      ...(r.bodyLimit !== undefined && { bodyLimit: r.bodyLimit }),
      config: { open: r.open === true, params: r.params, wildcard: r.wildcard } satisfies AccessConfig,
      async handler(req, reply) {
        const params = r.params ? parseInput(r.params, routeParams(r.wildcard, req.params), 'path') : undefined;
        const { caller, run } = accessOf(req);
        const runRoute = r.path.startsWith('/api/runs/{id}');
        const result = await r.handle({
          params,
          query: r.query ? parseInput(r.query, req.query, 'query') : undefined,
          body: r.body ? parseInput(r.body, req.body, 'body') : undefined,
          log: req.log,
          headers: req.headers,
          raw: req.raw,
          caller,
          ...(runRoute ? { run: run ?? (await runFor(deps.store, caller, (params as { id: string }).id)) } : {}),
        });
        reply.code(result.status ?? 200);
        if (result.headers) reply.headers(result.headers);
        if (result.contentType) reply.type(result.contentType);
        return result.body;
      },
    });
  }
  if (deps.dashboard !== undefined) registerDashboard(app, deps.dashboard);
  return app;
}
