/**
 * `rt.runs`: runs from the host program. Creating and listing parse their options with the HTTP
 * API's schemas and apply its defaults and limits (one shared function, `toNewRun`), so a run made
 * here is the run `POST /api/runs` would have made. Bad options are an InputError naming the field.
 */
import { z } from 'zod';
import { parseInput } from './parse-input.ts';
import { CreateRunOptions, createRun, type RunDefaults } from './new-run.ts';
import { forkRun, ForkRunOptions } from './fork-run.ts';
import { NotFoundError } from '../domain/errors.ts';
import { DecisionBody, ListRunsQuery, ToolCallParams } from './requests.ts';
import { type ContentBlock, DEFAULT_TENANT, type Decision, type Run, type RunId, type RunStatus } from '../domain/types.ts';
import type { ModelOptions } from '../llm/types.ts';
import type { Decided } from '../store/decisions.ts';
import type { RunWaits } from './run-waits.ts';
import type { RunListing, RunPage } from '../store/run-listing.ts';
import type { RunRecords } from '../store/run-records.ts';

export type { RunPage } from '../store/run-listing.ts';

export interface CreateRunInput {
  /** The task: the first user message of the conversation, as text or content blocks (text, images, documents). */
  input: string | ContentBlock[];
  /** How the model is asked to answer (thinking, temperature, topP, topK, stopSequences, toolChoice, maxTokens), over the agent's. */
  modelOptions?: ModelOptions;
  /** The agent to run, by name; the runtime's first agent when absent (the previous run's with `previousRunId`). An agent the runtime does not have is an InputError. */
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
  /**
   * Continue the conversation of this finished run (the same tenant's): the model sees its messages,
   * then `input`. Same agent. An unknown run is an InputError, one still active a ConflictError.
   */
  previousRunId?: string;
  /**
   * A second create with the same key (and tenant) within 24 hours returns the first run instead of a
   * new one; with different options it is a ConflictError. Concurrent creates make one run.
   */
  idempotencyKey?: string;
  /** Not started before this time (ISO-8601, at most a year ahead); `timeoutSeconds` counts from then. */
  startAt?: string;
  /** Whose run it is (what an API key of that tenant sees); "default" when absent. */
  tenant?: string;
}

/** A fork: a new run continuing another's conversation after one of its steps. */
export interface ForkRunInput extends Omit<CreateRunInput, 'input' | 'agent' | 'previousRunId' | 'idempotencyKey' | 'tenant'> {
  /** The last of the source's steps the fork's conversation holds; it must end a whole turn. */
  afterSeq: number;
  /** The first user message in place of the source's; the source's when absent. */
  input?: string | ContentBlock[];
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
  /** Only this agent's runs. */
  agent?: string;
  /** Only the runs this schedule made. */
  scheduleId?: string;
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
  /**
   * Decides about a tool call the WAITING run holds (`run.waiting.toolCalls`): approve it, deny it with
   * a reason the model sees, or (for a call a crash left unfinished) complete it with its result. The
   * run continues once every call it waits for is decided. NotFoundError for a call the run never made;
   * ConflictError for one not waiting, or a decision contradicting the one made; the same one twice is fine.
   */
  decide(id: string, toolUseId: string, decision: Decision): Promise<Decided>;
}

export interface RunsDeps {
  store: Pick<RunRecords, 'create' | 'createOnce' | 'get' | 'cancel' | 'decide' | 'turnAt' | 'turnRows'>;
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
      return (await createRun(store, request, defaults, 'options', request.tenant ?? DEFAULT_TENANT)).run;
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
    async decide(id, toolUseId, decision) {
      const params = parseInput(ToolCallParams, { id, toolUseId }, 'options');
      return store.decide(params.id as RunId, params.toolUseId, parseInput(DecisionBody, decision, 'options') as Decision);
    },
  };
}
