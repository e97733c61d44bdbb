/**
 * `createRuntime`: durable-agent inside your program. It serves your agents — a worker that claims
 * and drives runs, and the HTTP API unless `api: false` — on the database you name or the one the
 * environment names, with everything else configured from the environment as the CLI is.
 */
import { checkAgents, type Agent } from '../agents/define-agent.ts';
import type { AuthenticateHook } from '../api/auth.ts';
import { type Env, loadConfig } from '../config/environment.ts';
import type { Run } from '../domain/types.ts';
import { publicRun } from '../ports/claimed-run.ts';
import type { DrivenRun } from '../ports/engine-store.ts';
import type { EngineEvents } from '../ports/engine-events.ts';
import type { LlmClient } from '../llm/types.ts';
import type { Logger } from '../observability/logger.ts';
import type { Runs } from '../runs/runs.ts';
import { startRuntime } from './start-runtime.ts';
import type { ScheduleDefinition } from './declared-schedules.ts';
import type { SchedulesApi } from '../runs/schedules.ts';

/** One of the engine's events, tagged with its name: `{ type: 'modelStep', run, seq, response, … }`. */
export type RuntimeEvent = {
  [K in keyof EngineEvents]-?: { type: K } & PublicRunIn<Parameters<NonNullable<EngineEvents[K]>>[0]>;
}[keyof EngineEvents];

/** An engine event as it is handed out: the run it names is a Run (see publicRun). */
type PublicRunIn<E> = E extends { run: DrivenRun } ? Omit<E, 'run'> & { run: Run } : E;

export interface CreateRuntimeOptions {
  /**
   * The agents to serve (made with defineAgent; distinct names). The first is the agent of a run that
   * names none. This runtime's worker claims only their runs: runtimes with other agents can share
   * the database.
   */
  agents: readonly Agent[];
  /** The HTTP API: where to listen (port 0 takes a free port), or false for none; default PORT and HOST. */
  api?: { port?: number; host?: string } | false;
  /** Whether this process claims and drives runs; default true. */
  worker?: boolean;
  /** The PostgreSQL to use; default DATABASE_URL, else the embedded server under DATA_DIR. */
  databaseUrl?: string;
  /** Where this worker keeps the workspaces of the runs it drives (agents with a `workspace`); default WORKSPACE_ROOT. */
  workspaceRoot?: string;
  /** A model client instead of the configured provider (LLM_PROVIDER, ANTHROPIC_API_KEY). */
  llm?: LlmClient;
  /** A pino logger instead of one on stdout: the runtime's lines about a run carry run_id and worker (and step_seq), a tool's ctx.log writes to it. */
  logger?: Logger;
  /**
   * Called with every engine event (each names its run and worker), synchronously: keep it cheap.
   * What it throws is ignored, so an observer can never break the run it observes. An event's `run` is
   * the run as it was claimed, made for the event: its fields and Dates are its own, its objects
   * (`metadata`, `modelOptions`, `waiting`, …) the worker's, to read only.
   */
  onEvent?: (event: RuntimeEvent) => void;
  /**
   * Authenticates the HTTP API's requests instead of the database's API keys: return the caller's
   * tenant (it sees and creates that tenant's runs only), or null to answer 401. May be async.
   */
  authenticate?: AuthenticateHook;
  /**
   * Schedules declared in code (`defineSchedule`): at start each is made, or changed to what the code
   * says, and those declared before and no longer are deleted. Absent: schedules are left as they are.
   */
  schedules?: readonly ScheduleDefinition[];
}

export interface AgentRuntime {
  /** Create, read, list, cancel and wait for runs, with the rules of the HTTP API. */
  readonly runs: Runs;
  /** Make, read, change, delete, trigger and backfill schedules, with the rules of the HTTP API. */
  readonly schedules: SchedulesApi;
  /** `http://host:port` of the API, null without one. */
  readonly url: string | null;
  /** Stops claiming, hands runs in flight back to the queue, closes the API and the database pool. */
  close(): Promise<void>;
}

/** Every event the engine emits; a new one is a compile error here until it is forwarded too. */
const EVENT_TYPES = {
  runClaimed: true,
  modelStep: true,
  modelFailed: true,
  stepWarning: true,
  toolStarted: true,
  toolStep: true,
  runFinished: true,
  leaseLost: true,
  attemptEnded: true,
  runWaiting: true,
} satisfies Record<keyof EngineEvents, true>;

function forwardEvents(onEvent: (event: RuntimeEvent) => void): EngineEvents {
  return Object.fromEntries(
    Object.keys(EVENT_TYPES).map((type) => [
      type,
      (e: { run?: DrivenRun }) => onEvent({ type, ...e, ...(e.run && { run: publicRun(e.run) }) } as RuntimeEvent),
    ]),
  ) as EngineEvents;
}

export async function createRuntime(options: CreateRuntimeOptions): Promise<AgentRuntime> {
  const agents = checkAgents(options?.agents, 'createRuntime');
  const api = options.api ?? {};
  const overrides: Partial<Env> = {};
  if (options.databaseUrl !== undefined) overrides.DATABASE_URL = options.databaseUrl;
  if (options.workspaceRoot !== undefined) overrides.WORKSPACE_ROOT = options.workspaceRoot;
  if (api && api.port !== undefined) overrides.PORT = api.port;
  if (api && api.host !== undefined) overrides.HOST = api.host;
  const config = loadConfig(undefined, overrides);
  const runtime = await startRuntime(config, {
    api: api !== false,
    worker: options.worker ?? true,
    agents,
    ...(options.llm ? { llm: options.llm } : {}),
    ...(options.logger ? { logger: options.logger } : {}),
    ...(options.onEvent ? { events: [forwardEvents(options.onEvent)] } : {}),
    ...(options.authenticate ? { authenticate: options.authenticate } : {}),
    ...(options.schedules ? { schedules: options.schedules } : {}),
  });
  return { runs: runtime.runs, schedules: runtime.schedules, url: runtime.url, close: runtime.close };
}
