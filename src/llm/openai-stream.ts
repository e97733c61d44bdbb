import type OpenAI from 'openai';
import type { Usage } from '../domain/types.ts';
import { LlmError } from '../domain/errors.ts';
import { normaliseChatUsage } from './normalise.ts';
import { toLlmResponse } from './openai-wire.ts';
import type { LlmResponse } from './types.ts';
import { flattenInPlace } from '../util/flat-string.ts';

/** A tool call as streamed so far: its id and name come once, its arguments in pieces. */
interface PartialCall {
  id: string | null;
  name: string;
  arguments: string;
}

/**
 * Folds the chunks of a streamed Chat Completion (`stream: true`) into the completion the
 * non-streaming API would have answered: choice 0's text joined from its deltas, each tool call's
 * arguments joined by the call's index, the finish reason, and the usage of the last chunk
 * (`stream_options.include_usage`). Pure: the provider feeds it the chunks and reports the text each adds.
 *
 * A stream that ends without a finish reason was cut short and fails as no usable answer (-1),
 * as the Messages API's stream without message_stop does: the next attempt may well be whole.
 */
export class ChatStreamAssembler {
  private id: string | null = null;
  private model: string | null = null;
  private text = '';
  private refusal = '';
  private readonly calls = new Map<number, PartialCall>();
  private finishReason: string | null = null;
  private rawUsage: unknown = undefined;

  constructor(private readonly requestedModel: string) {}

  /** Folds one chunk in; returns the answer text it adds, or null. */
  add(chunk: OpenAI.Chat.ChatCompletionChunk): string | null {
    if (typeof chunk.id === 'string' && chunk.id !== '') this.id ??= chunk.id;
    if (typeof chunk.model === 'string' && chunk.model !== '') this.model ??= chunk.model;
    if (chunk.usage) this.rawUsage = chunk.usage;
    // One choice is asked for (no `n`); any other index is not part of the answer.
    const choice = Array.isArray(chunk.choices) ? chunk.choices.find((c) => (c?.index ?? 0) === 0) : undefined;
    if (!choice) return null;
    if (choice.finish_reason) this.finishReason = choice.finish_reason;
    const delta = choice.delta ?? {};
    for (const call of delta.tool_calls ?? []) this.addCall(call);
    if (typeof delta.refusal === 'string') this.refusal += delta.refusal;
    if (typeof delta.content === 'string' && delta.content !== '') {
      this.text += delta.content;
      return delta.content;
    }
    return null;
  }

  private addCall(call: OpenAI.Chat.ChatCompletionChunk.Choice.Delta.ToolCall): void {
    const index = typeof call.index === 'number' ? call.index : this.calls.size;
    let partial = this.calls.get(index);
    if (!partial) {
      partial = { id: null, name: '', arguments: '' };
      this.calls.set(index, partial);
    }
    if (typeof call.id === 'string' && call.id !== '') partial.id ??= call.id;
    // The name comes whole in the call's first delta; servers that repeat it must not double it.
    if (typeof call.function?.name === 'string' && partial.name === '') partial.name = call.function.name;
    if (typeof call.function?.arguments === 'string') partial.arguments += call.function.arguments;
  }

  /** The usage the stream has reported so far: null until its last chunk brings it. */
  usage(): Usage | null {
    return this.rawUsage === undefined ? null : normaliseChatUsage(this.rawUsage, []);
  }

  /** The whole answer; fails (retryably, with any usage seen) when the stream ended before its finish reason. */
  finish(requestId: string | null): LlmResponse {
    if (this.finishReason === null) {
      throw new LlmError(-1, 'the stream ended before its finish_reason', { type: 'incomplete_stream', requestId, usage: this.usage() });
    }
    // Joined from its deltas, a rope of them all; the conversation keeps it for the rest of the run.
    flattenInPlace(this.text);
    const calls = [...this.calls.entries()]
      .sort(([a], [b]) => a - b)
      .map(([, c]) => ({
        id: c.id,
        type: 'function',
        function: { name: c.name, arguments: c.arguments },
      }));
    const completion = {
      id: this.id,
      model: this.model,
      choices: [
        {
          index: 0,
          message: {
            role: 'assistant',
            content: this.text === '' ? null : this.text,
            refusal: this.refusal === '' ? null : this.refusal,
            tool_calls: calls,
          },
          finish_reason: this.finishReason,
        },
      ],
      usage: this.rawUsage,
    };
    return toLlmResponse(completion, requestId, this.requestedModel);
  }
}
