/**
 * The statements of owner liveness. A worker holds the advisory lock (NAMESPACE, key) on a session of
 * its own for as long as it lives; the runs it claims carry the key (`owner_lock`). PostgreSQL drops
 * the lock the moment that session ends, so "RUNNING, and nobody holds its owner's lock" means the
 * owner is gone, whatever the lease says.
 */
import pg from 'pg';
import type { SchemaSql } from '../db/schema.ts';

/** The statements, their tables (and their lock namespace) in `schema`. */
export function livenessSql(schema: SchemaSql) {
  /**
   * The advisory lock namespace (pg_locks.classid) of liveness locks: the hash of a text that names the
   * schema, so two schemas in one database never read each other's locks. The text is the one earlier
   * releases hashed (`durable_agent.worker_liveness`, `"other".worker_liveness`): their workers and
   * these must see the same locks.
   */
  const NAMESPACE = `hashtext(${pg.escapeLiteral(`${schema}.worker_liveness`)})`;
  return {
    /** A new key from the sequence, locked for this session; no row when a key cycled onto one still held. */
    TAKE_NEW_KEY: `SELECT k AS key FROM (SELECT nextval(${pg.escapeLiteral(`${schema}.worker_lock_key`)})::int AS k) n
  WHERE pg_try_advisory_lock(${NAMESPACE}, n.k)`,

    /** Takes key $1 again (after a reconnect); false when another session holds it. */
    RETAKE_KEY: `SELECT pg_try_advisory_lock(${NAMESPACE}, $1::int) AS held`,

    RELEASE_KEY: `SELECT pg_advisory_unlock(${NAMESPACE}, $1::int)`,

    /**
     * The probe, run every interval on the liveness session. `mine`: this very backend holds key $1 (false
     * behind a pooler in transaction mode, where statements land on whichever server connection is free).
     * `orphaned`: keys of RUNNING runs whose lock nobody holds. The owners are read by a skip scan of
     * run_owner_lock_idx (one probe per distinct owner), and pg_locks once.
     */
    PROBE: `WITH RECURSIVE owners (k) AS (
    (SELECT owner_lock FROM ${schema}.run WHERE status = 'RUNNING' AND owner_lock IS NOT NULL ORDER BY owner_lock LIMIT 1)
    UNION ALL
    SELECT (SELECT r.owner_lock FROM ${schema}.run r
             WHERE r.status = 'RUNNING' AND r.owner_lock IS NOT NULL AND r.owner_lock > o.k ORDER BY r.owner_lock LIMIT 1)
    FROM owners o WHERE o.k IS NOT NULL),
  held AS MATERIALIZED (
    SELECT l.objid, l.pid FROM pg_locks l
     WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 2 AND l.classid = ${NAMESPACE}::oid
       AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database()))
  SELECT EXISTS (SELECT 1 FROM held WHERE objid = $1::int::oid AND pid = pg_backend_pid()) AS mine,
         coalesce((SELECT array_agg(k ORDER BY k) FROM owners WHERE k IS NOT NULL AND k::oid NOT IN (SELECT objid FROM held)), '{}') AS orphaned`,
  };
}

export interface ProbeRow {
  mine: boolean;
  orphaned: number[];
}
