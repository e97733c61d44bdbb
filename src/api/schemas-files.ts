/** The shapes of a run's workspace routes (routes-files.ts). */
import { z } from 'zod';
import { LIMITS, RunParams } from '../runs/requests.ts';
import { responseSchemas } from './schemas.ts';

const atSeq = z.coerce
  .number()
  .int()
  .min(0)
  .max(LIMITS.maxSeq)
  .optional()
  .describe('The workspace as of this step (0: before the first); default its latest checkpointed step.');

export const FilesQuery = z.strictObject({ atSeq });
export const FileQuery = z.strictObject({ atSeq });
export const FileParams = RunParams.extend({
  path: z.string().min(1).max(4096).describe('The path in the workspace, its `/` as they are (e.g. src/app.ts).'),
});

export const FileJson = z.object({
  path: z.string(),
  type: z.enum(['file', 'dir', 'symlink']),
  size: z.number().int().nonnegative().describe("Bytes of a file's content; a symlink's target's length; 0 for a directory."),
  sha256: z.string().nullable().describe("Hex SHA-256 of a file's content; null for a directory or a symlink."),
  mode: z.number().int().nonnegative().describe('Permission bits, e.g. 420 (0o644).'),
  target: z.string().optional().describe('Where a symlink points, as written.'),
});

export const FileChangeJson = z.object({ path: z.string(), change: z.enum(['added', 'modified', 'deleted']) });

export const FilesJson = z.object({
  atSeq: z.number().int().nullable().describe('The step asked for; null for the latest.'),
  files: z.array(FileJson).describe('Every file, directory and symlink, by path.'),
  changed: z.array(FileChangeJson).optional().describe('What step atSeq changed (with atSeq only).'),
});
responseSchemas.add(FilesJson, { id: 'RunFiles' });
