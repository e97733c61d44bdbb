/**
 * `durable-agent runs approve <id> <toolUseId>` and `runs deny <id> <toolUseId> --reason …`: a
 * person's decision about a tool call a WAITING run holds (`runs show` lists them), through
 * POST /api/runs/{id}/tool-calls/{toolUseId}/decision.
 */
import type { z } from 'zod';
import type { DecidedRun } from '../api/schemas.ts';
import { type RunsContext, type RunsSubcommand, runIdArgument } from './runs-context.ts';

async function decide(ctx: RunsContext, body: { decision: 'approve' } | { decision: 'deny'; reason: string }): Promise<number> {
  const id = runIdArgument(ctx);
  const toolUseId = ctx.args[1]!;
  const r = await ctx.api().post<z.infer<typeof DecidedRun>>(`/api/runs/${id}/tool-calls/${encodeURIComponent(toolUseId)}/decision`, body);
  if (ctx.json) return ctx.out(`${JSON.stringify(r, null, 2)}\n`), 0;
  const what = body.decision === 'approve' ? 'approved' : 'denied';
  ctx.out(r.status === 'QUEUED' ? `${what} ${toolUseId}; run ${id} continues\n` : `${what} ${toolUseId}; run ${id} is ${r.status} (other calls still wait for a decision)\n`);
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
