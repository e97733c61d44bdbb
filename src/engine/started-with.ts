/**
 * Deploys mid-run. A model step records the digests of the system prompt and tool definitions it was
 * sent (stored once in content_blob). A run resumed by a worker running newer code keeps talking to
 * the model with the prompt and definitions it STARTED with, read back from the blobs its first model
 * step refers to, so the model never sees its instructions change halfway through a task. The tools
 * it calls run the new code's implementations, by name: a tool the new code no longer has answers
 * the model with an is_error result (see ToolExecutor), never a crash.
 */
import type { Step } from '../domain/types.ts';
import type { ToolDefinition } from '../llm/types.ts';
import type { PreparedAgent } from './driver-types.ts';

/** `agent` with the prompt and tool definitions the run's first model step was sent, when they differ. */
export async function agentAsStarted(
  agent: PreparedAgent,
  steps: readonly Pick<Step, 'kind' | 'request'>[],
  blob: (digest: string) => Promise<string | null>,
): Promise<PreparedAgent> {
  const first = steps.find((s) => s.kind === 'MODEL' && s.request)?.request;
  if (!first) return agent; // it has not talked to the model yet: it starts with this code's agent
  const sameSystem = first.systemDigest === agent.systemDigest;
  const sameTools = first.toolsDigest === agent.toolsDigest;
  if (sameSystem && sameTools) return agent;
  const [system, tools] = await Promise.all([
    sameSystem || first.systemDigest === null ? null : blob(first.systemDigest),
    sameTools || first.toolsDigest === null ? null : blob(first.toolsDigest),
  ]);
  // A text the run refers to is kept as long as the run is (deletions keep referenced texts), so a
  // missing one means the database was edited by hand: the current definition is the best left.
  if ((!sameSystem && first.systemDigest !== null && system === null) || (!sameTools && first.toolsDigest !== null && tools === null))
    return agent;
  return {
    ...agent,
    ...(sameSystem ? {} : { system, systemDigest: first.systemDigest }),
    ...(sameTools
      ? {}
      : { toolDefinitions: tools === null ? [] : (JSON.parse(tools) as ToolDefinition[]), toolsDigest: first.toolsDigest }),
  };
}
