/**
 * A pooler in transaction mode (PgBouncer's `pool_mode=transaction`, Supavisor, RDS Proxy, Neon's
 * pooler) hands a client's server connection to other clients between its transactions, so nothing a
 * session keeps can be relied on: a statement prepared by name is on whichever server prepared it (a
 * second PREPARE of the name on that server fails with 42P05, an EXECUTE elsewhere finds none), and a
 * LISTEN or a session lock stays on a server the client no longer has. Behind one, the pool prepares
 * nothing by name and sessions go to a direct connection, or nowhere (pool.ts).
 */
import pg from 'pg';
import { PoolClient } from './pool-client.ts';

/**
 * A client that never prepares a statement by name: each is sent as the unnamed statement, which
 * lives for one exchange only. The statements keep their names for a direct connection, where a plan
 * kept per connection saves the parse of every checkpoint.
 */
export class UnpreparedClient extends PoolClient {}
const query = PoolClient.prototype.query as (this: PoolClient, config: unknown, ...rest: unknown[]) => unknown;
UnpreparedClient.prototype.query = function (this: PoolClient, config: unknown, ...rest: unknown[]) {
  const named = typeof config === 'object' && config !== null && 'name' in config && !('submit' in config);
  return query.call(this, named ? { ...config, name: undefined } : config, ...rest);
} as typeof PoolClient.prototype.query;

/** @unit milliseconds — an answer to A this late means it was queued for a server: a pooler. */
const QUEUED_MS = 5000;

/** Rounds of the probe: one can miss a pooler whose other clients took the server in between, never find one that is not there. */
const PROBE_ROUNDS = 5;

/**
 * Whether `url` reaches PostgreSQL through a pooler in transaction mode. Two clients, A and B: A asks
 * its server's pid, then B, in a transaction, asks its own, and A asks again. On a connection of its
 * own (direct, or a pooler in session mode) A keeps its server, which B can never have: B's pid differs
 * and A's stays, every time. A transaction pooler gives B the server A has just released (PgBouncer
 * hands out the last one used), or A another while B holds its own; unless another client of the pooler
 * (another process starting at the same moment) took it in between: so the round is repeated, and one
 * round that shows a shared server is proof. A that has to wait for a server while B holds one is
 * proof too (a pooler with one server, or all of them taken). A direct connection is never taken for a
 * pooler; a pooler that hands servers out in turn (PgBouncer's server_round_robin) can be taken for a
 * direct connection, which is why DATABASE_POOLER=transaction is the setting to use in production.
 */
export async function behindTransactionPooler(url: string): Promise<boolean> {
  const open = async () => {
    const c = new pg.Client({ connectionString: url, application_name: 'durable-agent-probe' });
    c.on('error', () => {});
    await c.connect();
    return c;
  };
  const clients: pg.Client[] = [];
  try {
    clients.push(await open(), await open());
    const [a, b] = clients as [pg.Client, pg.Client];
    const pid = async (c: pg.Client) => (await c.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows[0]!.pid;
    for (let round = 0; round < PROBE_ROUNDS; round++) {
      const first = await pid(a);
      await b.query('BEGIN');
      const other = await pid(b);
      if (other === first) return true;
      // While B holds its server, a pooler with no other free one makes A wait; a connection of A's own answers at once.
      const again = await Promise.race([pid(a), new Promise<null>((resolve) => setTimeout(() => resolve(null), QUEUED_MS).unref())]);
      if (again === null) return true;
      await b.query('COMMIT');
      if (again !== first) return true;
    }
    return false;
  } finally {
    await Promise.all(clients.map((c) => c.end().catch(() => {})));
  }
}
