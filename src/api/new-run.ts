/**
 * What a request to start a run becomes. `POST /api/runs` and `rt.runs.create` both come through
 * here, so both apply the same defaults and the same limits.
 */
import { createHash } from 'node:crypto';
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
}

/** The library's options: the HTTP body plus what only a caller in the same process can ask for. */
export const CreateRunOptions = CreateRunBody.extend({
  previousRunId: z.guid().optional().describe('Continue the conversation of this finished run.'),
  idempotencyKey: z.string().min(1).max(200).optional().describe('A second create with the same key (and the same options) within 24 hours returns the first run.'),
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
  const startAt = request.startAt === undefined ? undefined : new Date(request.startAt);
  if (startAt && startAt.getTime() > Date.now() + MAX_START_DELAY_MS) refuse('startAt', 'must be at most a year ahead');
  const { idempotencyKey, tenant: _tenant, ...asked } = request;
  return {
    input: request.input,
    model: request.model ?? defaults.model,
    tokenBudget: request.tokenBudget ?? defaults.tokenBudget,
    timeoutSeconds: request.timeoutSeconds ?? defaults.timeoutSeconds,
    maxSteps: request.maxSteps ?? defaults.maxSteps,
    metadata: request.metadata ?? {},
    ...(request.tenant !== undefined ? { tenant: request.tenant } : {}),
    ...(startAt ? { startAt } : {}),
    ...(idempotencyKey !== undefined ? { idempotencyKey, requestHash: requestHash(asked) } : {}),
  };
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
    const entries = Object.entries(v).filter(([, x]) => x !== undefined).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    return `{${entries.map(([k, x]) => `${JSON.stringify(k)}:${canonicalJson(x)}`).join(',')}}`;
  }
  return JSON.stringify(v) ?? 'null';
}
