/**
 * What an agent with a workspace is given on a worker: the built-in tools beside its own, calls run
 * one at a time (a save holds one call's changes), a call's time at least its command's, the workspaces
 * under WORKSPACE_ROOT; and the sandbox checked at start, so a worker that cannot run it refuses to
 * start rather than fail the first command.
 */
import type { Config } from '../config/environment.ts';
import { ConfigError } from '../domain/errors.ts';
import type { Logger } from '../observability/logger.ts';
import type { WorkspaceFiles } from '../store/workspace-files.ts';
import type { Tool } from '../tools/types.ts';
import { ToolExecutor } from '../tools/executor.ts';
import { builtinTools } from '../workspace/builtin-tools.ts';
import type { WorkspaceSettings } from '../workspace/options.ts';
import { AgentWorkspaces } from '../workspace/run-workspace.ts';
import { checkSandbox } from '../workspace/sandbox.ts';

/** @unit milliseconds — a call's time past its command's, for the save after it. */
const SAVE_MARGIN_MS = 30_000;

export async function workspaceAgent(
  name: string,
  settings: WorkspaceSettings,
  own: readonly Tool[],
  parts: { config: Readonly<Config>; files: WorkspaceFiles; logger: Logger },
): Promise<{ tools: ToolExecutor; workspaces: AgentWorkspaces }> {
  const { config, files, logger } = parts;
  if (settings.sandbox === 'bubblewrap') {
    await checkSandbox().catch((e: unknown) => {
      throw e instanceof ConfigError ? new ConfigError(`agent "${name}": ${e.message}`) : e;
    });
    if (process.getuid?.() === 0) {
      logger.warn(
        { agent: name },
        `this worker runs as root, so agent "${name}"'s sandboxed commands do too (without capabilities): they can read the system's files only root may read; run workers as another user`,
      );
    }
  } else {
    logger.warn(
      { agent: name },
      `agent "${name}" runs its workspace commands unsandboxed (workspace.sandbox: 'none'): they have this worker's rights, files, network and processes`,
    );
  }
  // A sandboxed tool's effects stay in the workspace, rebuilt before a re-run: re-run as bash is.
  const tools = [...builtinTools(settings), ...own.map((t) => (t.sandboxed ? { ...t, idempotent: !settings.network } : t))];
  const timeoutMs = Math.max(config.toolTimeoutMs, settings.maxCommandTimeoutSeconds * 1000 + SAVE_MARGIN_MS);
  return {
    tools: new ToolExecutor(tools, timeoutMs, config.toolResultMaxBytes, { concurrency: 1, logger }),
    workspaces: new AgentWorkspaces({ store: files, root: config.workspaceRoot, settings, hidden: [config.dataDir] }),
  };
}

/** @unit milliseconds — how often a worker serving workspace agents deletes contents no step refers to. */
const SWEEP_EVERY_MS = 3_600_000;

/**
 * Deletes, now and every hour, the saved contents no step refers to: a step that crashed after its
 * contents were saved and before its checkpoint leaves some behind.
 */
export function startBlobSweep(files: Pick<WorkspaceFiles, 'sweep'>, logger: Logger): { close(): void } {
  const sweep = async () => {
    try {
      let deleted = 0;
      for (let n = await files.sweep(); n > 0; n = await files.sweep()) deleted += n;
      if (deleted > 0) logger.info({ deleted }, 'deleted saved workspace contents no step refers to');
    } catch (e) {
      logger.warn({ err_message: (e as Error).message }, 'could not sweep saved workspace contents');
    }
  };
  const first = setTimeout(() => void sweep(), 60_000);
  const timer = setInterval(() => void sweep(), SWEEP_EVERY_MS);
  first.unref();
  timer.unref();
  return {
    close() {
      clearTimeout(first);
      clearInterval(timer);
    },
  };
}
