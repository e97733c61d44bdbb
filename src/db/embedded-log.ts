/**
 * The embedded server's log, `postgres.log` under the data directory, holds no user data and is
 * readable by its owner only. By default PostgreSQL logs, with a failed statement, the statement
 * itself (log_min_error_statement = error) and the error's DETAIL and CONTEXT, which quote values:
 * the key of a duplicate row, the JSON that did not parse (run metadata, tokens included). Only the
 * error line stays: what failed, never on what.
 */
import fs from 'node:fs';
import pg from 'pg';
import { PG_TYPES } from './pg-types.ts';

export const SERVER_LOG_SETTINGS: Readonly<Record<string, string>> = {
  log_min_error_statement: 'panic',
  log_error_verbosity: 'terse',
  // Bind parameters of statements logged for any other reason (log_statement, slow statements).
  log_parameter_max_length: '0',
  log_parameter_max_length_on_error: '0',
};

/** For postgresql.conf of a new cluster, so the settings hold from its first statement. */
export const serverLogConf = () =>
  Object.entries(SERVER_LOG_SETTINGS)
    .map(([name, value]) => `${name} = '${value}'`)
    .join('\n');

async function staleSettings(client: pg.Client): Promise<string[]> {
  const { rows } = await client.query<{ name: string; setting: string }>('SELECT name, setting FROM pg_settings WHERE name = ANY($1)', [
    Object.keys(SERVER_LOG_SETTINGS),
  ]);
  return rows.filter((r) => r.setting !== SERVER_LOG_SETTINGS[r.name]).map((r) => r.name);
}

/**
 * Brings a running server to SERVER_LOG_SETTINGS (a cluster created before they existed, maybe running
 * right now): ALTER SYSTEM keeps them across restarts, a reload applies them.
 */
export async function applyServerLogSettings(adminUrl: string): Promise<void> {
  const client = new pg.Client({ connectionString: adminUrl, types: PG_TYPES });
  client.on('error', () => {});
  try {
    await client.connect();
    const stale = await staleSettings(client);
    if (!stale.length) return;
    // ALTER SYSTEM takes no parameters; the names and values are our own constants.
    for (const name of stale)
      await client.query(`ALTER SYSTEM SET ${pg.escapeIdentifier(name)} = ${pg.escapeLiteral(SERVER_LOG_SETTINGS[name]!)}`);
    await client.query('SELECT pg_reload_conf()');
    // The reload is a signal each backend (this one too) takes before its next statement: wait until
    // it has been taken, so that nothing this process runs next is logged the old way.
    for (let check = 0; check < 100 && (await staleSettings(client)).length; check++) await new Promise((r) => setTimeout(r, 20));
  } finally {
    await client.end().catch(() => {});
  }
}

/** Creates the log file for its owner only, and takes back what an older install left readable to all. */
export function protectServerLog(logFile: string, owner: { uid: number; gid: number } | null): void {
  if (!fs.existsSync(logFile)) fs.writeFileSync(logFile, '', { mode: 0o600 });
  if (owner) fs.chownSync(logFile, owner.uid, owner.gid);
  fs.chmodSync(logFile, 0o600);
}
