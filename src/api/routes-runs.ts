/**
 * The runs API: thin handlers that take parsed input, call the store and present the result. A
 * caller bound to a tenant creates runs for it and lists only its runs; the routes of one run get
 * that run from the server, already checked to be the caller's (run-access.ts).
 */
import { z } from 'zod';
import { DEFAULT_TENANT } from '../domain/types.ts';
import type { RunListing } from '../store/run-listing.ts';
import type { RunDeletion } from '../store/retention.ts';
import type { RunRecords } from '../store/run-records.ts';
import { forkRun } from '../runs/fork-run.ts';
import { parseInput } from './errors.ts';
import { decisionRoute } from './routes-decisions.ts';
import { createRun, type RunDefaults } from '../runs/new-run.ts';
import { runJson, runListItem, timelineItem } from './present.ts';
import { CONTENT_BODY_LIMIT, defineRoute, defineRunRoute, type ApiRoute } from './route.ts';
import {
  CancelledRun,
  CreatedRun,
  CreateRunBody,
  ErrorBody,
  ForkedRun,
  ForkRunBody,
  IdempotencyKey,
  ListRunsQuery,
  RunDetailJson,
  RunPageJson,
  RunParams,
  StepDetail,
  StepParams,
  Timeline,
} from './schemas.ts';
import { stepDetail } from './step-detail.ts';

export type { RunDefaults } from '../runs/new-run.ts';

export type RunsStore = Pick<
  RunRecords,
  | 'create'
  | 'createOnce'
  | 'decide'
  | 'get'
  | 'latestProvider'
  | 'timeline'
  | 'stepsThrough'
  | 'cancel'
  | 'blob'
  | 'conversationBefore'
  | 'turnAt'
  | 'turnRows'
>;

export interface RunsDeps {
  store: RunsStore;
  listing: Pick<RunListing, 'list'>;
  defaults: RunDefaults;
  /** Without it DELETE /api/runs/{id} is not a route (405). */
  deletion?: Pick<RunDeletion, 'deleteRun'> | undefined;
}

function deleteRoute(deletion: Pick<RunDeletion, 'deleteRun'>): ApiRoute {
  return defineRunRoute({
    method: 'DELETE',
    path: '/api/runs/{id}',
    operationId: 'deleteRun',
    summary: 'Delete a finished run: the run, its steps, its events and the stored texts only it refers to',
    params: RunParams,
    responses: {
      204: { description: 'The run and everything only it referred to are gone.' },
      409: { description: 'The run is still QUEUED or RUNNING: cancel it first.', schema: ErrorBody },
    },
    async handle({ run, caller }) {
      await deletion.deleteRun(run.id, caller.tenant);
      return { status: 204, body: null };
    },
  });
}

const IdempotencyHeaders = z.object({ 'idempotency-key': IdempotencyKey.optional() });

export function runRoutes({ store, listing, defaults, deletion }: RunsDeps): ApiRoute[] {
  return [
    defineRoute({
      method: 'POST',
      path: '/api/runs',
      operationId: 'createRun',
      summary: 'Queue a run',
      body: CreateRunBody,
      bodyLimit: CONTENT_BODY_LIMIT,
      headers: IdempotencyHeaders,
      responses: {
        201: { description: 'The run is queued.', schema: CreatedRun },
        200: {
          description: 'An Idempotency-Key answered the run created with it (the same body) in the last 24 hours.',
          schema: CreatedRun,
        },
        409: {
          description: 'previousRunId names a run that has not finished yet, or the Idempotency-Key was used with a different body.',
          schema: ErrorBody,
        },
      },
      async handle({ body, caller, headers }) {
        const { 'idempotency-key': idempotencyKey } = parseInput(IdempotencyHeaders, headers, 'headers');
        const request = idempotencyKey === undefined ? body : { ...body, idempotencyKey };
        const { run, created } = await createRun(store, request, defaults, 'body', caller.tenant ?? DEFAULT_TENANT);
        return { status: created ? 201 : 200, headers: { location: `/api/runs/${run.id}` }, body: { id: run.id, status: run.status } };
      },
    }),
    defineRoute({
      method: 'GET',
      path: '/api/runs',
      operationId: 'listRuns',
      summary: 'List runs, newest first',
      query: ListRunsQuery,
      responses: { 200: { description: 'One page of runs.', schema: RunPageJson } },
      async handle({ query, caller }) {
        const page = await listing.list({ ...query, tenant: caller.tenant });
        return { body: { runs: page.runs.map(runListItem), nextCursor: page.nextCursor } };
      },
    }),
    defineRunRoute({
      method: 'GET',
      path: '/api/runs/{id}',
      operationId: 'getRun',
      summary: 'One run',
      params: RunParams,
      responses: { 200: { description: 'The run.', schema: RunDetailJson } },
      async handle({ run }) {
        const provider = await store.latestProvider(run.id);
        return { body: { ...runJson(run), provider } };
      },
    }),
    ...(deletion ? [deleteRoute(deletion)] : []),
    defineRunRoute({
      method: 'POST',
      path: '/api/runs/{id}/fork',
      operationId: 'forkRun',
      summary: "Start a new run from this run's conversation after one of its steps, with another model or first input",
      params: RunParams,
      body: ForkRunBody,
      bodyLimit: CONTENT_BODY_LIMIT,
      responses: {
        201: {
          description: "The fork is queued; its log begins with the source's steps 1..afterSeq, referred to, not copied.",
          schema: ForkedRun,
        },
        400: {
          description: 'afterSeq does not end a whole turn (the message lists the seqs that do), or another field is invalid.',
          schema: ErrorBody,
        },
      },
      async handle({ run, body }) {
        const fork = await forkRun(store, run, body, defaults, 'body');
        return {
          status: 201,
          headers: { location: `/api/runs/${fork.id}` },
          body: { id: fork.id, status: 'QUEUED', forkedFrom: fork.forkedFrom! },
        };
      },
    }),
    defineRunRoute({
      method: 'GET',
      path: '/api/runs/{id}/timeline',
      operationId: 'getRunTimeline',
      summary: "The run's steps, without their request and response bodies",
      params: RunParams,
      responses: { 200: { description: 'The steps in order.', schema: Timeline } },
      async handle({ run }) {
        return { body: (await store.timeline(run.id)).map((s) => timelineItem(s, run.id)) };
      },
    }),
    defineRunRoute({
      method: 'GET',
      path: '/api/runs/{id}/steps/{seq}',
      operationId: 'getRunStep',
      summary: 'One step with its request and response',
      params: StepParams,
      responses: { 200: { description: 'The step.', schema: StepDetail } },
      async handle({ params, run }) {
        return { body: await stepDetail(store, run, params.seq) };
      },
    }),
    defineRunRoute({
      method: 'POST',
      path: '/api/runs/{id}/cancel',
      operationId: 'cancelRun',
      summary: 'Cancel a run (a queued or waiting run at once, a running one at its next step)',
      params: RunParams,
      responses: {
        202: { description: 'Cancel recorded.', schema: CancelledRun },
        409: { description: 'The run has already finished, or is already being cancelled.', schema: ErrorBody },
      },
      async handle({ run }) {
        const cancelled = await store.cancel(run.id);
        return { status: 202, body: { id: cancelled.id, status: cancelled.status, cancelRequested: true } };
      },
    }),
    decisionRoute(store),
  ];
}
