/**
 * `durable-agent/client`: what a front end needs to talk to a durable-agent server, safe to bundle for
 * a browser (nothing here imports a Node module, the database driver or the HTTP server; the API's
 * types are imported as types only).
 *
 *   import { createClient, foldEvents } from 'durable-agent/client';
 *
 *   const api = createClient({ baseUrl: '/agent' });
 *   const { id } = await api.runs.create({ input: 'Do I need an umbrella in Paris?' });
 *   for await (const e of api.runs.events(id)) if (e.type === 'text.delta') show(e.data.text);
 */
export { createClient, ApiError, type Client, type ClientOptions, type RequestOptions, type RunsClient } from './client.ts';
export type * from './types.ts';
export * from '../events/public.ts';
export type { RunId, RunStatus } from '../domain/types.ts';
