/**
 * `previousRunId`: the run a new run continues. It must exist, be the same tenant's (another
 * tenant's run is reported as missing, so its id says nothing), and have finished: a conversation
 * continues from an answer, not from the middle of a turn.
 */
import { isTerminal, type Run, type RunId } from '../domain/types.ts';
import { ConflictError, InputError } from '../domain/errors.ts';
import type { RunRecords } from '../store/run-records.ts';
import { INPUT_NAMES, type InputPart } from './parse-input.ts';

export async function previousRun(store: Pick<RunRecords, 'get'>, id: RunId, tenant: string, part: InputPart): Promise<Run> {
  const run = await store.get(id);
  if (!run || run.tenant !== tenant) {
    const message = `no run ${id}`;
    throw new InputError(`invalid ${INPUT_NAMES[part]}: previousRunId: ${message}`, [{ path: 'previousRunId', message }]);
  }
  if (!isTerminal(run.status)) {
    throw new ConflictError(`run ${id} is ${run.status}: a run can continue its conversation once it has finished`);
  }
  return run;
}
