/** The dashboard's overview as an API route: the figures of store/run-overview.ts as JSON. */
import { NotFoundError } from '../domain/errors.ts';
import type { Overview, OverviewWindow, RunOverview } from '../store/run-overview.ts';
import { defineRoute, type ApiRoute } from './route.ts';
import { ErrorBody } from './schemas.ts';
import { OverviewJson } from './schemas-overview.ts';

export interface OverviewDeps {
  /** Without it /api/overview is a 404. */
  overview?: Pick<RunOverview, 'read'> | undefined;
}

const windowJson = (w: OverviewWindow): OverviewJson['hour'] => ({
  since: w.since.toISOString(),
  bucketSeconds: w.bucketSeconds,
  runsCreated: w.runsCreated,
  totals: w.totals,
  series: w.series.map((b) => ({ ...b, start: b.start.toISOString() })),
  latency: w.latency,
});

export function overviewJson(o: Overview): OverviewJson {
  return { at: o.at.toISOString(), runsByStatus: o.runsByStatus, hour: windowJson(o.hour), day: windowJson(o.day) };
}

/** `read`, with the calls made while one of the same key is under way sharing it instead of starting another. */
export function sharedWhileRunning<K, T>(read: (key: K) => Promise<T>): (key: K) => Promise<T> {
  const running = new Map<K, Promise<T>>();
  return (key) => {
    let p = running.get(key);
    if (!p) running.set(key, (p = read(key).finally(() => running.delete(key))));
    return p;
  };
}

export function overviewRoutes(deps: OverviewDeps): ApiRoute[] {
  // Every open dashboard asks every few seconds: however many people watch, the database does one read at a time.
  // Per tenant: each tenant's figures are its runs' only.
  const read = deps.overview ? sharedWhileRunning((tenant: string | null) => deps.overview!.read(undefined, tenant)) : null;

  return [
    defineRoute({
      method: 'GET',
      path: '/api/overview',
      operationId: 'getOverview',
      summary: 'Runs by status; tokens, cost and p50/p95 step latency of the last hour and day',
      responses: {
        200: { description: 'The figures, read now.', schema: OverviewJson },
        404: { description: 'The overview is not enabled on this server.', schema: ErrorBody },
      },
      async handle({ caller }) {
        if (!read) throw new NotFoundError('the overview is not enabled on this server');
        return { body: overviewJson(await read(caller.tenant)) };
      },
    }),
  ];
}
