/** The runs API: thin handlers that take parsed input, call the store and present the result. */
import type { Run, RunId } from '../domain.ts';
import { NotFoundError } from '../errors.ts';
import type { RunListing } from '../store/run-listing.ts';
import type { RunStore } from '../store/run-store.ts';
import { type RunDefaults, toNewRun } from './new-run.ts';
import { runJson, runListItem, timelineItem } from './present.ts';
import { defineRoute, type ApiRoute } from './route.ts';
import {
  CancelledRun,
  CreatedRun,
  CreateRunBody,
  ErrorBody,
  ListRunsQuery,
  RunDetailJson,
  RunPageJson,
  RunParams,
  StepDetail,
  StepParams,
  Timeline,
} from './schemas.ts';
import { stepDetail } from './step-detail.ts';

export type { RunDefaults } from './new-run.ts';

export type RunsStore = Pick<RunStore, 'create' | 'get' | 'latestProvider' | 'timeline' | 'stepsThrough' | 'cancel' | 'blob'>;

export interface RunsDeps {
  store: RunsStore;
  listing: Pick<RunListing, 'list'>;
  defaults: RunDefaults;
}

export function runRoutes({ store, listing, defaults }: RunsDeps): ApiRoute[] {
  async function existing(id: string): Promise<Run> {
    const run = await store.get(id as RunId);
    if (!run) throw new NotFoundError(`run ${id} not found`);
    return run;
  }

  return [
    defineRoute({
      method: 'POST',
      path: '/api/runs',
      operationId: 'createRun',
      summary: 'Queue a run',
      body: CreateRunBody,
      responses: { 201: { description: 'The run is queued.', schema: CreatedRun } },
      async handle({ body }) {
        const run = await store.create(toNewRun(body, defaults, 'body'));
        return { status: 201, headers: { location: `/api/runs/${run.id}` }, body: { id: run.id, status: 'QUEUED' } };
      },
    }),
    defineRoute({
      method: 'GET',
      path: '/api/runs',
      operationId: 'listRuns',
      summary: 'List runs, newest first',
      query: ListRunsQuery,
      responses: { 200: { description: 'One page of runs.', schema: RunPageJson } },
      async handle({ query }) {
        const page = await listing.list(query);
        return { body: { runs: page.runs.map(runListItem), nextCursor: page.nextCursor } };
      },
    }),
    defineRoute({
      method: 'GET',
      path: '/api/runs/{id}',
      operationId: 'getRun',
      summary: 'One run',
      params: RunParams,
      responses: { 200: { description: 'The run.', schema: RunDetailJson } },
      async handle({ params }) {
        const [run, provider] = await Promise.all([existing(params.id), store.latestProvider(params.id as RunId)]);
        return { body: { ...runJson(run), provider } };
      },
    }),
    defineRoute({
      method: 'GET',
      path: '/api/runs/{id}/timeline',
      operationId: 'getRunTimeline',
      summary: "The run's steps, without their request and response bodies",
      params: RunParams,
      responses: { 200: { description: 'The steps in order.', schema: Timeline } },
      async handle({ params }) {
        const run = await existing(params.id);
        return { body: (await store.timeline(run.id)).map(timelineItem) };
      },
    }),
    defineRoute({
      method: 'GET',
      path: '/api/runs/{id}/steps/{seq}',
      operationId: 'getRunStep',
      summary: 'One step with its request and response',
      params: StepParams,
      responses: { 200: { description: 'The step.', schema: StepDetail } },
      async handle({ params }) {
        return { body: await stepDetail(store, await existing(params.id), params.seq) };
      },
    }),
    defineRoute({
      method: 'POST',
      path: '/api/runs/{id}/cancel',
      operationId: 'cancelRun',
      summary: 'Cancel a run (a queued run at once, a running one at its next step)',
      params: RunParams,
      responses: {
        202: { description: 'Cancel recorded.', schema: CancelledRun },
        409: { description: 'The run has already finished, or is already being cancelled.', schema: ErrorBody },
      },
      async handle({ params }) {
        const run = await store.cancel(params.id as RunId);
        return { status: 202, body: { id: run.id, status: run.status, cancelRequested: true } };
      },
    }),
  ];
}
