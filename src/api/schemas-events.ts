/** The shapes of the run events routes (protocol: src/events/protocol.ts). */
import { z } from 'zod';
import { EVENTS_PAGE, RUN_EVENT_TYPES } from '../events/protocol.ts';
import { responseSchemas } from './schemas.ts';

const cursor = z.coerce.number().int().min(0).max(Number.MAX_SAFE_INTEGER);

export const EventsQuery = z.strictObject({
  after: cursor.optional().describe('Start after this event id (the Last-Event-ID header, when sent, wins); default: from the beginning.'),
  limit: z.coerce.number().int().min(1).max(EVENTS_PAGE.max).default(EVENTS_PAGE.default).describe('JSON form: events per page.'),
});

export const RunEventJson = z.object({
  id: z.number().int().positive().describe('Strictly increasing within the run; the SSE `id:` of the event.'),
  type: z.string().describe(`One of ${RUN_EVENT_TYPES.join(', ')} (more may be added: ignore types you do not know).`),
  data: z.record(z.string(), z.unknown()),
});
responseSchemas.add(RunEventJson, { id: 'RunEvent' });

export const RunEventPage = z.object({
  events: z.array(RunEventJson),
  finished: z.boolean().describe('True when this page ends with run.finished: no event will ever follow.'),
});
responseSchemas.add(RunEventPage, { id: 'RunEventPage' });

/** Last-Event-ID as sent by EventSource: the id of the last event the client saw. */
export function lastEventId(header: string | string[] | undefined): number | undefined {
  const value = Array.isArray(header) ? header[0] : header;
  if (value === undefined || value.trim() === '') return undefined;
  const parsed = cursor.safeParse(value.trim());
  return parsed.success ? parsed.data : undefined;
}
