/**
 * `rt.runs`: runs from the host program. Creating and listing parse their options with the HTTP
 * API's schemas and apply its defaults and limits (one shared function, `toNewRun`), so a run made
 * here is the run `POST /api/runs` would have made. Bad options are an InputError naming the field.
 */
import { z } from 'zod';
import { parseInput } from './api/errors.ts';
import { CreateRunOptions, type RunDefaults, toNewRun } from './api/new-run.ts';
import { forkRun, ForkRunOptions } from './api/fork-run.ts';
import { NotFoundError } from './errors.ts';
import { ListRunsQuery } from './api/schemas.ts';
import type { Run, RunId, RunStatus } from './domain.ts';
import type { RunWaits } from './run-waits.ts';
import type { RunListing, RunPage } from './store/run-listing.ts';
import type { RunStore } from './store/run-store.ts';

export type { RunPage } from './store/run-listing.ts';

export interface CreateRunInput {
  /** The task: the first user message of the conversation. */
  input: string;
  /** The agent to run; the runtime's agent when absent (naming another is an InputError). */
  agent?: string;
  /** The model to call; the agent's model, else DEFAULT_MODEL. */
  model?: string;
  /** Tokens the run may use (input, cache writes and output); default DEFAULT_TOKEN_BUDGET. */
  tokenBudget?: number;
  /** @unit seconds — wall-clock limit from now, then the run is TIMED_OUT; default DEFAULT_TIMEOUT_SECONDS. */
  timeoutSeconds?: number;
  /** Step cap, at most MAX_STEPS (the default). */
  maxSteps?: number;
  /** USD the run may spend on model calls (more than 0, at most 10000); default DEFAULT_COST_BUDGET_USD, else none. The model must have a price. */
  costBudgetUsd?: number;
  /** Any JSON object, kept with the run (at most 16 KiB as JSON). */
  metadata?: Record<string, unknown>;
  /** Continue the conversation of this finished run. Not supported yet: an InputError. */
  previousRunId?: string;
  /** Makes a repeated create return the first run. Not supported yet: an InputError. */
  idempotencyKey?: string;
  /** Whose run it is (what an API key of that tenant sees); "default" when absent. */
  tenant?: string;
}

/** A fork: a new run continuing another's conversation after one of its steps. */
export interface ForkRunInput extends Omit<CreateRunInput, 'input' | 'previousRunId' | 'idempotencyKey' | 'tenant'> {
  /** The last of the source's steps the fork's conversation holds; it must end a whole turn. */
  afterSeq: number;
  /** The first user message in place of the source's; the source's when absent. */
  input?: string;
}

export interface ListRunsInput {
  /** Only runs in this status. */
  status?: RunStatus;
  /** Runs per page, 1 to 100; default 20. */
  limit?: number;
  /** The `nextCursor` of the previous page. */
  cursor?: string;
  /** Only this tenant's runs; every tenant's when absent. */
  tenant?: string;
}

export interface WaitOptions {
  /** @unit milliseconds — give up (WaitTimeoutError) after this long; default: wait as long as it takes. */
  timeoutMs?: number;
}

export interface Runs {
  /** Queues a run; a worker (this runtime's, or any other on the same database) drives it. */
  create(input: CreateRunInput): Promise<Run>;
  /** The run, or null when there is none with this id. */
  get(id: string): Promise<Run | null>;
  /** Newest first, one page at a time. */
  list(query?: ListRunsInput): Promise<RunPage>;
  /** A queued run ends CANCELLED at once, a running one before its next step; a finished one is a ConflictError. */
  cancel(id: string): Promise<Run>;
  /** Resolves with the run once it has finished (SUCCEEDED, FAILED, CANCELLED or TIMED_OUT). */
  wait(id: string, options?: WaitOptions): Promise<Run>;
  /**
   * Queues a fork of run `id`: a new run whose conversation is that run's steps 1..afterSeq (read from
   * it, not copied), continued with `model` or from another first `input`. The source may still be
   * running. NotFoundError without such a run; InputError (listing the valid seqs) when afterSeq splits a turn.
   */
  fork(id: string, input: ForkRunInput): Promise<Run>;
}

export interface RunsDeps {
  store: Pick<RunStore, 'create' | 'get' | 'cancel' | 'turnAt' | 'turnRows'>;
  listing: Pick<RunListing, 'list'>;
  defaults: RunDefaults;
  waits: RunWaits;
}

const Id = z.strictObject({ id: z.guid('must be a run id (a UUID)') });
const ListOptions = ListRunsQuery.extend({ tenant: CreateRunOptions.shape.tenant });
const Wait = z.strictObject({ timeoutMs: z.number().int().min(1).max(2_147_483_647).optional() });

export function createRuns({ store, listing, defaults, waits }: RunsDeps): Runs {
  const runId = (id: string) => parseInput(Id, { id }, 'options').id as RunId;
  return {
    async create(input) {
      const request: CreateRunOptions = parseInput(CreateRunOptions, input, 'options');
      return store.create(toNewRun(request, defaults, 'options'));
    },
    async get(id) {
      return store.get(runId(id));
    },
    async list(query = {}) {
      return listing.list(parseInput(ListOptions, query, 'options'));
    },
    async cancel(id) {
      return store.cancel(runId(id));
    },
    async wait(id, options = {}) {
      const { timeoutMs } = parseInput(Wait, options, 'options');
      return waits.wait(runId(id), timeoutMs);
    },
    async fork(id, input) {
      const request = parseInput(ForkRunOptions, input, 'options');
      const source = await store.get(runId(id));
      if (!source) throw new NotFoundError(`run ${id} not found`);
      return forkRun(store, source, request, defaults, 'options');
    },
  };
}
