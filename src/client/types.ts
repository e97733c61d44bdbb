/**
 * What the HTTP API takes and returns, as TypeScript types inferred from the zod schemas the server
 * parses and answers with (the same shapes /openapi.json names). Type-only: nothing of the server is
 * loaded by a program that uses them.
 */
import type { z } from 'zod';
import type {
  CancelledRun,
  CreatedRun as CreatedRunSchema,
  DecidedRun,
  ErrorBody,
  ForkedRun as ForkedRunSchema,
  RunDetailJson,
  RunJson,
  RunListItemJson,
  RunPageJson,
  StepDetail as StepDetailSchema,
  TimelineItem,
  WaitingJson,
} from '../api/schemas.ts';
import type { RunEventPage as RunEventPageSchema } from '../api/schemas-events.ts';
import type { CreateRunBody, DecisionBody, ForkRunBody, ListRunsQuery } from '../runs/requests.ts';

/** The body of POST /api/runs. */
export type CreateRunRequest = z.input<typeof CreateRunBody>;
/** The body of POST /api/runs/{id}/fork. */
export type ForkRunRequest = z.input<typeof ForkRunBody>;
/** The body of POST /api/runs/{id}/tool-calls/{toolUseId}/decision. */
export type DecisionRequest = z.input<typeof DecisionBody>;
/** The query of GET /api/runs. */
export type ListRunsRequest = Partial<z.output<typeof ListRunsQuery>>;

export type CreatedRun = z.output<typeof CreatedRunSchema>;
export type ForkedRun = z.output<typeof ForkedRunSchema>;
export type CancelResult = z.output<typeof CancelledRun>;
export type DecisionResult = z.output<typeof DecidedRun>;
/** A run as GET /api/runs/{id} shows it (timestamps as ISO-8601 strings). */
export type RunDetail = z.output<typeof RunDetailJson>;
/** The fields every form of a run has. */
export type RunSummary = z.output<typeof RunJson>;
export type RunListItem = z.output<typeof RunListItemJson>;
export type RunPage = z.output<typeof RunPageJson>;
/** What a WAITING run waits for. */
export type Waiting = z.output<typeof WaitingJson>;
export type TimelineStep = z.output<typeof TimelineItem>;
export type StepDetail = z.output<typeof StepDetailSchema>;
export type RunEventPage = z.output<typeof RunEventPageSchema>;
/** The API's error shape: `{"error":{"code","message","issues"}}`. */
export type ApiErrorBody = z.output<typeof ErrorBody>;
