/**
 * `durable-agent runs approve <id> <toolUseId>`, `runs deny <id> <toolUseId> --reason …` and
 * `runs complete <id> <toolUseId> --result …`: a person's decision about a tool call a WAITING run
 * holds (`runs show` lists them and says which apply), through
 * POST /api/runs/{id}/tool-calls/{toolUseId}/decision.
 */
import type { z } from 'zod';
import type { DecidedRun } from '../api/schemas.ts';
import { type RunsContext, type RunsSubcommand, runIdArgument } from './runs-context.ts';

type DecisionBody = { decision: 'approve' } | { decision: 'deny'; reason: string } | { decision: 'complete'; result: string };

const PAST: Record<DecisionBody['decision'], string> = { approve: 'approved', deny: 'denied', complete: 'completed' };

async function decide(ctx: RunsContext, body: DecisionBody): Promise<number> {
  const id = runIdArgument(ctx);
  const toolUseId = ctx.args[1]!;
  // The API's own limit, checked here so a pasted fragment is a usage error (2), not a refused request (1).
  if (!toolUseId || toolUseId.length > 200) throw ctx.usage(`"${toolUseId.slice(0, 60)}" is not a tool call id (runs show lists them)`);
  const r = await ctx.api().post<z.infer<typeof DecidedRun>>(`/api/runs/${id}/tool-calls/${encodeURIComponent(toolUseId)}/decision`, body);
  if (ctx.json) return (ctx.out(`${JSON.stringify(r, null, 2)}\n`), 0);
  const what = PAST[body.decision];
  // The same decision made again is accepted, whatever the run has done since.
  const where =
    r.status === 'QUEUED' ? 'continues' : r.status === 'WAITING' ? 'is WAITING (other calls still wait for a decision)' : `is ${r.status}`;
  ctx.out(`${what} ${toolUseId}; run ${id} ${where}\n`);
  return 0;
}

export const approveCommand: RunsSubcommand = {
  name: 'approve',
  args: '<id> <toolUseId>',
  summary: 'approve a tool call a WAITING run holds',
  positionals: 2,
  run: (ctx) => decide(ctx, { decision: 'approve' }),
};

export const denyCommand: RunsSubcommand = {
  name: 'deny',
  args: '<id> <toolUseId>',
  summary: 'deny a tool call a WAITING run holds; the model is told the reason',
  positionals: 2,
  options: { reason: { type: 'string', help: 'why (required): the model sees it' } },
  async run(ctx) {
    const reason = ctx.options.reason;
    if (typeof reason !== 'string' || !reason.trim()) throw ctx.usage('--reason is required');
    return decide(ctx, { decision: 'deny', reason });
  },
};

export const completeCommand: RunsSubcommand = {
  name: 'complete',
  args: '<id> <toolUseId>',
  summary: 'a call a crash left unfinished did happen: record its result (it is not run again)',
  positionals: 2,
  options: { result: { type: 'string', help: 'what it returned (required): text or JSON text; the model gets it as the result' } },
  async run(ctx) {
    const result = ctx.options.result;
    // The text goes to the model as it is typed; JSON text is not re-serialised, so it stays as given.
    if (typeof result !== 'string' || !result.trim())
      throw ctx.usage('--result is required: what the call returned, e.g. --result \'{"charged":true}\'');
    return decide(ctx, { decision: 'complete', result });
  },
};
