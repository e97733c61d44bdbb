import type Anthropic from '@anthropic-ai/sdk';
import type { ContentBlock, Message } from '../domain/types.ts';
import { LlmError } from '../domain/errors.ts';
import { statusOfErrorType } from './anthropic-failures.ts';
import { normaliseContent, normaliseUsage } from './normalise.ts';
import type { OptionsProblem } from './model-options.ts';
import type { CallOptions, LlmRequest, LlmResponse, ModelOptions } from './types.ts';

/** The API accepts at most this many blocks marked with cache_control in one request. */
export const MAX_CACHE_BREAKPOINTS = 4;

const EPHEMERAL = Object.freeze({ type: 'ephemeral' as const });

/** Blocks the API refuses to mark: thinking blocks, and text blocks with no text. */
function cacheable(block: ContentBlock): boolean {
  if (block.type === 'thinking' || block.type === 'redacted_thinking') return false;
  return !(block.type === 'text' && block.text === '');
}

/**
 * The Messages API request for one step, with prompt-caching breakpoints on the system prompt, on the
 * end of the conversation (so the next step reads this whole prefix from cache) and on the end of the
 * previous user turn (where the previous step wrote its cache entry: the API only looks back about
 * 20 blocks from a breakpoint, and one turn of parallel tool results can be longer than that).
 *
 * `request.messages` is the engine's folded state and is never mutated: annotated messages and blocks
 * are shallow copies, everything else is passed by reference.
 */
export function toMessageParams(request: LlmRequest): Anthropic.MessageCreateParamsNonStreaming {
  const messages: Message[] = request.messages.map(withoutEmptyText);
  const targets = breakpointTargets(messages);
  const existing = messages.reduce((n, m) => n + (typeof m.content === 'string' ? 0 : m.content.filter(hasCacheControl).length), 0);
  const system = request.system ? [{ type: 'text' as const, text: request.system, cache_control: EPHEMERAL }] : undefined;
  let budget = MAX_CACHE_BREAKPOINTS - (system ? 1 : 0) - existing;
  for (const index of targets) {
    if (budget <= 0) break;
    const marked = withBreakpoint(messages[index]!);
    if (marked) {
      messages[index] = marked;
      budget--;
    }
  }
  const params: MessageParams = {
    model: request.model,
    max_tokens: request.maxTokens,
    messages: messages as Anthropic.MessageParam[],
  };
  if (system) params.system = system;
  if (request.tools.length > 0) {
    params.tools = request.tools.map((t) => ({
      name: t.name,
      description: t.description,
      input_schema: t.input_schema as Anthropic.Tool.InputSchema,
    }));
  }
  if (request.options) withOptions(params, request.options, request.tools.length > 0);
  return params;
}

/** The request's parameters with the sampling fields the SDK's types no longer list (the API still takes them). */
type MessageParams = Anthropic.MessageCreateParamsNonStreaming & { temperature?: number; top_p?: number; top_k?: number };

/** Sets the call's options on `params`, in the API's names; a tool choice only where there are tools. */
function withOptions(params: MessageParams, o: CallOptions, hasTools: boolean): void {
  if (o.thinking) {
    params.thinking = o.thinking.type === 'enabled' ? { type: 'enabled', budget_tokens: o.thinking.budgetTokens } : { type: 'adaptive' };
  }
  if (o.temperature !== undefined) params.temperature = o.temperature;
  if (o.topP !== undefined) params.top_p = o.topP;
  if (o.topK !== undefined) params.top_k = o.topK;
  if (o.stopSequences !== undefined) params.stop_sequences = [...o.stopSequences];
  if (o.toolChoice !== undefined && hasTools) {
    params.tool_choice = typeof o.toolChoice === 'string' ? { type: o.toolChoice } : { type: 'tool', name: o.toolChoice.name };
  }
}

/** What the Messages API refuses in `options` that the shared checks allow (they allow what any provider takes); null: nothing. */
export function anthropicRefusal(options: ModelOptions): OptionsProblem | null {
  if (options.temperature !== undefined && options.temperature > 1) {
    return { path: 'modelOptions.temperature', message: 'must be at most 1 for Anthropic models' };
  }
  return null;
}

/**
 * The API refuses empty text blocks in a request, though a reply can hold one (next to a tool_use):
 * sent back verbatim it would fail every later step. It refuses fields it does not know, too: the
 * `provider_metadata` another provider's steps keep on their blocks (see ai-sdk-wire.ts) is left out.
 * Both from the request only; the log keeps them.
 */
function withoutEmptyText(message: Message): Message {
  if (typeof message.content === 'string' || !message.content.some((b) => isEmptyText(b) || FOREIGN in b)) return message;
  const kept = message.content.filter((b) => !isEmptyText(b)).map(withoutForeign);
  return kept.length > 0 ? { role: message.role, content: kept } : message;
}

const isEmptyText = (b: ContentBlock) => b.type === 'text' && b.text === '';

const FOREIGN = 'provider_metadata';

function withoutForeign(block: ContentBlock): ContentBlock {
  if (!(FOREIGN in block)) return block;
  const { [FOREIGN]: _, ...rest } = block;
  return rest as ContentBlock;
}

/** Indexes of the messages to mark, most valuable first: the last one, then the previous user turn. */
function breakpointTargets(messages: readonly Message[]): number[] {
  const last = messages.length - 1;
  if (last < 0) return [];
  const targets = [last];
  for (let i = last - 1; i >= 0; i--) {
    if (messages[i]!.role === 'user') {
      targets.push(i);
      break;
    }
  }
  return targets;
}

function hasCacheControl(block: ContentBlock): boolean {
  return block.cache_control != null;
}

/** A copy of the message whose last cacheable block carries a breakpoint, or null if none can. */
function withBreakpoint(message: Message): Message | null {
  const blocks: ContentBlock[] = typeof message.content === 'string' ? [{ type: 'text', text: message.content }] : [...message.content];
  for (let i = blocks.length - 1; i >= 0; i--) {
    const block = blocks[i]!;
    if (!cacheable(block)) continue;
    if (hasCacheControl(block)) return null;
    blocks[i] = { ...block, cache_control: EPHEMERAL };
    return { role: message.role, content: blocks };
  }
  return null;
}

/**
 * The provider's answer in our terms; content blocks are kept verbatim for the log and for replay.
 * Whatever is not a message is a failed attempt: an error body sent with a 200 is classified by its
 * type, anything else (a proxy's HTML page, an empty body) is retryable as no usable answer (-1).
 */
export function toLlmResponse(message: unknown, requestId: string | null, requestedModel: string): LlmResponse {
  if (message === null || typeof message !== 'object' || Array.isArray(message)) {
    throw new LlmError(-1, `the answer was ${notAMessage(message)} (HTTP 200)`, { type: 'invalid_response', requestId });
  }
  const m = message as Record<string, unknown>;
  if (m.type === 'error') {
    const error = (m.error ?? {}) as { type?: unknown; message?: unknown };
    const type = typeof error.type === 'string' ? error.type : null;
    const text = typeof error.message === 'string' ? error.message : 'error body with HTTP 200';
    throw new LlmError(statusOfErrorType(type), text, { type, requestId });
  }
  const warnings: string[] = [];
  const response: LlmResponse = {
    id: typeof m.id === 'string' ? m.id : null,
    model: typeof m.model === 'string' && m.model !== '' ? m.model : requestedModel,
    content: normaliseContent(m.content, warnings),
    // The API always sets it on a finished answer; "unknown" lets the driver fail loudly.
    stopReason: typeof m.stop_reason === 'string' ? m.stop_reason : 'unknown',
    usage: normaliseUsage(m.usage, warnings),
    requestId,
    attempts: 1,
  };
  if (warnings.length > 0) response.warnings = warnings;
  return response;
}

/** What a response brought instead of a message, for the error (never the body itself: it may be large). */
function notAMessage(body: unknown): string {
  if (body === undefined || (typeof body === 'string' && body.trim() === '')) return 'an empty body';
  if (typeof body === 'string') return 'a body that is not JSON, such as an HTML page';
  return 'JSON that is not a message';
}
