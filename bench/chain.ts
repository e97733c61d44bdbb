/**
 * Conversations in `npm run bench`: what a step costs in the 100th run of a chain (each run continuing
 * the one before, previousRunId) against a step of a run on its own. A claimed run reads its chain once
 * (conversationBefore) and then folds each new step onto what it holds, so the two should match; the
 * chain read itself is measured apart (it is paid once per claim, not per step).
 */
import type { RunId } from '../src/domain/types.ts';
import type { EngineEvents } from '../src/ports/engine-events.ts';
import type { Worker } from '../src/engine/worker.ts';
import type { LlmClient, LlmRequest, LlmResponse } from '../src/llm/types.ts';
import type { RunRecords } from '../src/store/run-records.ts';
import type { Tool } from '../src/tools/types.ts';

export interface ChainBenchDeps {
  records: RunRecords;
  /** A worker of one agent with `tool`, driving one run at a time, reporting steps to `events`. */
  worker: (llm: LlmClient, tool: Tool, concurrency: number, events: EngineEvents) => Worker;
  untilDone: (ids: RunId[]) => Promise<void>;
}

const p50 = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
const round = (x: number, d = 3) => Number(x.toFixed(d));

/** Zero latency: `toolTurns` turns of one tool call in each run (counted from the run's own input), then the answer. */
function perRunModel(toolTurns: number): LlmClient {
  let n = 0;
  return {
    provider: 'bench',
    async send(req: LlmRequest): Promise<LlmResponse> {
      let inputAt = req.messages.length - 1;
      while (inputAt > 0 && typeof req.messages[inputAt]!.content !== 'string') inputAt--;
      const turns = req.messages.slice(inputAt).filter((m) => m.role === 'assistant').length;
      const content =
        turns < toolTurns ? [{ type: 'tool_use', id: `toolu_chain_${++n}`, name: 'noop', input: {} }] : [{ type: 'text', text: 'done' }];
      const usage = { inputTokens: 100, outputTokens: 20, cacheCreationInputTokens: 0, cacheReadInputTokens: 0 };
      return {
        id: null,
        model: 'bench',
        content,
        stopReason: turns < toolTurns ? 'tool_use' : 'end_turn',
        usage,
        requestId: null,
        attempts: 1,
      };
    },
  };
}

export async function chainBench({ records, worker, untilDone }: ChainBenchDeps): Promise<Record<string, number>> {
  const noop: Tool = { name: 'noop', description: 'returns at once', inputSchema: { type: 'object' }, execute: async () => 'ok' };
  const create = (previousRunId: RunId | null) =>
    records.create({ input: 'and then?', model: 'bench', tokenBudget: 10_000_000, timeoutSeconds: 3600, maxSteps: 100, previousRunId });
  const stepTimes = new Map<string, Map<number, number>>();
  const mark = (e: { run: { id: string }; seq: number }) => {
    let at = stepTimes.get(e.run.id);
    if (!at) stepTimes.set(e.run.id, (at = new Map()));
    at.set(e.seq, performance.now());
  };
  /** The median time between consecutive steps of one run (11 steps: 5 tool turns and the answer). */
  const perStep = (id: RunId) => {
    const at = stepTimes.get(id)!;
    return p50(Array.from({ length: 10 }, (_, i) => at.get(i + 2)! - at.get(i + 1)!));
  };

  // The chain: 99 runs of 3 steps each, every one continuing the one before.
  const short = worker(perRunModel(1), noop, 1, {});
  await short.start();
  let last: RunId | null = null;
  for (let i = 0; i < 99; i++) {
    const run = await create(last);
    await untilDone([run.id]);
    last = run.id;
  }
  await short.stop();

  // Runs of 11 steps, measured one at a time: on their own, then as the 100th run of that chain (in
  // turn, so both see the same load; several runs may continue the same run).
  const w = worker(perRunModel(5), noop, 1, { modelStep: mark, toolStep: mark });
  await w.start();
  const single: number[] = [];
  const hundredth: number[] = [];
  let hundredthRun: RunId | null = null;
  for (let i = 0; i < 7; i++) {
    const alone = await create(null);
    await untilDone([alone.id]);
    const chained = await create(last);
    await untilDone([chained.id]);
    hundredthRun = chained.id;
    if (i < 2) continue; // warm-up
    single.push(perStep(alone.id));
    hundredth.push(perStep(chained.id));
  }
  await w.stop();

  const reads: number[] = [];
  for (let i = 0; i < 10; i++) {
    const t = performance.now();
    // What the claim of a 100th run reads: the 99 runs before its own log.
    await records.conversationBefore(hundredthRun!);
    reads.push(performance.now() - t);
  }
  return {
    chainPerStepMsSingle: round(p50(single)),
    chainPerStepMsAt100th: round(p50(hundredth)),
    chainReadAtClaimP50Ms: round(p50(reads)),
  };
}
