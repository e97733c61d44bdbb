import type Anthropic from '@anthropic-ai/sdk';
import type { Usage } from '../domain/types.ts';
import { LlmError } from '../domain/errors.ts';
import { toLlmResponse } from './anthropic-wire.ts';
import { normaliseUsage } from './normalise.ts';
import type { LlmResponse } from './types.ts';
import { flattenInPlace } from '../util/flat-string.ts';

type Block = Record<string, unknown>;

/** What a delta adds that is seen as it streams: answer text, or thinking text (extended thinking). */
export type StreamedText = Anthropic.TextDelta | Anthropic.ThinkingDelta;

/** The kinds of event that come after message_start, and `ping` (the API's keep-alive), which is skipped knowingly. */
const IN_MESSAGE = new Set<string>(['content_block_start', 'content_block_delta', 'content_block_stop', 'message_delta', 'message_stop']);
const KNOWN_EVENTS = new Set<string>(['message_start', 'ping', ...IN_MESSAGE]);

/** The most unknown types one stream records for the caller: a server that makes up a type per event cannot grow it. */
const MAX_UNKNOWN = 16;

/**
 * Folds the Messages API's stream events into the message the non-streaming API would have answered:
 * the same content blocks (text joined from its deltas, a tool's input parsed from its JSON deltas,
 * thinking with its signature, blocks sent whole kept as sent), the stop reason and the usage
 * (message_start brings input and cache counts, message_delta the cumulative totals). Pure: the
 * provider feeds it the events and reports the answer and thinking text each one adds.
 *
 * What the API may add later is kept, not dropped: a block of a type not known here is kept as it
 * started, and a delta of an unknown type is merged into its block field by field (see `mergeDelta`),
 * as text, thinking and signature deltas rebuild theirs. An event of an unknown type is skipped. Both are recorded by type (`unknownTypes`), for the client to say so.
 *
 * A stream that breaks the protocol (a delta for a block never started, tool input that is not JSON)
 * fails as no usable answer (-1), as does one that ends without message_stop: the next attempt may
 * well be whole.
 */
export class StreamAssembler {
  private message: Record<string, unknown> | null = null;
  private content: Block[] = [];
  /** The input JSON of tool blocks, as streamed so far, by block index. */
  private readonly inputJson = new Map<number, string>();
  private stopped = false;
  /** Event types skipped and delta types merged, as `event foo` / `delta foo_delta`. */
  private unknown: Set<string> | null = null;

  constructor(private readonly requestedModel: string) {}

  /** Folds one event in; returns the text or thinking delta it adds (never an empty one), or null. */
  add(event: Anthropic.RawMessageStreamEvent): StreamedText | null {
    if (event.type === 'message_start') {
      if (this.message) throw broken('a second message_start');
      // Spread last (one map for every answer, see with-fields.ts) and as own fields: the provider's JSON
      // is outside data, where a "__proto__" key must stay a key.
      const { content, usage, ...message } = event.message as unknown as Record<string, unknown>;
      this.message = { usage: { ...(usage as object | undefined) }, ...message };
      this.content = Array.isArray(content) ? (content as Block[]).map((b) => ({ ...b })) : [];
      return null;
    }
    const message = this.message;
    if (!message) {
      // Unknown kinds of event are skipped, so a new one added to the API does not break old clients.
      if (IN_MESSAGE.has(event.type)) throw broken(`${event.type} before message_start`);
      this.noteUnknown('event', event.type);
      return null;
    }
    switch (event.type) {
      case 'content_block_start':
        this.content[event.index] = { ...(event.content_block as unknown as Block) };
        return null;
      case 'content_block_delta':
        return this.addDelta(event.index, event.delta);
      case 'content_block_stop':
        this.closeBlock(event.index);
        return null;
      case 'message_delta': {
        Object.assign(message, event.delta);
        // Cumulative totals: overwrite those present, keep the others from message_start.
        const usage = message.usage as Record<string, unknown>;
        for (const [key, value] of Object.entries(event.usage ?? {})) if (value !== null && value !== undefined) usage[key] = value;
        return null;
      }
      case 'message_stop':
        this.stopped = true;
        return null;
      default:
        this.noteUnknown('event', (event as { type: unknown }).type);
        return null;
    }
  }

  private noteUnknown(kind: 'event' | 'delta', type: unknown): void {
    if (kind === 'event' && KNOWN_EVENTS.has(type as string)) return;
    this.unknown ??= new Set();
    if (this.unknown.size < MAX_UNKNOWN) this.unknown.add(`${kind} ${typeof type === 'string' ? type : typeof type}`);
  }

  /**
   * The types of event this stream skipped and of delta it merged without knowing them, each once:
   * `event <type>` or `delta <type>` (a type that is not a string shows as its JavaScript type).
   */
  unknownTypes(): string[] {
    return this.unknown ? [...this.unknown] : [];
  }

  private block(index: number): Block {
    const block = this.content[index];
    if (!block) throw broken(`a delta for content block ${index}, which was never started`);
    return block;
  }

  private addDelta(index: number, delta: Anthropic.RawContentBlockDelta): StreamedText | null {
    const block = this.block(index);
    switch (delta.type) {
      case 'text_delta':
        block.text = `${typeof block.text === 'string' ? block.text : ''}${delta.text}`;
        return delta.text ? delta : null;
      case 'input_json_delta':
        this.inputJson.set(index, (this.inputJson.get(index) ?? '') + delta.partial_json);
        return null;
      case 'citations_delta':
        block.citations = [...(Array.isArray(block.citations) ? block.citations : []), delta.citation];
        return null;
      case 'thinking_delta':
        block.thinking = `${typeof block.thinking === 'string' ? block.thinking : ''}${delta.thinking}`;
        return delta.thinking ? delta : null;
      case 'signature_delta':
        // Sent whole, once, after the thinking: it replaces the empty one the block started with.
        block.signature = delta.signature;
        return null;
      default:
        mergeDelta(block, delta as unknown as Block);
        this.noteUnknown('delta', (delta as { type?: unknown } | null)?.type);
        return null;
    }
  }

  private closeBlock(index: number): void {
    const block = this.block(index);
    // Joined from its deltas, a rope of them all; the conversation keeps it for the rest of the run.
    if (typeof block.text === 'string') flattenInPlace(block.text);
    if (typeof block.thinking === 'string') flattenInPlace(block.thinking);
    const json = this.inputJson.get(index);
    this.inputJson.delete(index);
    // No delta at all, or an empty one: the input the block started with ({}) stands.
    if (json === undefined || json.trim() === '') return;
    try {
      block.input = JSON.parse(json);
    } catch {
      throw broken(`the input of content block ${index} is not JSON`);
    }
  }

  /** The usage the stream has reported so far; null before message_start. */
  usage(): Usage | null {
    return this.message ? normaliseUsage(this.message.usage, []) : null;
  }

  /** The whole answer; fails (retryably, with the usage seen) when the stream ended before message_stop. */
  finish(requestId: string | null): LlmResponse {
    if (!this.message || !this.stopped) {
      throw new LlmError(-1, 'the stream ended before message_stop', { type: 'incomplete_stream', requestId, usage: this.usage() });
    }
    // On the message itself, not a copy (a copy that adds a field gets a map of its own, see with-fields.ts).
    this.message.content = this.content.filter((b) => b !== undefined);
    return toLlmResponse(this.message, requestId, this.requestedModel);
  }
}

/**
 * A delta of a type not known here, folded into its block as the known ones are: each of its fields
 * but `type` goes to the block's field of the same name, a string appended to a string (as text_delta
 * and thinking_delta are), an array to an array, any other value replacing what the block had (as
 * signature_delta does). So nothing the API sent is lost, and a block whose deltas work that way comes
 * out as the non-streaming API would have answered it. Defined, not assigned: the provider's JSON may
 * hold a "__proto__" key, which must stay a key.
 */
function mergeDelta(block: Block, delta: Block): void {
  if (delta === null || typeof delta !== 'object') return;
  for (const key of Object.keys(delta)) {
    if (key === 'type') continue;
    const value = delta[key];
    const had = Object.hasOwn(block, key) ? block[key] : undefined;
    let merged = value;
    if (typeof value === 'string' && typeof had === 'string') merged = had + value;
    else if (Array.isArray(value) && Array.isArray(had)) merged = [...(had as unknown[]), ...(value as unknown[])];
    Object.defineProperty(block, key, { value: merged, writable: true, enumerable: true, configurable: true });
  }
}

function broken(what: string): LlmError {
  return new LlmError(-1, `the stream broke the protocol: ${what}`, { type: 'invalid_response' });
}
