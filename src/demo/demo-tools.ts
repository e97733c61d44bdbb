/**
 * The default agent's built-in tools, over the demo tickets in PostgreSQL. `add_ticket_comment` has a
 * side effect and honours the idempotency key, so a tool step re-executed after a crash comments once.
 */
import { z } from 'zod';
import { DatabaseUnavailableError, ToolError } from '../domain/errors.ts';
import { isTransientDatabaseError } from '../core/transient-errors.ts';
import { describeDatabaseError } from '../core/database-errors.ts';
import type { TicketStore } from './tickets-store.ts';
import { retryTransient, type RetryPolicy, WRITE_RETRY } from '../engine/retrying-store.ts';
import { sleepTool } from '../tools/sleep-tool.ts';
import type { Tool, ToolContext } from '../tools/types.ts';

export const DEFAULT_SYSTEM_PROMPT =
  'You are a support operations assistant for a software company. Answer questions about customer ' +
  'support tickets using the tools provided; never invent tickets. Be brief: list ticket ids with ' +
  'their titles and due dates. Only add a comment to a ticket, or close one, when the user asks you to; ' +
  'use sleep when the user asks you to wait or to check back later.';

function parse<T>(schema: z.ZodType<T>, input: unknown): T {
  const r = schema.safeParse(input);
  if (!r.success)
    throw new ToolError(`invalid input: ${r.error.issues.map((i) => `${i.path.join('.') || 'input'}: ${i.message}`).join('; ')}`);
  return r.data;
}

/**
 * A query of the tools' own, retried like the engine's writes when the database fails in a passing
 * way (every query here is safe to repeat: reads, and a comment keyed by the idempotency key). An
 * outage that outlasts the retries is not the model's business: it ends the attempt, and the call
 * runs again with the same key when the run resumes.
 */
async function query<T>(what: string, ctx: ToolContext, policy: RetryPolicy, op: () => Promise<T>): Promise<T> {
  try {
    return await retryTransient(op, { what, signal: ctx.signal, policy });
  } catch (e) {
    if (isTransientDatabaseError(e))
      throw new DatabaseUnavailableError(`could not ${what}: the database stayed unreachable (${describeDatabaseError(e)})`, { cause: e });
    throw e;
  }
}

const ListInput = z.strictObject({
  customer: z.string().min(1).max(100).optional(),
  overdue: z.boolean().optional(),
  status: z.enum(['open', 'closed']).optional(),
});
const GetInput = z.strictObject({ id: z.string().min(1).max(50) });
const CommentInput = z.strictObject({ ticketId: z.string().min(1).max(50), body: z.string().min(1).max(4000) });
const CloseInput = z.strictObject({ ticketId: z.string().min(1).max(50), resolution: z.string().min(1).max(4000) });

/** `retry`: how a query that failed on the connection is retried (tests shorten it). */
export function demoTools(tickets: TicketStore, retry: RetryPolicy = WRITE_RETRY): Tool[] {
  return [
    {
      name: 'list_tickets',
      description:
        'Lists support tickets, optionally only those of one customer (e.g. "acme"), only overdue ones (open and past their due date), or only open/closed ones.',
      inputSchema: z.toJSONSchema(ListInput) as Record<string, unknown>,
      execute: async (input, ctx) => {
        const filter = parse(ListInput, input);
        return query('list the tickets', ctx, retry, () => tickets.list(filter));
      },
    },
    {
      name: 'get_ticket',
      description: 'Shows one ticket (e.g. "ACME-102") with its comments.',
      inputSchema: z.toJSONSchema(GetInput) as Record<string, unknown>,
      execute: async (input, ctx) => {
        const { id } = parse(GetInput, input);
        const ticket = await query('read the ticket', ctx, retry, () => tickets.get(id));
        if (!ticket) throw new ToolError(`no ticket ${id}`);
        return ticket;
      },
    },
    {
      name: 'add_ticket_comment',
      description: 'Adds a comment to a ticket. Use only when the user asks for it.',
      inputSchema: z.toJSONSchema(CommentInput) as Record<string, unknown>,
      idempotent: true, // by its idempotency key
      execute: async (input, ctx) => {
        const { ticketId, body } = parse(CommentInput, input);
        const r = await query('add the comment', ctx, retry, () => tickets.comment(ticketId, body, ctx.idempotencyKey));
        if (!r) throw new ToolError(`no ticket ${ticketId}`);
        return r;
      },
    },
    {
      name: 'close_ticket',
      description: 'Closes a ticket with a resolution. A person must approve each close before it happens.',
      inputSchema: z.toJSONSchema(CloseInput) as Record<string, unknown>,
      needsApproval: true,
      idempotent: true, // by its idempotency key
      execute: async (input, ctx) => {
        const { ticketId, resolution } = parse(CloseInput, input);
        const r = await query('close the ticket', ctx, retry, () => tickets.close(ticketId, resolution, ctx.idempotencyKey));
        if (!r) throw new ToolError(`no ticket ${ticketId}`);
        return r;
      },
    },
    sleepTool(),
  ];
}
