/**
 * Runs the tools the model asks for. A tool's ordinary failure (a throw, a timeout, a name it lacks)
 * becomes an is_error result: it is information for the model. A FatalError, or the worker giving the
 * run up (its signal aborted), escapes: the attempt ends and nothing is recorded for the call.
 *
 * A result is made storable (storable.ts) and cut to `maxResultBytes` here, before the engine sees it:
 * the model is sent exactly the text the log keeps, and a resumed run replays that same text.
 */
import { mapResultText, storedContent, toolContent } from '../core/content-blocks.ts';
import type { RunId, ToolUseBlock } from '../domain/types.ts';
import { ConfigError, DatabaseUnavailableError, FatalError } from '../domain/errors.ts';
import type { ToolDefinition } from '../llm/types.ts';
import type { RunWorkspace } from '../ports/workspace.ts';
import { createLogger, type Logger } from '../observability/logger.ts';
import { storableText } from '../core/storable.ts';
import { Semaphore } from './semaphore.ts';
import { isTimerTool, sleepSeconds } from './sleep-tool.ts';
import type { Tool, ToolContext } from './types.ts';

export const DEFAULT_TOOL_RESULT_MAX_BYTES = 1024 * 1024;

export interface ToolOutcome {
  status: 'DONE' | 'ERROR';
  result: string;
}

class ToolTimeout extends Error {}

function render(value: unknown): string {
  if (typeof value === 'string') return value;
  return JSON.stringify(value ?? null) ?? 'null';
}

/**
 * `text` cut to at most `maxBytes` of UTF-8, note included, at a character boundary; a note tells the
 * model how much it does not see. Text within the limit is returned as it is.
 */
export function capResult(text: string, maxBytes: number): string {
  // A UTF-16 unit is at most three UTF-8 bytes, so a text this short cannot be over the limit.
  if (text.length <= maxBytes / 3 || Buffer.byteLength(text, 'utf8') <= maxBytes) return text;
  const total = Buffer.byteLength(text, 'utf8');
  const note = (kept: number) => `\n\n[result cut: the tool returned ${total} bytes; only the first ${kept} are shown above]`;
  const room = Math.max(0, maxBytes - Buffer.byteLength(note(maxBytes), 'utf8'));
  // The first `room` units hold at least `room` bytes; encode only those, not a result of any size.
  const head = Buffer.from(text.slice(0, room), 'utf8');
  let cut = Math.min(room, head.length);
  while (cut > 0 && (head[cut]! & 0xc0) === 0x80) cut--; // back off to the start of a character
  return head.toString('utf8', 0, cut) + note(cut);
}

export interface ToolExecutorOptions {
  /** Idempotent calls of one model turn run at once, at most this many (TOOL_CONCURRENCY). Default 4. */
  concurrency?: number;
  /** What a tool's `ctx.log` writes to (with the call's run_id, worker, step_seq and tool_use_id); silent when absent. */
  logger?: Logger;
}

/** Where a call runs: its run, the signal that stops it, and for its log lines the worker and step. */
export interface CallScope {
  runId: RunId;
  signal: AbortSignal;
  /** The run's workspace, for an agent with one. */
  workspace?: RunWorkspace;
  worker?: string;
  seq?: number;
}

const silent = createLogger({ level: 'silent' });

export const DEFAULT_TOOL_CONCURRENCY = 4;

export class ToolExecutor {
  private readonly byName: Map<string, Tool>;
  /** Calls of one turn that may run at once. */
  readonly concurrency: number;
  /** The limits of tools that set `concurrency`, shared by every run this executor serves. */
  private readonly toolLimits = new Map<string, Semaphore>();

  constructor(
    tools: readonly Tool[],
    private readonly timeoutMs: number,
    private readonly maxResultBytes = DEFAULT_TOOL_RESULT_MAX_BYTES,
    private readonly options: ToolExecutorOptions = {},
  ) {
    this.byName = new Map(tools.map((t) => [t.name, t]));
    if (this.byName.size !== tools.length) throw new Error('two tools share a name');
    this.concurrency = options.concurrency ?? DEFAULT_TOOL_CONCURRENCY;
    // Said here, not when a turn first asks for two calls at once (a turn of one takes no place).
    if (!Number.isInteger(this.concurrency) || this.concurrency < 1)
      throw new ConfigError(`tool concurrency must be a whole number of at least 1, not ${this.concurrency}`);
    for (const t of tools) {
      if (t.concurrency === undefined) continue;
      if (!Number.isInteger(t.concurrency) || t.concurrency < 1)
        throw new ConfigError(`tool "${t.name}": concurrency must be a whole number of at least 1`);
      this.toolLimits.set(t.name, new Semaphore(t.concurrency));
    }
  }

  /** Whether the tool has a concurrency limit of its own (calls of one without it need no place). */
  hasLimit(name: string): boolean {
    return this.toolLimits.has(name);
  }

  /**
   * Waits for a place under the tool's own limit (a tool without one has no wait); call the returned
   * function when the call is over.
   */
  async acquire(name: string, signal: AbortSignal): Promise<() => void> {
    const limit = this.toolLimits.get(name);
    if (!limit) return () => {};
    return limit.acquire(signal);
  }

  /**
   * This executor's tools and `extra` (whose names must differ from them), with the same options and
   * the same per-tool limits: runs still on this executor and runs on the new one share each limit
   * (a source's tools changing makes a new one while calls are in flight).
   */
  withTools(extra: readonly Tool[]): ToolExecutor {
    const combined = new ToolExecutor([...this.byName.values(), ...extra], this.timeoutMs, this.maxResultBytes, this.options);
    for (const [name, limit] of this.toolLimits) combined.toolLimits.set(name, limit);
    return combined;
  }

  /**
   * This executor with each tool replaced by `wrap(tool)` (same name and settings: a wrapper changes
   * how a call runs, not what the model is told), sharing the per-tool limits as `withTools` does.
   */
  mapTools(wrap: (tool: Tool) => Tool): ToolExecutor {
    const mapped = new ToolExecutor([...this.byName.values()].map(wrap), this.timeoutMs, this.maxResultBytes, this.options);
    for (const [name, limit] of this.toolLimits) mapped.toolLimits.set(name, limit);
    return mapped;
  }

  definitions(): ToolDefinition[] {
    return [...this.byName.values()].map((t) => ({ name: t.name, description: t.description, input_schema: t.inputSchema }));
  }

  /** Unknown tools count as idempotent: "re-running" one only repeats the error result. */
  isIdempotent(name: string): boolean {
    return this.byName.get(name)?.idempotent !== false;
  }

  /** Whether this call must be approved before it runs (the tool's `needsApproval`, asked of its input). */
  async needsApproval(use: ToolUseBlock): Promise<boolean> {
    const needs = this.byName.get(use.name)?.needsApproval;
    if (typeof needs !== 'function') return needs === true;
    try {
      return (await needs(use.input)) === true;
    } catch {
      return true; // a check that fails cannot say "no approval needed"
    }
  }

  /** @unit milliseconds — how long an approval of this tool may wait; null: as long as it takes. */
  approvalTimeoutMs(name: string): number | null {
    const s = this.byName.get(name)?.approvalTimeoutSeconds;
    return typeof s === 'number' && s > 0 ? s * 1000 : null;
  }

  /** For a call of the built-in timer tool: its seconds, or an error text; null for any other tool. */
  timer(use: ToolUseBlock): number | string | null {
    return isTimerTool(this.byName.get(use.name)) ? sleepSeconds(use.input) : null;
  }

  async execute(use: ToolUseBlock, ctx: CallScope): Promise<ToolOutcome> {
    const { status, result } = await this.run(use, ctx);
    // Each text block of a content result is cut as a text result would be; its images are whole.
    return { status, result: mapResultText(result, (text) => capResult(storableText(text), this.maxResultBytes)) };
  }

  private async run(use: ToolUseBlock, ctx: CallScope): Promise<ToolOutcome> {
    const tool = this.byName.get(use.name);
    // A name the model was never told of, or a tool a deploy removed while the run was under way (it
    // keeps the definitions it started with): the model hears it, and can do without.
    if (!tool) return { status: 'ERROR', result: `error: tool no longer available: this agent has no tool "${use.name}"` };
    // Every tool takes a JSON object. Anything else is arguments the provider could not read as one
    // (kept as the model's own text): running the tool on a guess would be worse than telling the model.
    if (typeof use.input !== 'object' || use.input === null || Array.isArray(use.input)) {
      return {
        status: 'ERROR',
        result: `error: the arguments are not a JSON object, so ${use.name} was not run; call it again with a JSON object that fits its input schema`,
      };
    }
    const controller = new AbortController();
    const onOuterAbort = () => controller.abort(ctx.signal.reason);
    // A tool that cannot be re-run safely is never cut off by the worker giving the run up: cut off,
    // it would be left STARTED and the run would have to stop for a human. Its own timeout still holds.
    const cancellable = tool.idempotent !== false;
    if (cancellable) {
      // Stopped while the STARTED row was being written: the tool starts already cut off.
      if (ctx.signal.aborted) onOuterAbort();
      else ctx.signal.addEventListener('abort', onOuterAbort, { once: true });
    }
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(() => {
        const e = new ToolTimeout(`tool ${use.name} timed out after ${this.timeoutMs} ms`);
        controller.abort(e);
        reject(e);
      }, this.timeoutMs);
    });
    try {
      const value = await Promise.race([tool.execute(use.input, this.toolContext(use, ctx, controller.signal)), timeout]);
      const content = toolContent(value);
      return { status: 'DONE', result: content ? storedContent(content) : render(value) };
    } catch (e) {
      if (e instanceof FatalError || e instanceof DatabaseUnavailableError) throw e;
      if (cancellable && ctx.signal.aborted) throw ctx.signal.reason;
      // A tool that stops on its signal fails with its own error; the timeout is what the model should hear.
      const cause = controller.signal.reason instanceof ToolTimeout ? controller.signal.reason : e;
      return { status: 'ERROR', result: `error: ${cause instanceof Error ? cause.message : String(cause)}` };
    } finally {
      clearTimeout(timer);
      ctx.signal.removeEventListener('abort', onOuterAbort);
    }
  }
  /** What the tool gets; its logger is made only when the tool asks for it (most never do). */
  private toolContext(use: ToolUseBlock, ctx: CallScope, signal: AbortSignal): ToolContext {
    const logger = this.options.logger ?? silent;
    let log: Logger | undefined;
    const { workspace } = ctx;
    return {
      idempotencyKey: use.id,
      runId: ctx.runId,
      signal,
      get log() {
        return (log ??= logger.child({ run_id: ctx.runId, worker: ctx.worker, step_seq: ctx.seq, tool_use_id: use.id }));
      },
      // A command is stopped whenever its call is, and also when the run is cancelled or given up: even a
      // call that is not cut off then (non-idempotent) has its command's tree killed, and records the error.
      ...(workspace && {
        workspace: workspace.dir,
        exec: (command, options = {}) => workspace.exec(command, options, AbortSignal.any([signal, ctx.signal])),
      }),
    };
  }
}
