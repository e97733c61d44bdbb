/**
 * What a request to fork a run becomes. `POST /api/runs/{id}/fork` and `rt.runs.fork` both come
 * through here: the fork is a new run (the defaults and limits of `toNewRun` apply) whose log begins
 * with the source's steps 1..afterSeq, read from the source, never copied.
 */
import { z } from 'zod';
import type { Run } from '../domain/types.ts';
import { describeSeqs, wholeTurnEnds } from '../core/fork-points.ts';
import { InputError } from '../domain/errors.ts';
import type { RunRecords } from '../store/run-records.ts';
import { INPUT_NAMES, type InputPart } from './parse-input.ts';
import { type RunDefaults, toNewRun } from './new-run.ts';
import { ForkRunBody } from './requests.ts';

/** The library's options: the HTTP body plus the tenant, as for a create. */
export const ForkRunOptions = ForkRunBody;
export type ForkRunOptions = z.infer<typeof ForkRunOptions>;

export type ForkStore = Pick<RunRecords, 'create' | 'turnAt' | 'turnRows'>;

/**
 * Creates the fork of `source` after step `afterSeq`. The source may still be running: the fork takes
 * its steps checkpointed so far. `afterSeq` must end a whole turn, or the InputError lists those that do.
 */
export async function forkRun(
  store: ForkStore,
  source: Run,
  request: ForkRunOptions,
  defaults: RunDefaults,
  part: InputPart,
): Promise<Run> {
  const { afterSeq, ...rest } = request;
  // The fork is a run of its source's agent (a worker serving that agent drives it).
  const newRun = toNewRun(
    {
      ...rest,
      // The source's were checked when it was made.
      input: request.input ?? ((source.inputContent ?? source.input) as ForkRunOptions['input'] & {}),
      model: request.model ?? source.model,
      // The source's options, the fork's own over them, field by field.
      modelOptions: { ...(source.modelOptions as ForkRunOptions['modelOptions']), ...request.modelOptions },
      agent: source.agent,
    },
    defaults,
    part,
  );
  if (!wholeTurnEnds(await store.turnAt(source.id, afterSeq)).includes(afterSeq)) {
    const valid = wholeTurnEnds(await store.turnRows(source.id));
    const message =
      `step ${afterSeq} of run ${source.id} does not end a whole turn (or is not checkpointed yet); ` +
      `a fork can start after step ${describeSeqs(valid)}`;
    throw new InputError(`invalid ${INPUT_NAMES[part]}: afterSeq: ${message}`, [{ path: 'afterSeq', message }]);
  }
  return store.create({ ...newRun, tenant: source.tenant, forkedFrom: { runId: source.id, afterSeq } });
}
