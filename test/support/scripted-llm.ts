/**
 * A scripted LlmClient: answers from a queue set up by the test, and records every request it saw
 * (deep-copied, since the engine keeps appending to the message list it passes). Like the real API,
 * it refuses a request whose messages break the Messages API's rules (messages-rules.ts).
 */
import type { ContentBlock, Usage } from '../../src/domain/types.ts';
import type { LlmError } from '../../src/domain/errors.ts';
import type { LlmCallOptions, LlmClient, LlmRequest, LlmResponse } from '../../src/llm/types.ts';
import { expectValidMessages } from './messages-rules.ts';

type Reply = (req: LlmRequest, options?: LlmCallOptions) => Promise<LlmResponse> | LlmResponse;

export function usage(inputTokens: number, outputTokens: number, cacheRead = 0, cacheWrite = 0): Usage {
  return { inputTokens, outputTokens, cacheReadInputTokens: cacheRead, cacheCreationInputTokens: cacheWrite };
}

export function response(content: ContentBlock[], stopReason: string, u: Usage): LlmResponse {
  return {
    id: `msg_${Math.random().toString(36).slice(2, 10)}`,
    model: 'scripted',
    content,
    stopReason,
    usage: u,
    requestId: null,
    attempts: 1,
  };
}

export class ScriptedLlm implements LlmClient {
  readonly provider = 'scripted';
  readonly seen: LlmRequest[] = [];
  private readonly queue: Reply[] = [];

  /** Used when the queue is empty; without one, an empty queue is a test bug and throws. */
  constructor(private readonly fallback?: Reply) {}

  then(reply: Reply): this {
    this.queue.push(reply);
    return this;
  }

  thenToolUse(id: string, name: string, input: unknown, inTokens = 100, outTokens = 20): this {
    return this.thenToolUses([{ id, name, input }], inTokens, outTokens);
  }

  /** One turn asking for several tools at once (parallel tool use). */
  thenToolUses(uses: { id: string; name: string; input: unknown }[], inTokens = 100, outTokens = 20): this {
    const content = uses.map((u) => ({ type: 'tool_use', id: u.id, name: u.name, input: u.input }));
    return this.then(() => response(content, 'tool_use', usage(inTokens, outTokens)));
  }

  thenText(text: string, inTokens = 150, outTokens = 5, stopReason = 'end_turn'): this {
    return this.then(() => response([{ type: 'text', text }], stopReason, usage(inTokens, outTokens)));
  }

  thenFail(error: LlmError): this {
    return this.then(() => {
      throw error;
    });
  }

  async send(req: LlmRequest, options?: LlmCallOptions): Promise<LlmResponse> {
    this.seen.push(structuredClone(req));
    expectValidMessages(req.messages, `request ${this.seen.length}`);
    const next = this.queue.shift() ?? this.fallback;
    if (!next) throw new Error(`ScriptedLlm: no reply scripted for call ${this.seen.length}`);
    return next(req, options);
  }
}

/** A model that asks for `tool` once per run and then answers: for many concurrent runs. */
export function toolThenTextLlm(tool: string, toolInput: unknown = {}): ScriptedLlm {
  return new ScriptedLlm((req) => {
    const last = req.messages[req.messages.length - 1]!;
    if (typeof last.content === 'string') {
      const id = `toolu_${req.messages.length}_${Math.random().toString(36).slice(2, 10)}`;
      return response([{ type: 'tool_use', id, name: tool, input: toolInput }], 'tool_use', usage(100, 20));
    }
    return response([{ type: 'text', text: 'done' }], 'end_turn', usage(150, 5));
  });
}
