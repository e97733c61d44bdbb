/**
 * One step with its request and response. A model step stores only its parameters and the digests of
 * the system prompt and tools (the messages are the log itself, so storing them again would make
 * storage quadratic), so its request is rebuilt here: the same replay the worker ran, over the steps
 * before it (after the earlier runs of its conversation), gives exactly the messages that were sent.
 */
import { isToolUse, type Run, type Step } from '../domain/types.ts';
import { replayRun } from '../core/chain-replay.ts';
import { summaryRequest } from '../core/compaction.ts';
import { NotFoundError } from '../domain/errors.ts';
import type { RunRecords } from '../store/run-records.ts';
import { timelineItem } from './present.ts';
import type { ModelRequestJson, StepDetail } from './schemas.ts';

export type StepSource = Pick<RunRecords, 'stepsThrough' | 'blob' | 'get' | 'conversationBefore'>;

export async function stepDetail(store: StepSource, run: Run, seq: number): Promise<StepDetail> {
  const steps = await store.stepsThrough(run.id, seq);
  const step = steps.at(-1);
  if (!step || step.seq !== seq) throw new NotFoundError(`run ${run.id} has no step ${seq}`);
  // A fork's inherited step is shown as its source sent it (the fork may have replaced the first input).
  const recordedIn = step.runId !== run.id ? await store.get(step.runId) : null;
  if (recordedIn) return { ...(await stepDetail(store, recordedIn, seq)), inherited: true, inheritedFrom: recordedIn.id };
  const earlier = steps.slice(0, -1);
  const request = step.kind === 'MODEL' ? await modelRequest(store, run, step, earlier) : toolRequest(step, earlier);
  return { ...timelineItem(step, run.id), request, response: step.response };
}

async function modelRequest(store: StepSource, run: Run, step: Step, earlier: Step[]): Promise<ModelRequestJson | null> {
  const params = step.request;
  if (!params) return null;
  const [system, tools, chain] = await Promise.all([
    params.systemDigest ? store.blob(params.systemDigest) : null,
    params.toolsDigest ? store.blob(params.toolsDigest) : null,
    run.previousRunId || run.forkedFrom ? store.conversationBefore(run.id) : [],
  ]);
  const { messages } = replayRun(run.inputContent ?? run.input, earlier, chain, params.model);
  const { compaction } = params;
  // The shape of a Messages API request; absent parts are left out, as the API wants them.
  return {
    model: params.model,
    max_tokens: params.maxTokens,
    ...(system !== null ? { system } : {}),
    ...(tools !== null ? { tools: JSON.parse(tools) as ModelRequestJson['tools'] } : {}),
    // A compaction step asked for a summary of the messages before the ones it kept.
    messages: compaction ? summaryRequest(messages, messages.length - compaction.keptMessages) : messages,
    ...(params.options ? { options: params.options as Record<string, unknown> } : {}),
    ...(compaction ? { compaction } : {}),
  };
}

/** A tool step's input is the tool_use block of the model step that asked for it (its most recent one). */
function toolRequest(step: Step, earlier: Step[]): StepDetail['request'] {
  for (let i = earlier.length - 1; i >= 0; i--) {
    const s = earlier[i]!;
    if (s.kind !== 'MODEL' || !Array.isArray(s.response)) continue;
    const use = s.response.find((b) => isToolUse(b) && b.id === step.toolUseId);
    if (use && isToolUse(use)) return { toolUseId: use.id, name: use.name, input: use.input };
  }
  return null;
}
