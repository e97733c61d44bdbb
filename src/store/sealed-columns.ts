/**
 * Which parts of a stored value are payload, and so sealed when encryption is on (encryption.ts).
 * What SQL reads stays plain: a content block's `type` and `id` (a decision finds its tool_use by
 * them), an event's `seq` and `attempt` (the claim reads them), a waiting tool call's `toolUseId`.
 * Whole texts (a run's input, output and errors, a tool's result, a decision's reason, a shared
 * prompt) are sealed whole with `sealer.text`; metadata with `sealer.json`.
 */
import type { ContentBlock } from '../domain.ts';
import type { FieldSealer } from './encryption.ts';

/** A content block's fields that stay plain; every other field is payload. */
const BLOCK_PLAIN = new Set(['type', 'id', 'name', 'tool_use_id']);
/** An event's payload fields (events/protocol.ts); tool calls' `input` too. */
const EVENT_PAYLOAD = new Set(['text', 'error', 'input', 'output']);

function sealField(sealer: FieldSealer, v: unknown): unknown {
  return typeof v === 'string' ? sealer.text(v) : sealer.json(v);
}

/** A model step's content blocks as stored. */
export function sealBlocks(sealer: FieldSealer, blocks: ContentBlock[]): ContentBlock[] {
  if (!sealer.enabled) return blocks;
  return blocks.map((b) => {
    const out: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(b)) out[k] = BLOCK_PLAIN.has(k) ? v : sealField(sealer, v);
    return out as unknown as ContentBlock;
  });
}

/** Tool calls (of a waiting run, of its events) as stored: each one's input sealed. */
export function sealToolCalls<T extends { input?: unknown }>(sealer: FieldSealer, calls: readonly T[]): T[] {
  return calls.map((c) => (c.input === undefined ? c : { ...c, input: sealer.json(c.input) }));
}

/** An event's data as stored. */
export function sealEventData(sealer: FieldSealer, data: object): object {
  if (!sealer.enabled) return data;
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(data)) {
    if (EVENT_PAYLOAD.has(k) && v !== null && v !== undefined) out[k] = sealField(sealer, v);
    else if (k === 'toolCalls' && Array.isArray(v)) out[k] = sealToolCalls(sealer, v as { input?: unknown }[]);
    else out[k] = v;
  }
  return out;
}
