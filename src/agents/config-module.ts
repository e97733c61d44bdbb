/**
 * `--config ./agents.mjs`: a module whose default export is `{ agents: [...] }` (defineAgent values).
 * Loading it runs the user's code, so every way it can fail — no such file, a module that throws or
 * does not parse, a default export of another shape, an invalid agent — is one ConfigError line.
 */
import fs from 'node:fs';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { type Agent, checkAgents } from './define-agent.ts';
import { ConfigError } from '../domain/errors.ts';

export async function loadAgentsConfig(file: string, cwd = process.cwd()): Promise<Agent[]> {
  const where = `--config ${file}`;
  const absolute = path.resolve(cwd, file);
  if (!fs.existsSync(absolute)) throw new ConfigError(`${where}: no such file`);
  let exports: { default?: unknown };
  try {
    exports = (await import(pathToFileURL(absolute).href)) as { default?: unknown };
  } catch (e) {
    throw new ConfigError(`${where}: cannot load it: ${e instanceof Error ? e.message : String(e)}`);
  }
  const config = exports.default;
  if (typeof config !== 'object' || config === null || !('agents' in config)) {
    throw new ConfigError(`${where}: its default export must be { agents: [...] } (export default { agents: [myAgent] })`);
  }
  return checkAgents(config.agents, where);
}
