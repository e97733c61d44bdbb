/** `durable-agent runs fork <id> --after-seq N [--model M] [--input TEXT]`: a new run continuing another's conversation. */
import type { z } from 'zod';
import type { ForkedRun } from '../api/schemas.ts';
import { runIdArgument, type RunsSubcommand } from './runs-context.ts';

export const forkCommand: RunsSubcommand = {
  name: 'fork',
  args: '<id>',
  summary: "start a new run from a run's conversation after one of its steps (a whole turn)",
  positionals: 1,
  options: {
    'after-seq': { type: 'string', help: 'the last step of the source the fork keeps (required; see `runs steps`)' },
    model: { type: 'string', help: "the model to continue with (default: the source's)" },
    input: { type: 'string', help: "the first user message in place of the source's" },
  },
  async run(ctx) {
    const id = runIdArgument(ctx);
    const after = ctx.options['after-seq'] as string | undefined;
    if (after === undefined || !/^[1-9]\d{0,9}$/.test(after)) throw ctx.usage('--after-seq must be a step number (1, 2, …)');
    const body = {
      afterSeq: Number(after),
      ...(ctx.options.model !== undefined ? { model: ctx.options.model } : {}),
      ...(ctx.options.input !== undefined ? { input: ctx.options.input } : {}),
    };
    const r = await ctx.api().post<z.infer<typeof ForkedRun>>(`/api/runs/${id}/fork`, body);
    ctx.out(
      ctx.json ? `${JSON.stringify(r, null, 2)}\n` : `run ${r.id} QUEUED (a fork of run ${id} after step ${r.forkedFrom.afterSeq})\n`,
    );
    return 0;
  },
};
