/**
 * Which parts of a stored value are payload, and so sealed when encryption is on (encryption.ts),
 * and the same positions opened as they are read. What SQL reads stays plain: a content block's
 * `type` and `id` (a decision finds its tool_use by them), an event's `seq` and `attempt` (the claim
 * reads them), a waiting tool call's `toolUseId`. Whole texts (a run's input, output and errors, a
 * tool's result, a decision's reason, a shared prompt) are sealed whole with `sealer.text`; metadata
 * with `sealer.json`.
 *
 * Each function returns its argument itself when nothing changed: without a key that is nearly
 * always (a plain value is only escaped when it starts like a sealed one).
 */
import type { ContentBlock } from '../domain/types.ts';
import type { FieldSealer, Sealer } from './encryption.ts';

/** A content block's fields that stay plain; every other field is payload. */
const BLOCK_PLAIN = new Set(['type', 'id', 'name', 'tool_use_id']);
/** An event's payload fields (events/protocol.ts); its tool calls' `input` too. */
const EVENT_PAYLOAD = new Set(['text', 'error', 'input', 'output']);

type Field = (v: unknown) => unknown;

const sealField =
  (sealer: FieldSealer): Field =>
  (v) =>
    v === null || v === undefined ? v : typeof v === 'string' ? sealer.text(v) : sealer.json(v);
const openField =
  (sealer: Sealer): Field =>
  (v) =>
    sealer.open(v);

/** `o` with `f` applied to the fields `payload` picks; `o` itself when none changed. */
function mapFields<T extends object>(o: T, payload: (key: string) => boolean, f: Field): T {
  let out: Record<string, unknown> | null = null;
  for (const [k, v] of Object.entries(o)) {
    if (!payload(k)) continue;
    const next = f(v);
    if (next !== v) (out ??= { ...(o as Record<string, unknown>) })[k] = next;
  }
  return (out ?? o) as T;
}

/** `list` with `f` applied to each item; `list` itself when none changed. */
function mapItems<T>(list: readonly T[], f: (item: T) => T): T[] {
  let out: T[] | null = null;
  list.forEach((item, i) => {
    const next = f(item);
    if (next !== item) (out ??= [...list])[i] = next;
  });
  return out ?? (list as T[]);
}

const blocks = (list: ContentBlock[], f: Field) => mapItems(list, (b) => mapFields(b, (k) => !BLOCK_PLAIN.has(k), f));
const toolCalls = <T extends object>(calls: readonly T[], f: Field) => mapItems(calls, (c) => mapFields(c, (k) => k === 'input', f));
const eventData = (data: object, f: Field): object => {
  const payload = mapFields(data, (k) => EVENT_PAYLOAD.has(k), f);
  const calls = (payload as { toolCalls?: unknown }).toolCalls;
  return Array.isArray(calls)
    ? mapFields(
        payload,
        (k) => k === 'toolCalls',
        () => toolCalls(calls as object[], f),
      )
    : payload;
};

/** A model step's content blocks as stored. */
export const sealBlocks = (sealer: FieldSealer, list: ContentBlock[]): ContentBlock[] => blocks(list, sealField(sealer));
export const openBlocks = (sealer: Sealer, list: ContentBlock[]): ContentBlock[] => blocks(list, openField(sealer));

/** Tool calls (of a waiting run, of its events) as stored: each one's input sealed. */
export const sealToolCalls = <T extends object>(sealer: FieldSealer, calls: readonly T[]): T[] => toolCalls(calls, sealField(sealer));
export const openToolCalls = <T extends object>(sealer: Sealer, calls: readonly T[]): T[] => toolCalls(calls, openField(sealer));

/** An event's data as stored. */
export const sealEventData = (sealer: FieldSealer, data: object): object => eventData(data, sealField(sealer));

/** An event's stored JSON text opened; the same text when it has no payload that needs it. */
export function openEventText(sealer: Sealer, stored: string): string {
  if (!stored.includes('"da.')) return stored;
  const data = JSON.parse(stored) as object;
  const opened = eventData(data, openField(sealer));
  return opened === data ? stored : JSON.stringify(opened);
}
