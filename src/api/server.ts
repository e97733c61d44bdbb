/**
 * The HTTP server: fastify with the route table of routes-runs.ts and routes-ops.ts. Requests are
 * parsed with zod (no fastify schema compiler), every error leaves in the one shape of errors.ts, and
 * nothing a client sends can cause a 500. Where to listen is the caller's business.
 */
import Fastify, { type FastifyInstance, type FastifyReply, LogController } from 'fastify';
import type { Logger } from '../observability/logger.ts';
import { type DashboardFiles, registerDashboard } from './dashboard.ts';
import { parseInput, toHttpError, type HttpError } from './errors.ts';
import { openApiDocument } from './openapi.ts';
import type { ApiRoute } from './route.ts';
import { opsRoutes, type OpsDeps } from './routes-ops.ts';
import { overviewRoutes, type OverviewDeps } from './routes-overview.ts';
import { runRoutes, type RunsDeps } from './routes-runs.ts';

export type { RunDefaults } from './routes-runs.ts';

export interface ApiDeps extends RunsDeps, OpsDeps, OverviewDeps {
  /** Request lines (method, url, status, time; never bodies) and 500s go here; none when absent or false. */
  logger?: Logger | false | undefined;
  /** The dashboard at /: its built files, or null when it is not built (its pages say how). Absent: no dashboard. */
  dashboard?: DashboardFiles | null | undefined;
}

/** Larger bodies are refused with 413 before they are read to the end. */
export const BODY_LIMIT = 1_048_576;

const fastifyPath = (openApiPath: string) => openApiPath.replace(/\{(\w+)\}/g, ':$1');
const pathPattern = (openApiPath: string) => new RegExp(`^${openApiPath.replace(/\{\w+\}/g, '[^/]+')}/?$`);

function send(reply: FastifyReply, e: HttpError): FastifyReply {
  return reply.code(e.status).type('application/json; charset=utf-8').send(e.body);
}

export function createServer(deps: ApiDeps): FastifyInstance {
  const app = Fastify({
    // Failures only: a line per request would drown the run lines, and bodies never reach the log.
    ...(deps.logger ? { loggerInstance: deps.logger, logController: new LogController({ disableRequestLogging: true }) } : { logger: false }),
    bodyLimit: BODY_LIMIT,
    // Malformed URLs (bad percent-encoding) fail before routing; they still get our error shape.
    frameworkErrors: (err, _req, reply) => send(reply, toHttpError(err)),
  }) as unknown as FastifyInstance;

  // JSON only: fastify also parses text/plain by default, which must be a 415 here instead.
  app.removeAllContentTypeParsers();
  const parseJson = app.getDefaultJsonParser('error', 'error');
  app.addContentTypeParser('application/json', { parseAs: 'string' }, (req, body, done) => {
    // An empty body is no body (e.g. a cancel sent with a JSON content type); routes that need one say so.
    if (body.length === 0) done(null, undefined);
    else parseJson(req, body as string, done);
  });

  app.setErrorHandler((err, req, reply) => {
    const e = toHttpError(err);
    if (e.status >= 500) req.log.error({ err }, 'request failed');
    return send(reply, e);
  });
  app.setNotFoundHandler((req, reply) => {
    const where = (req.url.split('?')[0] ?? '').slice(0, 200);
    // A known path asked with another method is a 405 that says which methods it takes.
    const allowed = routes.filter((r) => pathPattern(r.path).test(where)).map((r) => r.method);
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
    ...overviewRoutes(deps),
    ...opsRoutes(deps, () => (document ??= openApiDocument(routes))),
  ];
  for (const r of routes) {
    app.route({
      method: r.method,
      url: fastifyPath(r.path),
      async handler(req, reply) {
        const result = await r.handle({
          params: r.params ? parseInput(r.params, req.params, 'path') : undefined,
          query: r.query ? parseInput(r.query, req.query, 'query') : undefined,
          body: r.body ? parseInput(r.body, req.body, 'body') : undefined,
          log: req.log,
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
