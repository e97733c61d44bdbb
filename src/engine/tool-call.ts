/**
 * One tool call run, and for an agent with a workspace its changes saved: the driver's single-call
 * path and the tool batch both run calls through here. The contents are saved before the call's
 * checkpoint, the changes recorded with it (ToolFinish.files), so a crash between the two leaves only
 * contents no step refers to, and the next owner rebuilds the workspace as of the last checkpoint.
 */
import type { ToolUseBlock } from '../domain/types.ts';
import type { FileChange } from '../ports/workspace.ts';
import type { CallScope, ToolOutcome } from '../tools/executor.ts';
import type { DriverDeps } from './driver-types.ts';

export interface CallOutcome {
  outcome: ToolOutcome;
  /** What the call changed in the workspace (none: absent). */
  files?: FileChange[];
}

export async function runCall(deps: DriverDeps, use: ToolUseBlock, scope: CallScope): Promise<CallOutcome> {
  const { workspace } = deps;
  const outcome = await deps.agent.tools.execute(use, workspace ? { ...scope, workspace } : scope);
  if (!workspace) return { outcome };
  const saved = await workspace.save(use);
  // Over a limit the call's changes were undone: the model hears which limit, and nothing is recorded of them.
  if ('overLimit' in saved) return { outcome: { status: 'ERROR', result: `error: ${saved.overLimit}` } };
  return saved.length ? { outcome, files: saved } : { outcome };
}
