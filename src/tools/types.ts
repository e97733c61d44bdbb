import type { RunId } from '../domain/types.ts';
import type { Logger } from '../observability/logger.ts';
import type { CommandOptions, CommandResult } from '../ports/workspace.ts';

export interface ToolContext {
  /** Stable across re-executions of the same tool call (the model's tool_use id): pass it downstream. */
  idempotencyKey: string;
  runId: RunId;
  /** Aborted when the tool's time is up or the worker gives the run up. */
  signal: AbortSignal;
  /**
   * The runtime's logger, its lines carrying this call's run_id, worker, step_seq and tool_use_id.
   * Always set (silent when the runtime was given no logger to write to).
   */
  readonly log: Logger;
  /**
   * The run's workspace directory on this worker (agents with a `workspace`): what a tool writes there
   * is saved with its step, and any worker that takes the run over finds it. Unset for other agents.
   */
  readonly workspace?: string;
  /**
   * Runs a shell command in the workspace's sandbox, as the built-in `bash` tool does (agents with a
   * `workspace`). Stopped with the call: its timeout, a cancel, the worker giving the run up.
   */
  exec?(command: string, options?: CommandOptions): Promise<CommandResult>;
}

/** Approval needed always (`true`), never (`false`), or as a function of the call's input decides. */
export type NeedsApproval<Input = any> = boolean | ((input: Input) => boolean | Promise<boolean>);

export interface Tool<Input = any> {
  name: string;
  description: string;
  /** JSON Schema of the input, as the model is told. */
  inputSchema: Record<string, unknown>;
  /**
   * Whether running the call twice with the same idempotency key has the effect of running it once.
   * A non-idempotent tool found STARTED after a crash is not re-run: the run stops for a human.
   * Default true.
   */
  idempotent?: boolean;
  /**
   * Whether a call must be approved by a person before it runs: always, never, or decided from the
   * call's input. A call that needs it makes its run WAITING (holding nothing) until it is approved or
   * denied (POST /api/runs/{id}/tool-calls/{toolUseId}/decision); a denied call never runs, and the
   * model is told why. Default false.
   */
  needsApproval?: NeedsApproval<Input>;
  /**
   * The most calls of this tool that run at once in one worker process, across all its runs (an API
   * with a rate limit, a resource that takes one user at a time). Default: no limit of its own; the
   * calls of one turn are still bounded by TOOL_CONCURRENCY. Non-idempotent tools run one at a time anyway.
   */
  concurrency?: number;
  /**
   * @unit seconds — a call still waiting for approval after this long is denied with the reason
   * "approval timed out". Default: it waits as long as it takes (within the run's deadline, which does
   * not count time spent waiting).
   */
  approvalTimeoutSeconds?: number;
  /**
   * For agents with a workspace: the tool acts only on the workspace (its files, and commands through
   * `ctx.exec`). After a crash its call is run again on the workspace rebuilt as it was before the call,
   * as `bash`'s is, whatever `idempotent` says; with the workspace's `network: true` it is not (a person
   * decides). Default false.
   */
  sandboxed?: boolean;
  /** The result the model sees: a string, or a value sent as JSON. Throwing gives the model an is_error result. */
  execute(input: Input, context: ToolContext): Promise<unknown>;
}

/**
 * A tool from a JSON Schema, taken as it is.
 * @deprecated Use `tool({ name, description, inputSchema, execute })`, which checks the definition
 * when it is made; or `tool({ …, input: z.object({ … }) })` for an input parsed and typed by zod.
 */
export function defineTool<Input>(tool: Tool<Input>): Tool<Input> {
  return tool;
}
