/**
 * A run's workspace as saved: its files as of a step, and one file's content. The same tenant rules as
 * every run route (the server checks the run before the handler runs).
 */
import { NotFoundError, InputError } from '../domain/errors.ts';
import type { FileChange, FileEntry } from '../ports/workspace.ts';
import type { WorkspaceFiles } from '../store/workspace-files.ts';
import { PathRefused, workspacePath } from '../workspace/paths.ts';
import { defineRunRoute, type ApiRoute } from './route.ts';
import { ErrorBody } from './schemas.ts';
import { FileParams, FileQuery, FilesJson, FilesQuery } from './schemas-files.ts';
import { RunParams } from './schemas.ts';

export interface FilesDeps {
  files: Pick<WorkspaceFiles, 'manifest' | 'file' | 'stepChanges'>;
}

const fileJson = (e: FileEntry) => ({
  path: e.path,
  type: e.kind,
  size: e.size,
  sha256: e.sha256,
  mode: e.mode,
  ...(e.target !== null ? { target: e.target } : {}),
});

/** What a step's changes were to the workspace before it: added, modified or deleted. */
function describeChanges(changes: readonly FileChange[], before: ReadonlySet<string>) {
  return changes.map((c) => ({
    path: c.path,
    change: c.kind === 'deleted' ? ('deleted' as const) : before.has(c.path) ? ('modified' as const) : ('added' as const),
  }));
}

const utf8 = new TextDecoder('utf-8', { fatal: true });
const isText = (b: Buffer) => {
  if (b.includes(0)) return false;
  try {
    utf8.decode(b);
    return true;
  } catch {
    return false;
  }
};

export function filesRoutes({ files }: FilesDeps): ApiRoute[] {
  return [
    defineRunRoute({
      method: 'GET',
      path: '/api/runs/{id}/files',
      operationId: 'listRunFiles',
      summary: "The run's workspace as of a step: every file, directory and symlink, and what that step changed",
      params: RunParams,
      query: FilesQuery,
      responses: { 200: { description: 'The workspace (empty for a run of an agent without one).', schema: FilesJson } },
      async handle({ run, query }) {
        const atSeq = query.atSeq ?? null;
        const entries = await files.manifest(run.id, atSeq);
        if (atSeq === null) return { body: { atSeq, files: entries.map(fileJson) } };
        const [changes, before] = await Promise.all([
          files.stepChanges(run.id, atSeq),
          atSeq > 0 ? files.manifest(run.id, atSeq - 1) : Promise.resolve([]),
        ]);
        return { body: { atSeq, files: entries.map(fileJson), changed: describeChanges(changes, new Set(before.map((e) => e.path))) } };
      },
    }),
    defineRunRoute({
      method: 'GET',
      path: '/api/runs/{id}/files/{path}',
      wildcard: 'path',
      operationId: 'getRunFile',
      summary: "One file of the run's workspace as of a step: its content as it is (a symlink: its target)",
      params: FileParams,
      query: FileQuery,
      responses: {
        200: { description: 'The content, byte for byte.', contentType: 'application/octet-stream' },
        404: { description: 'The workspace holds no file at that path as of that step.', schema: ErrorBody },
      },
      async handle({ run, params, query }) {
        let path: string;
        try {
          path = workspacePath(params.path);
        } catch (e) {
          if (!(e instanceof PathRefused)) throw e;
          throw new InputError(`invalid path: path: ${e.message}`, [{ path: 'path', message: e.message }]);
        }
        const atSeq = query.atSeq ?? null;
        const found = path === '' ? null : await files.file(run.id, path, atSeq);
        const where = atSeq === null ? '' : ` as of step ${atSeq}`;
        if (!found) throw new NotFoundError(`the workspace of run ${run.id} holds no ${path}${where}`);
        if (found.entry.kind === 'dir') throw new NotFoundError(`${path} is a directory${where}: GET /api/runs/${run.id}/files lists it`);
        const content = found.entry.kind === 'symlink' ? Buffer.from(found.entry.target!) : found.content;
        if (!content) throw new NotFoundError(`the saved content of ${path} is missing`);
        return {
          body: content,
          contentType: isText(content) ? 'text/plain; charset=utf-8' : 'application/octet-stream',
          headers: {
            'x-content-type-options': 'nosniff',
            'x-file-type': found.entry.kind,
            'x-file-sha256': found.entry.sha256 ?? '',
            'content-security-policy': "default-src 'none'; sandbox",
          },
        };
      },
    }),
  ];
}
