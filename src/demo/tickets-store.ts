/** SQL of the demo tools' ticket data (see migration 0002). */
import type pg from 'pg';
import { schemaSql, type SchemaOption, type SchemaSql } from '../db/schema.ts';

export interface Ticket {
  id: string;
  customer: string;
  title: string;
  status: 'open' | 'closed';
  priority: string;
  dueDate: string;
  overdue: boolean;
}

export interface TicketComment {
  id: number;
  body: string;
  createdAt: string;
}

const TICKET = `id, customer, title, status, priority, to_char(due_date, 'YYYY-MM-DD') AS "dueDate",
  (status = 'open' AND due_date < current_date) AS overdue`;

const ticketsSql = (schema: SchemaSql) => ({
  LIST: `SELECT ${TICKET} FROM ${schema}.demo_ticket
       WHERE ($1::text IS NULL OR customer = lower($1))
         AND ($2::boolean IS NULL OR (status = 'open' AND due_date < current_date) = $2)
         AND ($3::text IS NULL OR status = $3)
       ORDER BY due_date, id`,
  GET: `SELECT ${TICKET} FROM ${schema}.demo_ticket WHERE id = upper($1)`,
  COMMENTS: `SELECT id, body, created_at AS "createdAt" FROM ${schema}.demo_ticket_comment WHERE ticket_id = $1 ORDER BY id`,
  COMMENT: `WITH ticket AS (SELECT id FROM ${schema}.demo_ticket WHERE id = upper($1)),
       ins AS (
         INSERT INTO ${schema}.demo_ticket_comment (ticket_id, body, idempotency_key)
         SELECT id, $2, $3 FROM ticket
         ON CONFLICT (idempotency_key) DO NOTHING
         RETURNING id)
       SELECT id, true AS created FROM ins
       UNION ALL
       SELECT id, false FROM ${schema}.demo_ticket_comment WHERE idempotency_key = $3
       LIMIT 1`,
  CLOSE: `WITH ticket AS (UPDATE ${schema}.demo_ticket SET status = 'closed' WHERE id = upper($1) RETURNING id),
       ins AS (
         INSERT INTO ${schema}.demo_ticket_comment (ticket_id, body, idempotency_key)
         SELECT id, 'Closed: ' || $2, $3 FROM ticket
         ON CONFLICT (idempotency_key) DO NOTHING
         RETURNING id)
       SELECT t.id, coalesce((SELECT id FROM ins), (SELECT id FROM ${schema}.demo_ticket_comment WHERE idempotency_key = $3)) AS comment_id
       FROM ticket t`,
});

export class TicketStore {
  private readonly sql: ReturnType<typeof ticketsSql>;

  constructor(
    private readonly db: pg.Pool,
    opts: SchemaOption = {},
  ) {
    this.sql = ticketsSql(schemaSql(opts.schema));
  }

  async list(filter: { customer?: string; overdue?: boolean; status?: 'open' | 'closed' }): Promise<Ticket[]> {
    const { rows } = await this.db.query<Ticket>(this.sql.LIST, [filter.customer ?? null, filter.overdue ?? null, filter.status ?? null]);
    return rows;
  }

  async get(id: string): Promise<(Ticket & { comments: TicketComment[] }) | null> {
    const { rows } = await this.db.query<Ticket>(this.sql.GET, [id]);
    if (!rows[0]) return null;
    const comments = await this.db.query<TicketComment>(this.sql.COMMENTS, [rows[0].id]);
    return { ...rows[0], comments: comments.rows };
  }

  /** Adds a comment once per idempotency key; a repeated call returns the comment made the first time. */
  async comment(ticketId: string, body: string, idempotencyKey: string): Promise<{ commentId: number; created: boolean } | null> {
    const { rows } = await this.db.query<{ id: number; created: boolean }>(this.sql.COMMENT, [ticketId, body, idempotencyKey]);
    return rows[0] ? { commentId: Number(rows[0].id), created: rows[0].created } : null;
  }

  /**
   * Closes a ticket with its resolution (kept as a comment under the idempotency key): closing again
   * with the same key changes nothing and answers the same. Null when there is no such ticket.
   */
  async close(
    ticketId: string,
    resolution: string,
    idempotencyKey: string,
  ): Promise<{ ticketId: string; status: 'closed'; commentId: number } | null> {
    const { rows } = await this.db.query<{ id: string; comment_id: number }>(this.sql.CLOSE, [ticketId, resolution, idempotencyKey]);
    return rows[0] ? { ticketId: rows[0].id, status: 'closed', commentId: Number(rows[0].comment_id) } : null;
  }
}
