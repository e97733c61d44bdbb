/**
 * The tools an agent with a workspace is given: `bash`, `read_file`, `write_file`, `edit_file` and
 * `list_files`. Their names and inputs are what the model sees, so they do not change. Paths are
 * relative to the workspace (or under /workspace, where commands see it); one that would leave it is an
 * is_error result, never read or written.
 *
 * `bash` runs in the sandbox: without network, a call cut off by a crash can only have touched the
 * workspace, which the next owner rebuilds as it was before the call, so it is run again (idempotent).
 * With network it could have reached anything: it is not idempotent, and a person decides.
 */
import fs from 'node:fs/promises';
import path from 'node:path';
import { z } from 'zod';
import { ToolError } from '../domain/errors.ts';
import type { Tool, ToolContext } from '../tools/types.ts';
import { tool } from '../tools/zod-tool.ts';
import { excludeMatcher } from './exclude.ts';
import type { WorkspaceSettings } from './options.ts';
import { PathRefused, resolveInside, SANDBOX_WORKSPACE, workspacePath } from './paths.ts';

export const BUILTIN_TOOL_NAMES = ['bash', 'read_file', 'write_file', 'edit_file', 'list_files'] as const;

/** Lines read_file gives when the call names no `limit`. */
const READ_LINES = 2000;
/** Entries list_files gives at most. */
const LIST_ENTRIES = 1000;

const dirOf = (ctx: ToolContext): string => {
  if (!ctx.workspace) throw new ToolError('this agent has no workspace');
  return ctx.workspace;
};

/** The real path of `input` in the call's workspace, or an is_error result saying why not. */
async function located(ctx: ToolContext, input: string): Promise<{ rel: string; abs: string }> {
  try {
    const rel = workspacePath(input);
    return { rel, abs: await resolveInside(dirOf(ctx), rel) };
  } catch (e) {
    if (e instanceof PathRefused) throw new ToolError(e.message);
    throw e;
  }
}

const shown = (rel: string) => (rel === '' ? '.' : rel);

/** @unit bytes — the largest file read_file and edit_file read (bash's tools read any). */
const READ_BYTES = 10 * 1024 * 1024;

/**
 * A regular file's content; anything else (not there, a directory, a pipe that would block, a file too
 * large to hold) is said in words the model can act on.
 */
async function readText(abs: string, rel: string): Promise<Buffer> {
  const stat = await fs.stat(abs).catch(() => null);
  if (!stat) throw new ToolError(`${shown(rel)} does not exist`);
  if (stat.isDirectory()) throw new ToolError(`${shown(rel)} is a directory: list_files shows what it holds`);
  if (!stat.isFile()) throw new ToolError(`${shown(rel)} is not a regular file`);
  if (stat.size > READ_BYTES)
    throw new ToolError(
      `${shown(rel)} holds ${stat.size} bytes, more than read_file and edit_file read (${READ_BYTES}): use bash (head, sed -n, grep)`,
    );
  return fs.readFile(abs);
}

const isBinary = (b: Buffer) => b.subarray(0, 8000).includes(0);

/**
 * The workspace paths a call of a built-in tool can have changed (as the tool resolved them, every
 * symlink followed): none for the tools that only read, the one named for write_file and edit_file;
 * null for every other tool, whose save looks at the whole workspace.
 */
export async function pathsChangedBy(call: { name: string; input: unknown }, dir: string): Promise<string[] | null> {
  if (call.name === 'read_file' || call.name === 'list_files') return [];
  if (call.name !== 'write_file' && call.name !== 'edit_file') return null;
  const named = (call.input as { path?: unknown } | null)?.path;
  if (typeof named !== 'string') return [];
  try {
    const abs = await resolveInside(dir, workspacePath(named));
    const rel = path
      .relative(await fs.realpath(dir), abs)
      .split(path.sep)
      .join('/');
    return rel === '' ? [] : [rel];
  } catch {
    return []; // refused, or not there: the call wrote nothing
  }
}

export function builtinTools(settings: WorkspaceSettings): Tool[] {
  const excluded = excludeMatcher(settings.exclude);
  const bash = tool({
    name: 'bash',
    description:
      `Runs a bash command in the workspace (${SANDBOX_WORKSPACE}, the working directory) and returns its exit code, stdout and stderr. ` +
      `Each call starts a new shell: the directory and variables of one call do not carry over. ` +
      (settings.network ? 'The network is reachable. ' : 'There is no network. ') +
      `Files written outside the workspace (such as /tmp) are gone after the call. ` +
      `A command stops after timeoutSeconds (default ${settings.commandTimeoutSeconds}, at most ${settings.maxCommandTimeoutSeconds}).`,
    input: z.object({
      command: z.string().min(1).describe('The command, as bash reads it'),
      timeoutSeconds: z
        .number()
        .positive()
        .max(settings.maxCommandTimeoutSeconds)
        .optional()
        .describe('Seconds before the command is stopped'),
    }),
    idempotent: !settings.network,
    async execute({ command, timeoutSeconds }, ctx) {
      if (!ctx.exec) throw new ToolError('this agent has no workspace');
      const r = await ctx.exec(command, timeoutSeconds === undefined ? {} : { timeoutSeconds });
      return {
        exitCode: r.exitCode,
        ...(r.signal ? { signal: r.signal } : {}),
        ...(r.timedOut ? { timedOut: true } : {}),
        stdout: r.stdout,
        stderr: r.stderr,
      };
    },
  });
  const readFile = tool({
    name: 'read_file',
    description: `Reads a text file of the workspace. offset is the first line (1 is the first), limit how many lines (default ${READ_LINES}).`,
    input: z.object({
      path: z.string().min(1).describe('The file, relative to the workspace'),
      offset: z.number().int().min(1).optional().describe('The first line to read (1-based)'),
      limit: z.number().int().min(1).optional().describe('How many lines to read'),
    }),
    async execute({ path: p, offset, limit }, ctx) {
      const { rel, abs } = await located(ctx, p);
      const content = await readText(abs, rel);
      if (isBinary(content)) return `${rel} is a binary file of ${content.length} bytes; read_file shows text files only`;
      const lines = content.toString('utf8').split('\n');
      if (lines.length > 1 && lines.at(-1) === '') lines.pop();
      const first = (offset ?? 1) - 1;
      const count = limit ?? READ_LINES;
      const part = lines.slice(first, first + count);
      const whole = first === 0 && part.length === lines.length;
      if (whole) return part.join('\n');
      const note =
        part.length === 0
          ? `[${rel} has ${lines.length} lines; none from line ${first + 1}]`
          : `[lines ${first + 1}-${first + part.length} of ${lines.length}]`;
      return part.length ? `${part.join('\n')}\n${note}` : note;
    },
  });
  const writeFile = tool({
    name: 'write_file',
    description: 'Writes a text file of the workspace with the given content (created with its directories, or replaced whole).',
    input: z.object({
      path: z.string().min(1).describe('The file, relative to the workspace'),
      content: z.string().describe('The whole content of the file'),
    }),
    async execute({ path: p, content }, ctx) {
      const { rel, abs } = await located(ctx, p);
      if (rel === '') throw new ToolError('give the path of a file, not the workspace itself');
      await fs.mkdir(path.dirname(abs), { recursive: true });
      try {
        await fs.writeFile(abs, content);
      } catch (e) {
        if ((e as NodeJS.ErrnoException).code === 'EISDIR') throw new ToolError(`${rel} is a directory`);
        throw e;
      }
      return `wrote ${Buffer.byteLength(content)} bytes to ${rel}`;
    },
  });
  const editFile = tool({
    name: 'edit_file',
    description:
      'Replaces oldText with newText in a text file of the workspace. oldText must occur exactly once: give enough of the text around it.',
    input: z.object({
      path: z.string().min(1).describe('The file, relative to the workspace'),
      oldText: z.string().min(1).describe('The exact text to replace, occurring once in the file'),
      newText: z.string().describe('The text to put in its place'),
    }),
    async execute({ path: p, oldText, newText }, ctx) {
      const { rel, abs } = await located(ctx, p);
      const content = (await readText(abs, rel)).toString('utf8');
      const at = content.indexOf(oldText);
      if (at < 0) throw new ToolError(`oldText was not found in ${rel}; read_file shows its text as it is now`);
      let count = 1;
      for (let i = content.indexOf(oldText, at + oldText.length); i >= 0; i = content.indexOf(oldText, i + oldText.length)) count++;
      if (count > 1) throw new ToolError(`oldText occurs ${count} times in ${rel}: give more of the text around it, so it occurs once`);
      await fs.writeFile(abs, content.slice(0, at) + newText + content.slice(at + oldText.length));
      return `edited ${rel}`;
    },
  });
  const listFiles = tool({
    name: 'list_files',
    description: `Lists the files under a directory of the workspace (default: all of it), directories ending in "/", at most ${LIST_ENTRIES}.`,
    input: z.object({ path: z.string().optional().describe('The directory, relative to the workspace') }),
    async execute({ path: p }, ctx) {
      const { rel, abs } = await located(ctx, p ?? '');
      const stat = await fs.stat(abs).catch(() => null);
      if (!stat) throw new ToolError(`${shown(rel)} does not exist`);
      if (!stat.isDirectory()) throw new ToolError(`${shown(rel)} is a file: read_file shows it`);
      const lines: string[] = [];
      let more = 0;
      const walk = async (dir: string, prefix: string) => {
        const entries = (await fs.readdir(dir, { withFileTypes: true })).sort((a, b) => (a.name < b.name ? -1 : 1));
        for (const d of entries) {
          const name = `${prefix}${d.name}`;
          if (lines.length >= LIST_ENTRIES) {
            more++;
            continue;
          }
          const inWorkspace = rel === '' ? name : `${rel}/${name}`;
          if (d.isDirectory()) {
            if (excluded(inWorkspace, true)) {
              lines.push(`${name}/ (excluded: not saved, not listed)`);
              continue;
            }
            lines.push(`${name}/`);
            await walk(path.join(dir, d.name), `${name}/`);
          } else if (d.isSymbolicLink()) {
            lines.push(`${name} -> ${await fs.readlink(path.join(dir, d.name))}`);
          } else {
            const s = await fs.lstat(path.join(dir, d.name)).catch(() => null);
            lines.push(`${name} (${s?.size ?? 0} bytes)`);
          }
        }
      };
      await walk(abs, '');
      if (lines.length === 0) return `${shown(rel)} is empty`;
      return more ? `${lines.join('\n')}\n[${more} more not listed]` : lines.join('\n');
    },
  });
  return [bash, readFile, writeFile, editFile, listFiles];
}
