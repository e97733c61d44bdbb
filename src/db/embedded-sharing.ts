/**
 * How the processes of the project share one embedded PostgreSQL: each holds a "presence" connection
 * for as long as it uses the server, and the last one to leave stops it. Attaching and leaving both
 * happen under the start lock, so a process that is starting can never be stopped under.
 */
import fs from 'node:fs';
import path from 'node:path';
import pg from 'pg';
import { withDirectoryLock } from './dir-lock.ts';
import { type EmbeddedCluster, findOrStartLocked, startLockOf, stopEmbeddedPostgres } from './embedded.ts';
import { PG_TYPES } from './pg-types.ts';

/** Marks a process's presence; pools come and go (idle connections close), this one stays. */
const PRESENCE_APPLICATION = 'durable-agent-presence';
const REATTACH_DELAY_MS = 1_000;

export interface AttachedCluster extends EmbeddedCluster {
  /** Leaves the server; stops it when no other process uses it. Returns whether it was stopped. */
  detach(): Promise<boolean>;
}

export async function attachEmbeddedPostgres(dataDir: string): Promise<AttachedCluster> {
  fs.mkdirSync(path.resolve(dataDir), { recursive: true });
  let presence: pg.Client;
  let detaching = false;
  let retry: NodeJS.Timeout | undefined;

  // Under the lock: find (or start) the server and mark this process present on it.
  const attach = () =>
    withDirectoryLock(startLockOf(dataDir), async () => {
      const cluster = await findOrStartLocked(dataDir);
      const client = new pg.Client({ connectionString: cluster.adminUrl, application_name: PRESENCE_APPLICATION, types: PG_TYPES });
      client.on('error', () => {});
      await client.connect();
      // The server went away under us (stopped or killed, maybe restarted by another process): come
      // back, or this process would no longer count and the next one to leave would stop the server.
      client.once('end', () => {
        if (!detaching) retry = setTimeout(reattach, REATTACH_DELAY_MS);
      });
      presence = client;
      return cluster;
    });
  const reattach = () => {
    attach().catch(() => {
      if (!detaching) retry = setTimeout(reattach, REATTACH_DELAY_MS);
    });
  };

  const cluster = await attach();
  let detached: Promise<boolean> | null = null;
  return {
    ...cluster,
    detach: () =>
      (detached ??= withDirectoryLock(startLockOf(dataDir), async () => {
        detaching = true;
        clearTimeout(retry);
        const others = await otherClients(presence).catch(() => null);
        await presence.end().catch(() => {});
        if (others !== 0) return false;
        await stopEmbeddedPostgres(dataDir);
        return true;
      })),
  };
}

/**
 * Client connections other than `own`. A pool closed a moment ago may still be listed, so a busy
 * answer is asked again briefly before it counts.
 */
async function otherClients(own: pg.Client): Promise<number> {
  let others = 0;
  for (let check = 0; check < 5; check++) {
    if (check > 0) await new Promise((r) => setTimeout(r, 100));
    const { rows } = await own.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM pg_stat_activity WHERE backend_type = 'client backend' AND pid <> pg_backend_pid()`,
    );
    others = rows[0]!.n;
    if (others === 0) break;
  }
  return others;
}
