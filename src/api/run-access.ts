/**
 * Which requests must show a key, and which run a request may touch: the server applies both in one
 * request hook, to every route it has, whichever way the route was defined (the route table, or a
 * streaming route registered on fastify directly).
 *  - Every route needs a caller (auth.ts) unless it is marked open (`config: { open: true }`).
 *  - Every route under `/api/runs/:id` gets its run looked up here, before its handler and before
 *    its body is read. A run of another tenant is answered exactly as a run that does not exist (404):
 *    the other tenant cannot even learn that the id is taken.
 */
import type { FastifyRequest } from 'fastify';
import type { z } from 'zod';
import type { Run, RunId } from '../domain/types.ts';
import { NotFoundError } from '../domain/errors.ts';
import type { RunRecords } from '../store/run-records.ts';
import type { Authenticator, Caller } from './auth.ts';
import { parseInput } from './errors.ts';

/** What the hook reads of a route's fastify `config`. */
export interface AccessConfig {
  /** Answered without authentication. */
  open?: boolean;
  /** The route's path schema: a malformed path is a 400 before its run is looked up (else a 404 would say less). */
  params?: z.ZodType;
  /** The path parameter fastify names `*` (see ApiRoute.wildcard). */
  wildcard?: string | undefined;
}

export interface Access {
  caller: Caller;
  /** The run of a `/api/runs/:id…` route, the caller's. */
  run?: Run;
}

/** fastify's form of a run route's path: `/api/runs/:id`, `/api/runs/:id/events`, … */
const RUN_ROUTE = /^\/api\/runs\/:(\w+)(\/|$)/;
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** Whether the caller may see this run: a caller bound to a tenant sees that tenant's runs only. */
export function visibleTo(caller: Caller, run: Pick<Run, 'tenant'>): boolean {
  return caller.tenant === null || run.tenant === caller.tenant;
}

/** The run, if it exists and the caller may see it; NotFoundError otherwise (the same answer for both). */
export async function runFor(store: Pick<RunRecords, 'get'>, caller: Caller, id: string): Promise<Run> {
  const run = UUID.test(id) ? await store.get(id as RunId) : null;
  if (!run || !visibleTo(caller, run)) throw new NotFoundError(`run ${id} not found`);
  return run;
}

/** The request's path parameters under the route's names (fastify names a wildcard parameter `*`). */
export function routeParams(wildcard: string | undefined, params: unknown): unknown {
  if (!wildcard) return params;
  const { '*': rest, ...named } = params as Record<string, string>;
  return { ...named, [wildcard]: rest };
}

const accessByRequest = new WeakMap<FastifyRequest, Access>();

/** What the request hook established for this request (unrestricted for a request it did not see). */
export function accessOf(req: FastifyRequest): Access {
  return accessByRequest.get(req) ?? { caller: { tenant: null, keyId: null } };
}

/**
 * The request hook: authenticates, then finds the run of a run route. A malformed id is left to the
 * route's own parsing (a 400 naming the field); it cannot name a run.
 */
export function accessHook(auth: Authenticator, store: Pick<RunRecords, 'get'>) {
  return async (req: FastifyRequest): Promise<void> => {
    const route = req.routeOptions.url;
    const config = req.routeOptions.config as AccessConfig;
    if (route === undefined || config.open) return;
    const caller = await auth.authenticate(req);
    // A key shows in the logs by its id only; its tenant not at all.
    if (caller.keyId) req.log = req.log.child({ key_id: caller.keyId });
    const access: Access = { caller };
    const param = RUN_ROUTE.exec(route)?.[1];
    if (param && config.params) parseInput(config.params, routeParams(config.wildcard, req.params), 'path');
    const id = param ? (req.params as Record<string, string | undefined>)[param] : undefined;
    if (id !== undefined && UUID.test(id)) access.run = await runFor(store, caller, id);
    accessByRequest.set(req, access);
  };
}
