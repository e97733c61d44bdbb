/**
 * POST /api/runs/{id}/tool-calls/{toolUseId}/decision: a person approves or denies a waiting tool
 * call, or says what became of a call a crash left unfinished. When the last pending call of the wait
 * is decided, the run is queued again and continues.
 */
import type { RunRecords } from '../store/run-records.ts';
import { defineRunRoute, type ApiRoute } from './route.ts';
import { DecidedRun, DecisionBody, ErrorBody, ToolCallParams } from './schemas.ts';

export function decisionRoute(store: Pick<RunRecords, 'decide'>): ApiRoute {
  return defineRunRoute({
    method: 'POST',
    path: '/api/runs/{id}/tool-calls/{toolUseId}/decision',
    operationId: 'decideToolCall',
    summary: 'Approve or deny a waiting tool call (or complete one a crash left unfinished)',
    params: ToolCallParams,
    body: DecisionBody,
    responses: {
      202: {
        description: 'Recorded (or the same decision was recorded already). QUEUED once every pending call is decided.',
        schema: DecidedRun,
      },
      404: { description: 'No such run, or the run made no such tool call.', schema: ErrorBody },
      409: { description: 'The call is not waiting for a decision, or the decision contradicts the one already made.', schema: ErrorBody },
    },
    async handle({ params, body, run }) {
      return { status: 202, body: await store.decide(run.id, params.toolUseId, body) };
    },
  });
}
