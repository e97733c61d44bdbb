/**
 * Who is asking: every API request but the open ones (/healthz, /openapi.json, the dashboard's page
 * shell) is authenticated here before its input is even parsed, and answered 401 when it must carry
 * a key and does not. The answer is a Caller: the tenant whose runs the request may see and create.
 *
 * Three ways to decide, chosen once at start:
 *  - keys (the default): `Authorization: Bearer <key>` names an API key of the `api_key` table. A key
 *    is required as soon as any key exists, or always when the server listens on an address other
 *    than loopback (or AUTH=on). A loopback server with no key at all lets requests in without one, so
 *    a fresh install's quickstart works; the table is looked at again at most once a second until the
 *    first key appears, so a key created while the server runs takes effect within a second.
 *  - a hook (library users): `authenticate(request)` returns the tenant, or null for a 401.
 *  - off (AUTH=off): every request is let in and sees every tenant.
 * A presented key is always checked, even where none is required: a wrong key is a 401, never a
 * silent fall-back to seeing everything.
 */
import type { IncomingHttpHeaders } from 'node:http';
import { UnauthorizedError } from '../domain/errors.ts';
import type { ApiKeys } from '../store/api-keys.ts';
import { isLoopbackHostname } from './loopback-guard.ts';

/** The requester, as far as authentication is concerned. */
export interface Caller {
  /** The tenant whose runs the caller sees and creates; null: every tenant's (no authentication applies). */
  tenant: string | null;
  /** The API key presented, by id (what logs show of a caller); null without one. */
  keyId: string | null;
}

/** What an authenticator looks at: fastify's request and node's IncomingMessage both fit. */
export interface AuthRequest {
  method?: string | undefined;
  url?: string | undefined;
  headers: IncomingHttpHeaders;
}

/** A library user's own authentication: the caller's tenant, or null to refuse the request (401). */
export type AuthenticateHook = (request: AuthRequest) => string | null | undefined | Promise<string | null | undefined>;

export type AuthMode = 'keys' | 'hook' | 'off';

export interface Authenticator {
  readonly mode: AuthMode;
  /** The caller, or UnauthorizedError. */
  authenticate(request: AuthRequest): Promise<Caller>;
  /** Whether a request without a key is refused right now. */
  required(): Promise<boolean>;
}

/** No authentication applies: sees every tenant. */
export const UNRESTRICTED: Caller = Object.freeze({ tenant: null, keyId: null });

const missing = () => new UnauthorizedError('an API key is required: send it as Authorization: Bearer <key>', 'missing');
const invalid = () => new UnauthorizedError('the API key is not valid (unknown or revoked)', 'invalid');

/** The token of `Authorization: Bearer <token>`; undefined without the header, null when it is not a bearer token. */
export function bearerToken(headers: IncomingHttpHeaders): string | null | undefined {
  const value = headers.authorization;
  if (value === undefined) return undefined;
  const m = /^Bearer +([^\s]+) *$/i.exec(value);
  return m ? m[1]! : null;
}

export const authOff = (): Authenticator => ({
  mode: 'off',
  authenticate: async () => UNRESTRICTED,
  required: async () => false,
});

export function authByHook(hook: AuthenticateHook): Authenticator {
  return {
    mode: 'hook',
    async authenticate(request) {
      const tenant = await hook(request);
      if (tenant === null || tenant === undefined || tenant === '') throw bearerToken(request.headers) ? invalid() : missing();
      if (typeof tenant !== 'string') throw new TypeError('authenticate must return a tenant name (a string) or null');
      return { tenant, keyId: null };
    },
    required: async () => true,
  };
}

export interface KeyAuthOptions {
  /** Require a key even while no key exists: a server reachable from other machines, or AUTH=on. */
  alwaysRequired: boolean;
  /** @unit milliseconds — how long "no key exists yet" is believed before the table is read again. Default 1000. */
  recheckMs?: number;
  now?: () => number;
}

export function authByKeys(keys: Pick<ApiKeys, 'holder' | 'anyExist'>, opts: KeyAuthOptions): Authenticator {
  const recheckMs = opts.recheckMs ?? 1000;
  const now = opts.now ?? Date.now;
  // Keys are never deleted (revoked ones stay), so once one exists authentication stays required.
  let keysExist = opts.alwaysRequired;
  let checkedAt = -Infinity;
  let checking: Promise<boolean> | null = null;

  const required = async (): Promise<boolean> => {
    if (keysExist || now() - checkedAt < recheckMs) return keysExist;
    checking ??= keys
      .anyExist()
      .then((any) => {
        keysExist ||= any;
        checkedAt = now();
        return keysExist;
      })
      .finally(() => (checking = null));
    return checking;
  };

  return {
    mode: 'keys',
    required,
    async authenticate(request) {
      const token = bearerToken(request.headers);
      if (token === null) throw invalid();
      if (token !== undefined) {
        const holder = await keys.holder(token);
        if (!holder) throw invalid();
        return { tenant: holder.tenant, keyId: holder.keyId };
      }
      if (await required()) throw missing();
      return UNRESTRICTED;
    },
  };
}

/**
 * The authenticator a server gets: the library's hook when given, none with AUTH=off, else API keys,
 * required from the start when the server listens beyond loopback (a HOST other than a loopback
 * name or address, 0.0.0.0 included) or with AUTH=on.
 */
export function authFor(
  config: { auth: 'on' | 'off' | null; host: string },
  keys: Pick<ApiKeys, 'holder' | 'anyExist'>,
  hook?: AuthenticateHook,
): Authenticator {
  if (hook) return authByHook(hook);
  if (config.auth === 'off') return authOff();
  return authByKeys(keys, { alwaysRequired: config.auth === 'on' || !isLoopbackHostname(config.host) });
}
