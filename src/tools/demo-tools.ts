/**
 * The default agent's built-in tools, over the demo tickets in PostgreSQL. `add_ticket_comment` has a
 * side effect and honours the idempotency key, so a tool step re-executed after a crash comments once.
 */
import { z } from 'zod';
import { ToolError } from '../errors.ts';
import type { TicketStore } from '../store/demo-tickets.ts';
import type { Tool } from './types.ts';

export const DEFAULT_SYSTEM_PROMPT =
  'You are a support operations assistant for a software company. Answer questions about customer ' +
  'support tickets using the tools provided; never invent tickets. Be brief: list ticket ids with ' +
  'their titles and due dates. Only add a comment to a ticket when the user asks you to.';

function parse<T>(schema: z.ZodType<T>, input: unknown): T {
  const r = schema.safeParse(input);
  if (!r.success) throw new ToolError(`invalid input: ${r.error.issues.map((i) => `${i.path.join('.') || 'input'}: ${i.message}`).join('; ')}`);
  return r.data;
}

const ListInput = z.strictObject({
  customer: z.string().min(1).max(100).optional(),
  overdue: z.boolean().optional(),
  status: z.enum(['open', 'closed']).optional(),
});
const GetInput = z.strictObject({ id: z.string().min(1).max(50) });
const CommentInput = z.strictObject({ ticketId: z.string().min(1).max(50), body: z.string().min(1).max(4000) });

export function demoTools(tickets: TicketStore): Tool[] {
  return [
    {
      name: 'list_tickets',
      description: 'Lists support tickets, optionally only those of one customer (e.g. "acme"), only overdue ones (open and past their due date), or only open/closed ones.',
      inputSchema: z.toJSONSchema(ListInput) as Record<string, unknown>,
      execute: async (input) => tickets.list(parse(ListInput, input)),
    },
    {
      name: 'get_ticket',
      description: 'Shows one ticket (e.g. "ACME-102") with its comments.',
      inputSchema: z.toJSONSchema(GetInput) as Record<string, unknown>,
      execute: async (input) => {
        const { id } = parse(GetInput, input);
        const ticket = await tickets.get(id);
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
        const r = await tickets.comment(ticketId, body, ctx.idempotencyKey);
        if (!r) throw new ToolError(`no ticket ${ticketId}`);
        return r;
      },
    },
  ];
}
