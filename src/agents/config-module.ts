/**
 * `--config ./agents.mjs`: a module whose default export is `{ agents: [...] }` (defineAgent values),
 * and optionally `schedules: [...]` (defineSchedule values), kept in step with the database at start.
 * Loading it runs the user's code, so every way it can fail — no such file, a module that throws or
 * does not parse, a default export of another shape, an invalid agent — is one ConfigError line.
 */
import fs from 'node:fs';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { type Agent, checkAgents } from './define-agent.ts';
import { ConfigError } from '../domain/errors.ts';
import { defineSchedule, type ScheduleDefinition } from '../runtime/declared-schedules.ts';

export interface AgentsConfig {
  agents: Agent[];
  /** Absent when the module declares none (schedules are then left as they are). */
  schedules?: ScheduleDefinition[];
}

export async function loadAgentsConfig(file: string, cwd = process.cwd()): Promise<AgentsConfig> {
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
  const agents = checkAgents(config.agents, where);
  if (!('schedules' in config) || config.schedules === undefined) return { agents };
  if (!Array.isArray(config.schedules)) throw new ConfigError(`${where}: schedules must be an array of defineSchedule(…) values`);
  const schedules = config.schedules.map((s: unknown) => {
    try {
      return defineSchedule(s as ScheduleDefinition);
    } catch (e) {
      throw e instanceof ConfigError ? new ConfigError(`${where}: ${e.message}`) : e;
    }
  });
  return { agents, schedules };
}
