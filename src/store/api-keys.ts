/**
 * API keys: created for a tenant, shown once, stored as a SHA-256 hash, revoked but never deleted.
 *
 * A key is `dak_` and 43 URL-safe characters (32 random bytes, base64url): the prefix lets secret
 * scanners and the redaction of stored text (observability/redact.ts) recognise one. A key has full
 * entropy, so a single fast hash is enough to keep it out of reach of whoever reads the table: there
 * is no password to guess. Each key has an id, which is what logs and `keys list` show.
 */
import { createHash, randomBytes } from 'node:crypto';
import type pg from 'pg';
import { InputError } from '../domain/errors.ts';
import type { SchemaOption, SchemaSql } from '../db/schema.ts';
import { SchemaStore } from './schema-store.ts';

export const API_KEY_PREFIX = 'dak_';
/** A key as it is issued; kept in step with the default redaction patterns. */
export const API_KEY_PATTERN = /^dak_[A-Za-z0-9_-]{43}$/;
/** Letters, digits, `.`, `_`, `-`; starting with a letter or digit; at most 64. */
export const TENANT_PATTERN = /^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/;

export interface ApiKeyInfo {
  id: string;
  tenant: string;
  label: string | null;
  createdAt: Date;
  revokedAt: Date | null;
  lastUsedAt: Date | null;
}

/** A key just created: the only moment its secret exists outside the caller's hands. */
export interface NewApiKey extends ApiKeyInfo {
  key: string;
}

/** Who a presented key says the caller is. */
export interface KeyHolder {
  keyId: string;
  tenant: string;
}

interface KeyRow {
  id: string;
  tenant: string;
  label: string | null;
  created_at: Date;
  revoked_at: Date | null;
  last_used_at: Date | null;
}

const toInfo = (r: KeyRow): ApiKeyInfo => ({
  id: r.id,
  tenant: r.tenant,
  label: r.label,
  createdAt: r.created_at,
  revokedAt: r.revoked_at,
  lastUsedAt: r.last_used_at,
});

export function hashApiKey(key: string): string {
  return createHash('sha256').update(key, 'utf8').digest('hex');
}

export function checkTenant(tenant: string): string {
  if (!TENANT_PATTERN.test(tenant)) {
    const message = 'must be 1 to 64 letters, digits, ".", "_" or "-", starting with a letter or digit';
    throw new InputError(`invalid tenant "${tenant.slice(0, 80)}": ${message}`, [{ path: 'tenant', message }]);
  }
  return tenant;
}

const KEY_COLUMNS = 'id, tenant, label, created_at, revoked_at, last_used_at';

const apiKeysSql = (schema: SchemaSql) => ({
  CREATE: `INSERT INTO ${schema}.api_key (id, tenant, label, hash) VALUES ($1, $2, $3, $4) RETURNING ${KEY_COLUMNS}`,
  LIST: `SELECT ${KEY_COLUMNS} FROM ${schema}.api_key ORDER BY created_at DESC, id`,
  REVOKE: `UPDATE ${schema}.api_key SET revoked_at = coalesce(revoked_at, now()) WHERE id = $1 RETURNING ${KEY_COLUMNS}`,
  HOLDER: `WITH k AS (
         SELECT id, tenant, last_used_at FROM ${schema}.api_key WHERE hash = $1 AND revoked_at IS NULL),
       used AS (
         UPDATE ${schema}.api_key a SET last_used_at = now() FROM k
         WHERE a.id = k.id AND (k.last_used_at IS NULL OR k.last_used_at < now() - interval '1 minute'))
       SELECT id, tenant FROM k`,
  ANY_EXIST: `SELECT EXISTS (SELECT 1 FROM ${schema}.api_key) AS any`,
});

export class ApiKeys extends SchemaStore<Pick<pg.Pool, 'query'>, ReturnType<typeof apiKeysSql>> {
  constructor(db: Pick<pg.Pool, 'query'>, opts: SchemaOption = {}) {
    super(db, apiKeysSql, opts);
  }

  async create(tenant: string, label: string | null = null): Promise<NewApiKey> {
    checkTenant(tenant);
    if (label !== null && (label.length > 200 || /[\0\p{Cs}]/u.test(label))) {
      throw new InputError('invalid label: at most 200 characters of text', [{ path: 'label', message: 'at most 200 characters of text' }]);
    }
    const key = API_KEY_PREFIX + randomBytes(32).toString('base64url');
    const { rows } = await this.db.query<KeyRow>(this.sql.CREATE, [randomBytes(8).toString('hex'), tenant, label, hashApiKey(key)]);
    return { ...toInfo(rows[0]!), key };
  }

  /** Every key, newest first, without secrets (there are none to show: only hashes are kept). */
  async list(): Promise<ApiKeyInfo[]> {
    const { rows } = await this.db.query<KeyRow>(this.sql.LIST);
    return rows.map(toInfo);
  }

  /** Revokes the key; null when there is no key with this id. Revoking twice keeps the first time. */
  async revoke(id: string): Promise<ApiKeyInfo | null> {
    const { rows } = await this.db.query<KeyRow>(this.sql.REVOKE, [id]);
    return rows[0] ? toInfo(rows[0]) : null;
  }

  /**
   * The holder of a presented key, or null for a key that is unknown or revoked. One statement: the
   * lookup by hash, and the key's last use noted when the note is more than a minute old.
   */
  async holder(key: string): Promise<KeyHolder | null> {
    if (!API_KEY_PATTERN.test(key)) return null;
    const { rows } = await this.db.query<{ id: string; tenant: string }>(this.sql.HOLDER, [hashApiKey(key)]);
    return rows[0] ? { keyId: rows[0].id, tenant: rows[0].tenant } : null;
  }

  /** Whether any key was ever created (revoked ones count: revoking the last key does not open the server). */
  async anyExist(): Promise<boolean> {
    const { rows } = await this.db.query<{ any: boolean }>(this.sql.ANY_EXIST);
    return rows[0]!.any;
  }
}
