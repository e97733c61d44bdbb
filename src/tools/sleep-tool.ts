/**
 * The built-in `sleep` tool: the model asks to wait, and the run waits as a row, not a process. The
 * engine never executes it; it makes the run WAITING (kind `timer`) until `seconds` from now, when any
 * worker claims it again and the model gets the tool_result (see engine/tool-call-verdict.ts).
 */
import { z } from 'zod';
import { describeIssues } from './zod-tool.ts';
import type { Tool } from './types.ts';

export const SLEEP_TOOL_NAME = 'sleep';
/** 30 days. */
export const MAX_SLEEP_SECONDS = 2_592_000;

const SleepInput = z.strictObject({
  seconds: z.number().int().min(1).max(MAX_SLEEP_SECONDS).describe('How long to wait, in seconds (1 to 2592000, i.e. 30 days).'),
});

const TIMER = Symbol('durable-agent.timer');

/** The tool an agent includes to let its model wait (check back later) without holding a worker. */
export function sleepTool(): Tool<{ seconds: number }> {
  const t: Tool<{ seconds: number }> & { [TIMER]: true } = {
    name: SLEEP_TOOL_NAME,
    description:
      'Waits the given number of seconds before continuing, e.g. to check back on something later. The run holds no resources while it waits.',
    inputSchema: z.toJSONSchema(SleepInput, { io: 'input' }) as Record<string, unknown>,
    [TIMER]: true,
    execute() {
      // The engine waits instead of calling this; a host that calls it directly gets the same contract.
      throw new Error('sleep is carried out by the engine, not executed');
    },
  };
  delete (t.inputSchema as { $schema?: unknown }).$schema;
  return t;
}

export function isTimerTool(tool: Tool | undefined): boolean {
  return tool !== undefined && (tool as { [TIMER]?: true })[TIMER] === true;
}

/** The seconds a call of the timer tool waits, or an error text for an input it cannot take. */
export function sleepSeconds(input: unknown): number | string {
  const parsed = SleepInput.safeParse(input);
  return parsed.success ? parsed.data.seconds : `invalid input for ${SLEEP_TOOL_NAME}: ${describeIssues(parsed.error)}`;
}
