/**
 * A route as data: its path, its zod schemas and a handler that gets the parsed input. The server
 * registers these and /openapi.json is generated from the very same objects, so the document cannot
 * drift from what the server accepts.
 */
import type { IncomingHttpHeaders, IncomingMessage } from 'node:http';
import type { FastifyBaseLogger } from 'fastify';
import type { z } from 'zod';
import type { Run } from '../domain/types.ts';
import type { Caller } from './auth.ts';

export interface RouteInput<P, Q, B> {
  params: P;
  query: Q;
  body: B;
  log: FastifyBaseLogger;
  /** The request's headers, lower-cased names (content negotiation, Last-Event-ID, Idempotency-Key). */
  headers: IncomingHttpHeaders;
  /** The underlying request, for streaming routes that manage their socket. */
  raw?: IncomingMessage;
  /** Who is asking (auth.ts); on open routes, no one in particular. */
  caller: Caller;
  /**
   * On a route under `/api/runs/{id}`: that run, already checked to be the caller's (run-access.ts).
   * The server looks it up before the handler runs, so no run route can forget the check.
   */
  run?: Run;
}

export interface RouteResult {
  status?: number;
  body: unknown;
  /** Defaults to JSON. */
  contentType?: string;
  headers?: Record<string, string>;
}

export interface ResponseDoc {
  description: string;
  /** A schema registered in responseSchemas (referenced by name) or any other zod schema (inlined). */
  schema?: z.ZodType;
  /** For responses that are not JSON, e.g. the Prometheus text. */
  contentType?: string;
}

/** @unit bytes — the largest request body a route takes unless it says otherwise; larger ones are refused with 413 before they are read to the end. */
export const BODY_LIMIT = 1_048_576;

/** @unit bytes — a body that may carry a run's input as content blocks (images up to 5 MiB, PDFs up to 32 MiB, as base64). */
export const CONTENT_BODY_LIMIT = 48 * 1_048_576;

export interface ApiRoute<P = unknown, Q = unknown, B = unknown> {
  method: 'GET' | 'POST' | 'PATCH' | 'DELETE';
  /** OpenAPI style, `/api/runs/{id}`; the server turns it into fastify's `/api/runs/:id`. */
  path: string;
  /** The last path parameter, which may hold `/` (a file's path): `{path}` matches the rest of the URL. */
  wildcard?: string;
  /** Unique across the API, camelCase: client generators name their methods after it. */
  operationId: string;
  summary: string;
  params?: z.ZodType<P>;
  /** Without a query schema, query parameters are ignored. */
  query?: z.ZodType<Q>;
  body?: z.ZodType<B>;
  /** @unit bytes — the largest body taken (a run's input may hold images and documents); default BODY_LIMIT, 1 MiB. */
  bodyLimit?: number;
  /** Request headers the route reads (lower-case names), for the document; the handler parses them. */
  headers?: z.ZodType;
  /** Answered without authentication (liveness, the API's description); every other route needs a caller. */
  open?: boolean;
  /** The answers; the usual error answers (400, 403, 404, 413, 415, 500, 503) are implied (see openapi.ts). */
  responses: Record<number, ResponseDoc>;
  handle(input: RouteInput<P, Q, B>): Promise<RouteResult>;
}

/** Infers P, Q and B from the schemas, so the handler sees the parsed types, then erases them for the route table. */
export function defineRoute<P = undefined, Q = undefined, B = undefined>(route: ApiRoute<P, Q, B>): ApiRoute {
  return route as unknown as ApiRoute;
}

/** A route under `/api/runs/{id}`: its handler gets the run, found and checked for the caller by the server. */
export function defineRunRoute<P = undefined, Q = undefined, B = undefined>(
  route: Omit<ApiRoute<P, Q, B>, 'handle'> & { handle(input: RouteInput<P, Q, B> & { run: Run }): Promise<RouteResult> },
): ApiRoute {
  if (!/^\/api\/runs\/\{id\}(\/|$)/.test(route.path)) throw new Error(`${route.path} is not a route of one run`);
  return route as unknown as ApiRoute;
}
