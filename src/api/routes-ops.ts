/** Operations: liveness with database reachability, Prometheus metrics, and the API's own description. */
import { z } from 'zod';
import { NotFoundError } from '../domain/errors.ts';
import { DATABASE_RETRY_AFTER_SECONDS } from './errors.ts';
import { defineRoute, type ApiRoute } from './route.ts';
import { ErrorBody, HealthDown, HealthOk } from './schemas.ts';

export interface OpsDeps {
  /** Resolves when the database answers (e.g. `SELECT 1`); rejects otherwise. */
  checkDatabase: () => Promise<void>;
  /** The Prometheus exposition; without it /metrics is a 404. */
  metrics?: (() => Promise<{ contentType: string; body: string }>) | undefined;
  /** How long /healthz waits for the database before calling it unreachable; default 5 s. */
  healthTimeoutMs?: number | undefined;
}

/** A load balancer's probe must get an answer even when the database hangs instead of refusing. */
function within<T>(ms: number, p: Promise<T>): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`no answer within ${ms} ms`)), ms);
  });
  return Promise.race([p, timeout]).finally(() => clearTimeout(timer));
}

export function opsRoutes(deps: OpsDeps, openApiDocument: () => unknown): ApiRoute[] {
  return [
    defineRoute({
      method: 'GET',
      path: '/healthz',
      operationId: 'getHealth',
      summary: 'Liveness and database reachability',
      open: true,
      responses: {
        200: { description: 'The server is up and the database answers.', schema: HealthOk },
        503: { description: 'The database does not answer.', schema: HealthDown },
      },
      async handle({ log }) {
        try {
          await within(deps.healthTimeoutMs ?? 5_000, deps.checkDatabase());
          return { body: { ok: true } };
        } catch (err) {
          // The cause (which may name the host) goes to the log, not to whoever probes us.
          log.warn({ err }, 'health check: database unreachable');
          return {
            status: 503,
            headers: { 'retry-after': String(DATABASE_RETRY_AFTER_SECONDS) },
            body: { ok: false, error: { code: 'database_unavailable', message: 'the database does not answer' } },
          };
        }
      },
    }),
    defineRoute({
      method: 'GET',
      path: '/metrics',
      operationId: 'getMetrics',
      summary: 'Prometheus metrics',
      responses: {
        200: { description: 'Prometheus text exposition format.', schema: z.string(), contentType: 'text/plain' },
        404: { description: 'Metrics are not enabled on this server.', schema: ErrorBody },
      },
      async handle() {
        if (!deps.metrics) throw new NotFoundError('metrics are not enabled on this server');
        const m = await deps.metrics();
        return { body: m.body, contentType: m.contentType };
      },
    }),
    defineRoute({
      method: 'GET',
      path: '/openapi.json',
      operationId: 'getOpenApiDocument',
      summary: 'This API, described in OpenAPI 3.1',
      open: true,
      responses: { 200: { description: 'The OpenAPI document.', schema: z.record(z.string(), z.unknown()) } },
      async handle() {
        return { body: openApiDocument() };
      },
    }),
  ];
}
