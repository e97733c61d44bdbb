/**
 * What a request to start a run becomes. `POST /api/runs` and `rt.runs.create` both come through
 * here, so both apply the same defaults and the same limits.
 */
import { createHash } from 'node:crypto';
import { z } from 'zod';
import { InputError } from '../domain/errors.ts';
import { TENANT_PATTERN } from '../store/api-keys.ts';
import type { Run, RunId } from '../domain/types.ts';
import type { NewRun, RunRecords } from '../store/run-records.ts';
import { INPUT_NAMES, type InputPart } from './parse-input.ts';
import { previousRun } from './previous-run.ts';
import { CreateRunBody } from './requests.ts';
import { mergeModelOptions, type OptionsProblem, optionsProblem } from '../llm/model-options.ts';
import type { ModelOptions } from '../llm/types.ts';

/** What a run of one agent gets when its request leaves a field out. */
export interface AgentDefaults {
  /** The agent's model, else its model client's, else DEFAULT_MODEL. */
  model: string;
  /** The version label of the agent's definition, recorded with each run. */
  version: string | null;
  /** The agent's model options, under each run's own; absent or null: none. */
  modelOptions?: ModelOptions | null;
  /** The agent's max tokens per call (its own, else MAX_TOKENS); absent: not checked against. */
  maxTokens?: number;
  /** What the agent's model client refuses of some options (see LlmClient.checkOptions); absent: nothing. */
  checkOptions?: (options: ModelOptions) => OptionsProblem | null;
}

/**
 * The first thing wrong with `options` as the calls of a run of `agent` would send them: a combination
 * the provider refuses, or an option its client has no equivalent for; null when there is none.
 */
export function modelOptionsProblem(options: ModelOptions, agent: AgentDefaults): OptionsProblem | null {
  const maxTokens = options.maxTokens ?? agent.maxTokens ?? Number.POSITIVE_INFINITY;
  return optionsProblem(options, maxTokens) ?? agent.checkOptions?.(options) ?? null;
}

/** What a run gets when its request leaves a field out; from the server's configuration and agents. */
export interface RunDefaults {
  /** The agent of a request that names none (the runtime's first). */
  agent: string;
  /** The model of the default agent's runs. */
  model: string;
  /**
   * Every agent a request may name, with its defaults. Absent: only `agent`, with `model`. A runtime
   * knows the agents it was given, whether or not its process drives runs.
   */
  agents?: ReadonlyMap<string, AgentDefaults>;
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
  idempotencyKey: z
    .string()
    .min(1)
    .max(200)
    .optional()
    .describe('A second create with the same key (and the same options) within 24 hours returns the first run.'),
  tenant: z
    .string()
    .regex(TENANT_PATTERN, 'must be 1 to 64 letters, digits, ".", "_" or "-", starting with a letter or digit')
    .optional()
    .describe('Whose run it is; "default" when absent. (Over HTTP the tenant is the API key\'s.)'),
});
export type CreateRunOptions = z.infer<typeof CreateRunOptions>;

function agentsOf(defaults: RunDefaults): ReadonlyMap<string, AgentDefaults> {
  return defaults.agents ?? new Map([[defaults.agent, { model: defaults.model, version: null }]]);
}

/**
 * The run to store for a parsed request (`part` names it in errors), or an InputError naming the
 * field. `previous` is the run named by `previousRunId`, already found and checked (previous-run.ts):
 * the new run continues with its agent.
 */
export function toNewRun(request: CreateRunOptions, defaults: RunDefaults, part: InputPart, previous: Run | null = null): NewRun {
  const refuse = (path: string, message: string): never => {
    throw new InputError(`invalid ${INPUT_NAMES[part]}: ${path}: ${message}`, [{ path, message }]);
  };
  const agents = agentsOf(defaults);
  const agent = request.agent ?? previous?.agent ?? defaults.agent;
  const known = agents.get(agent);
  if (!known) {
    const served = [...agents.keys()].map((n) => `"${n}"`).join(', ');
    refuse('agent', `no agent "${agent}" here (this runtime has ${served})`);
  }
  if (previous && previous.agent !== agent) {
    refuse('agent', `run ${previous.id} is a run of agent "${previous.agent}": a conversation continues with its agent`);
  }
  if (request.maxSteps !== undefined && request.maxSteps > defaults.maxSteps) {
    refuse('maxSteps', `must be at most ${defaults.maxSteps} (the server's MAX_STEPS)`);
  }
  const startAt = request.startAt === undefined ? undefined : new Date(request.startAt);
  if (startAt && startAt.getTime() > Date.now() + MAX_START_DELAY_MS) refuse('startAt', 'must be at most a year ahead');
  const { idempotencyKey, tenant: _tenant, ...asked } = request;
  const model = request.model ?? known!.model;
  // Fixed now, the agent's under the run's own: a deploy that changes the agent's options mid-run does
  // not change how the model is asked in the middle of a task (thinking switched on inside a tool loop
  // would even be refused).
  const modelOptions = mergeModelOptions(known!.modelOptions ?? null, request.modelOptions ?? null);
  if (request.modelOptions) {
    const problem = modelOptionsProblem(modelOptions!, known!);
    if (problem) refuse(problem.path, problem.message);
  }
  const costBudgetUsd = moneyBudget(request.costBudgetUsd, model, defaults, refuse);
  return {
    input: request.input,
    agent,
    agentVersion: known!.version,
    previousRunId: previous?.id ?? null,
    model,
    modelOptions,
    costBudgetUsd,
    tokenBudget: request.tokenBudget ?? defaults.tokenBudget,
    timeoutSeconds: request.timeoutSeconds ?? defaults.timeoutSeconds,
    maxSteps: request.maxSteps ?? defaults.maxSteps,
    metadata: request.metadata ?? {},
    ...(request.tenant !== undefined ? { tenant: request.tenant } : {}),
    ...(startAt ? { startAt } : {}),
    ...(idempotencyKey !== undefined ? { idempotencyKey, requestHash: requestHash(asked) } : {}),
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
  return refuse(
    requested === undefined ? 'model' : 'costBudgetUsd',
    `${where}model "${model}" has no price in the prices file, so a money budget cannot be kept; add its price or leave costBudgetUsd out`,
  );
}

/**
 * Creates the run a request asks for: finds the run it continues (when it names one), applies the
 * defaults and limits, stores it (or, for a repeated Idempotency-Key, answers the run it made:
 * `created` false). `tenant` is whose run it is (and whose run it may continue).
 */
export async function createRun(
  store: Pick<RunRecords, 'createOnce' | 'get'>,
  request: CreateRunOptions,
  defaults: RunDefaults,
  part: InputPart,
  tenant: string,
): Promise<{ run: Run; created: boolean }> {
  const previous = request.previousRunId === undefined ? null : await previousRun(store, request.previousRunId as RunId, tenant, part);
  return store.createOnce({ ...toNewRun(request, defaults, part, previous), tenant });
}

const MAX_START_DELAY_MS = 366 * 86_400_000;

/**
 * The SHA-256 of a request in canonical JSON (keys sorted at every level): the same request however
 * its keys were ordered or spaced. What an Idempotency-Key's later uses are compared with.
 */
export function requestHash(request: unknown): string {
  return createHash('sha256').update(canonicalJson(request)).digest('hex');
}

function canonicalJson(v: unknown): string {
  if (Array.isArray(v)) return `[${v.map(canonicalJson).join(',')}]`;
  if (v !== null && typeof v === 'object') {
    const entries = Object.entries(v)
      .filter(([, x]) => x !== undefined)
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    return `{${entries.map(([k, x]) => `${JSON.stringify(k)}:${canonicalJson(x)}`).join(',')}}`;
  }
  return JSON.stringify(v) ?? 'null';
}
