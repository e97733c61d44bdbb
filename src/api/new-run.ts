/**
 * What a request to start a run becomes. `POST /api/runs` and `rt.runs.create` both come through
 * here, so both apply the same defaults and the same limits.
 */
import { z } from 'zod';
import { InputError } from '../errors.ts';
import { TENANT_PATTERN } from '../store/api-keys.ts';
import type { NewRun } from '../store/run-store.ts';
import { INPUT_NAMES, type InputPart } from './errors.ts';
import { CreateRunBody } from './schemas.ts';

/** What a run gets when its request leaves a field out; from the server's configuration and agent. */
export interface RunDefaults {
  /** The agent runs are driven with; a request naming another is refused. */
  agent: string;
  model: string;
  tokenBudget: number;
  timeoutSeconds: number;
  /** Also the most a run may ask for (MAX_STEPS: "a run may set a lower one"). */
  maxSteps: number;
  /** USD a run may spend when its request names no budget (DEFAULT_COST_BUDGET_USD); absent or null: none. */
  costBudgetUsd?: number | null;
  /** Whether the prices file prices `model`: a money budget means nothing for a model that costs "0". Absent: every model is. */
  isPriced?: (model: string) => boolean;
}

/** The library's options: the HTTP body plus what only a caller in the same process can ask for. */
export const CreateRunOptions = CreateRunBody.extend({
  previousRunId: z.guid().optional().describe('Continue the conversation of this finished run.'),
  idempotencyKey: z.string().min(1).max(200).optional().describe('A second create with the same key returns the first run.'),
  tenant: z.string().regex(TENANT_PATTERN, 'must be 1 to 64 letters, digits, ".", "_" or "-", starting with a letter or digit').optional()
    .describe('Whose run it is; "default" when absent. (Over HTTP the tenant is the API key\'s.)'),
});
export type CreateRunOptions = z.infer<typeof CreateRunOptions>;

/** The run to store for a parsed request (`part` names it in errors), or an InputError naming the field. */
export function toNewRun(request: CreateRunOptions, defaults: RunDefaults, part: InputPart): NewRun {
  const refuse = (path: string, message: string): never => {
    throw new InputError(`invalid ${INPUT_NAMES[part]}: ${path}: ${message}`, [{ path, message }]);
  };
  if (request.agent !== undefined && request.agent !== defaults.agent) {
    refuse('agent', `no agent "${request.agent}" here (this runtime serves "${defaults.agent}")`);
  }
  if (request.maxSteps !== undefined && request.maxSteps > defaults.maxSteps) {
    refuse('maxSteps', `must be at most ${defaults.maxSteps} (the server's MAX_STEPS)`);
  }
  if (request.previousRunId !== undefined) refuse('previousRunId', 'not supported yet');
  if (request.idempotencyKey !== undefined) refuse('idempotencyKey', 'not supported yet');
  const model = request.model ?? defaults.model;
  const costBudgetUsd = moneyBudget(request.costBudgetUsd, model, defaults, refuse);
  return {
    input: request.input,
    model,
    costBudgetUsd,
    tokenBudget: request.tokenBudget ?? defaults.tokenBudget,
    timeoutSeconds: request.timeoutSeconds ?? defaults.timeoutSeconds,
    maxSteps: request.maxSteps ?? defaults.maxSteps,
    metadata: request.metadata ?? {},
    ...(request.tenant !== undefined ? { tenant: request.tenant } : {}),
  };
}

/**
 * The run's money budget: the request's, else the server's default. Only for a priced model: an
 * unpriced one counts as costing nothing, so its budget would never stop anything.
 */
export function moneyBudget(
  requested: number | undefined,
  model: string,
  defaults: Pick<RunDefaults, 'costBudgetUsd' | 'isPriced'>,
  refuse: (path: string, message: string) => never,
): number | null {
  const budget = requested ?? defaults.costBudgetUsd ?? null;
  if (budget === null || !defaults.isPriced || defaults.isPriced(model)) return budget;
  const where = requested === undefined ? "the server's DEFAULT_COST_BUDGET_USD applies, but " : '';
  return refuse(requested === undefined ? 'model' : 'costBudgetUsd', `${where}model "${model}" has no price in the prices file, so a money budget cannot be kept; add its price or leave costBudgetUsd out`);
}
