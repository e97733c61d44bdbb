/**
 * Runs the tools the model asks for. A tool's ordinary failure (a throw, a timeout, an unknown name)
 * becomes an is_error result: it is information for the model. A FatalError, or the worker giving the
 * run up (its signal aborted), escapes: the attempt ends and nothing is recorded for the call.
 */
import type { RunId, ToolUseBlock } from '../domain.ts';
import { FatalError } from '../errors.ts';
import type { ToolDefinition } from '../llm/types.ts';
import type { Tool } from './types.ts';

export interface ToolOutcome {
  status: 'DONE' | 'ERROR';
  result: string;
}

class ToolTimeout extends Error {}

function render(value: unknown): string {
  if (typeof value === 'string') return value;
  return JSON.stringify(value ?? null);
}

export class ToolExecutor {
  private readonly byName: Map<string, Tool>;

  constructor(tools: readonly Tool[], private readonly timeoutMs: number) {
    this.byName = new Map(tools.map((t) => [t.name, t]));
    if (this.byName.size !== tools.length) throw new Error('two tools share a name');
  }

  definitions(): ToolDefinition[] {
    return [...this.byName.values()].map((t) => ({ name: t.name, description: t.description, input_schema: t.inputSchema }));
  }

  /** Unknown tools count as idempotent: "re-running" one only repeats the error result. */
  isIdempotent(name: string): boolean {
    return this.byName.get(name)?.idempotent !== false;
  }

  async execute(use: ToolUseBlock, ctx: { runId: RunId; signal: AbortSignal }): Promise<ToolOutcome> {
    const tool = this.byName.get(use.name);
    if (!tool) return { status: 'ERROR', result: `error: unknown tool "${use.name}"` };
    const controller = new AbortController();
    const onOuterAbort = () => controller.abort(ctx.signal.reason);
    // A tool that cannot be re-run safely is never cut off by the worker giving the run up: cut off,
    // it would be left STARTED and the run would have to stop for a human. Its own timeout still holds.
    const cancellable = tool.idempotent !== false;
    if (cancellable) ctx.signal.addEventListener('abort', onOuterAbort, { once: true });
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(() => {
        const e = new ToolTimeout(`tool ${use.name} timed out after ${this.timeoutMs} ms`);
        controller.abort(e);
        reject(e);
      }, this.timeoutMs);
    });
    try {
      const value = await Promise.race([
        tool.execute(use.input, { idempotencyKey: use.id, runId: ctx.runId, signal: controller.signal }),
        timeout,
      ]);
      return { status: 'DONE', result: render(value) };
    } catch (e) {
      if (e instanceof FatalError) throw e;
      if (cancellable && ctx.signal.aborted) throw ctx.signal.reason;
      // A tool that stops on its signal fails with its own error; the timeout is what the model should hear.
      const cause = controller.signal.reason instanceof ToolTimeout ? controller.signal.reason : e;
      return { status: 'ERROR', result: `error: ${cause instanceof Error ? cause.message : String(cause)}` };
    } finally {
      clearTimeout(timer);
      ctx.signal.removeEventListener('abort', onOuterAbort);
    }
  }
}
