/**
 * Tool sources: tools an agent takes from somewhere else than its code (MCP servers), whose list is
 * known only once the worker has asked, and may change while it runs. The worker starts them before
 * it claims, tells the model of the tools they offer at the time, and closes them when it stops.
 */
import type { ToolExecutor } from './executor.ts';
import type { Tool } from './types.ts';

export interface ToolSource {
  /** Names it in logs. */
  readonly name: string;
  /** Connects and learns its tools; never rejects: a source that cannot be reached offers none until it can. */
  start(): Promise<void>;
  /** The tools it offers now. */
  tools(): readonly Tool[];
  /** Called when the tools it offers have changed. */
  onChange(listener: () => void): void;
  close(): Promise<void>;
}

/**
 * The agent's own tools and the sources' tools in one executor. A source's tool named like one
 * already taken (the agent's own, or an earlier source's) is left out, with `skipped` told why.
 */
export function withSourceTools(
  own: ToolExecutor,
  sources: readonly ToolSource[],
  skipped: (source: string, tool: string) => void,
): ToolExecutor {
  if (!sources.length) return own;
  const taken = new Set(own.definitions().map((d) => d.name));
  const extra: Tool[] = [];
  for (const source of sources) {
    for (const t of source.tools()) {
      if (taken.has(t.name)) {
        skipped(source.name, t.name);
        continue;
      }
      taken.add(t.name);
      extra.push(t);
    }
  }
  return extra.length ? own.withTools(extra) : own;
}
