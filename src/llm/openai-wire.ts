/**
 * The engine's log speaks the Messages API's content blocks; this maps them to the Chat Completions
 * API and back, so the log keeps one format whichever provider a step went to.
 *
 *   log (ours)                                   Chat Completions
 *   system prompt                                {role: system}
 *   user text                                    {role: user, content}
 *   assistant text + tool_use blocks             {role: assistant, content, tool_calls: [{id, function}]}
 *   tool_result blocks (is_error: a failure)     one {role: tool, tool_call_id, content} each
 *
 * Thinking blocks another provider wrote are left out (they are private to it); a block this API
 * cannot express fails the call before it is sent, rather than being dropped without a word.
 */
import type OpenAI from 'openai';
import type { ContentBlock, Message } from '../domain/types.ts';
import { LlmError } from '../domain/errors.ts';
import { normaliseChatUsage } from './normalise.ts';
import { type ChatErrorObject, errorOfBody } from './openai-error-object.ts';
import type { OptionsProblem } from './model-options.ts';
import type { CallOptions, LlmRequest, LlmResponse, ModelOptions } from './types.ts';

type ChatParams = OpenAI.Chat.ChatCompletionCreateParamsNonStreaming;
type ChatMessage = OpenAI.Chat.ChatCompletionMessageParam;
type ToolCall = OpenAI.Chat.ChatCompletionMessageFunctionToolCall;

/** Blocks that stay in the log but are not sent: reasoning that only its own provider can read back. */
const PRIVATE_BLOCKS = new Set(['thinking', 'redacted_thinking']);

/** What a failed tool's result says first, since the API has no is_error flag. */
export const TOOL_ERROR_PREFIX = 'Error: ';

/** The Chat Completions request for one step. `request.messages` is never mutated. */
export function toChatParams(request: LlmRequest): ChatParams {
  const messages: ChatMessage[] = [];
  if (request.system) messages.push({ role: 'system', content: request.system });
  request.messages.forEach((m, i) => {
    if (m.role === 'assistant') messages.push(assistantMessage(m, i));
    else messages.push(...userMessages(m, i));
  });
  // max_completion_tokens, not the deprecated max_tokens: reasoning models refuse the latter.
  const params: ChatParams = { model: request.model, max_completion_tokens: request.maxTokens, messages };
  if (request.tools.length > 0) {
    params.tools = request.tools.map((t) => ({
      type: 'function' as const,
      function: { name: t.name, description: t.description, parameters: t.input_schema },
    }));
  }
  if (request.options) withOptions(params, request.options, request.tools.length > 0);
  return params;
}

/** Sets the call's options on `params`; those the API has no equivalent for are refused by `chatRefusal` first. */
function withOptions(params: ChatParams, o: CallOptions, hasTools: boolean): void {
  const refused = chatRefusal(o);
  if (refused) throw new LlmError(400, `${refused.path}: ${refused.message}`, { type: 'unsupported_option' });
  if (o.thinking) params.reasoning_effort = reasoningEffort(o.thinking);
  if (o.temperature !== undefined) params.temperature = o.temperature;
  if (o.topP !== undefined) params.top_p = o.topP;
  if (o.stopSequences !== undefined) params.stop = [...o.stopSequences];
  if (o.toolChoice !== undefined && hasTools) {
    const c = o.toolChoice;
    params.tool_choice = c === 'any' ? 'required' : typeof c === 'string' ? c : { type: 'function', function: { name: c.name } };
  }
}

/**
 * Thinking as the API's reasoning effort: a budget of up to 4,096 tokens is "low", up to 16,384
 * "medium", more "high"; adaptive thinking is the model's own default, "medium".
 */
export function reasoningEffort(thinking: NonNullable<CallOptions['thinking']>): 'low' | 'medium' | 'high' {
  if (thinking.type === 'adaptive') return 'medium';
  return thinking.budgetTokens <= 4_096 ? 'low' : thinking.budgetTokens <= 16_384 ? 'medium' : 'high';
}

/** Options the Chat Completions API has no equivalent for, by name; null: it takes them all. */
export function chatRefusal(options: ModelOptions | CallOptions): OptionsProblem | null {
  if (options.topK !== undefined) return { path: 'modelOptions.topK', message: 'the Chat Completions API has no top_k' };
  if (options.stopSequences !== undefined && options.stopSequences.length > 4) {
    return { path: 'modelOptions.stopSequences', message: 'the Chat Completions API takes at most 4' };
  }
  return null;
}

function blocksOf(m: Message): ContentBlock[] {
  return typeof m.content === 'string' ? [{ type: 'text', text: m.content }] : m.content;
}

function unsupported(block: ContentBlock, index: number): LlmError {
  return new LlmError(0, `message ${index} holds a "${block.type}" block, which the Chat Completions API cannot express`, {
    type: 'unsupported_content',
  });
}

type UserPart = OpenAI.Chat.ChatCompletionContentPart;

/** An image or a PDF of a user turn as the API's content part; null for any other block. */
function filePart(block: ContentBlock): UserPart | null {
  const source = block.source as { type?: string; media_type?: string; data?: string; url?: string } | undefined;
  if (!source) return null;
  const dataUrl = source.type === 'base64' ? `data:${source.media_type};base64,${source.data}` : null;
  if (block.type === 'image') {
    const url = dataUrl ?? (source.type === 'url' ? source.url : null);
    return url ? { type: 'image_url', image_url: { url } } : null;
  }
  if (block.type === 'document' && dataUrl && source.media_type === 'application/pdf') {
    return { type: 'file', file: { file_data: dataUrl, filename: typeof block.title === 'string' ? block.title : 'document.pdf' } };
  }
  if (block.type === 'document' && source.type === 'text') return { type: 'text', text: String(source.data ?? '') };
  return null;
}

/** Tool results first (they must follow the assistant's tool calls at once), then the user's text, images and files, in their order. */
function userMessages(m: Message, index: number): ChatMessage[] {
  const tools: ChatMessage[] = [];
  const parts: UserPart[] = [];
  for (const block of blocksOf(m)) {
    if (block.type === 'tool_result') {
      const text = resultText(block.content);
      tools.push({
        role: 'tool',
        tool_call_id: String(block.tool_use_id),
        content: block.is_error === true ? `${TOOL_ERROR_PREFIX}${text}` : text,
      });
    } else if (block.type === 'text') {
      parts.push({ type: 'text', text: String(block.text ?? '') });
    } else if (block.type === 'image' || block.type === 'document') {
      const part = filePart(block);
      if (!part) throw unsupported(block, index);
      parts.push(part);
    } else if (!PRIVATE_BLOCKS.has(block.type)) {
      throw unsupported(block, index);
    }
  }
  if (parts.length === 0) return tools;
  // A single text goes as a plain string, as the API's simplest form.
  const only = parts.length === 1 && parts[0]!.type === 'text' ? parts[0]!.text : null;
  return [...tools, { role: 'user', content: only ?? parts }];
}

/** What a tool message says of an image a tool returned: the API takes text only there. */
export const IMAGE_NOT_SENT = '[an image the tool returned: not sent, this API takes text only in tool results]';

/** A tool result is a string in our log, or text and image blocks; the API takes text. */
function resultText(content: unknown): string {
  if (typeof content === 'string') return content;
  if (Array.isArray(content)) {
    return content
      .map((b) => (b && typeof b === 'object' && typeof b.text === 'string' ? b.text : b?.type === 'image' ? IMAGE_NOT_SENT : ''))
      .join('');
  }
  return content === undefined || content === null ? '' : JSON.stringify(content);
}

function assistantMessage(m: Message, index: number): ChatMessage {
  let text = '';
  const calls: ToolCall[] = [];
  for (const block of blocksOf(m)) {
    if (block.type === 'text') text += String(block.text ?? '');
    else if (block.type === 'tool_use') {
      // Arguments that were not JSON were kept as the text the model sent: it gets back what it wrote.
      const args = typeof block.input === 'string' ? block.input : JSON.stringify(block.input ?? {});
      calls.push({ id: String(block.id), type: 'function', function: { name: String(block.name), arguments: args } });
    } else if (!PRIVATE_BLOCKS.has(block.type)) {
      throw unsupported(block, index);
    }
  }
  if (calls.length === 0) return { role: 'assistant', content: text };
  return { role: 'assistant', content: text === '' ? null : text, tool_calls: calls };
}

/** The API's finish reasons as the engine's stop reasons; any other is "unknown", which fails the run. */
const STOP_REASONS: Readonly<Record<string, string>> = {
  stop: 'end_turn',
  tool_calls: 'tool_use',
  length: 'max_tokens',
  content_filter: 'refusal',
};

export function stopReasonOf(finishReason: unknown, warnings: string[]): string {
  const mapped = typeof finishReason === 'string' ? STOP_REASONS[finishReason] : undefined;
  if (mapped) return mapped;
  warnings.push(`finish_reason ${JSON.stringify(finishReason ?? null)} is not one the engine knows: taken as "unknown"`);
  return 'unknown';
}

/**
 * The tool calls of an answer as tool_use blocks: the call's id, its function's name, and its
 * arguments parsed. Arguments that are not a JSON object are kept as the text sent, with a warning:
 * the tool is then not run and the model is told so (the executor refuses an input that is not an
 * object), rather than run on a guess. Calls without a function name are dropped, with a warning.
 */
export function toolUseBlocks(calls: unknown, warnings: string[]): ContentBlock[] {
  if (!Array.isArray(calls)) return [];
  const blocks: ContentBlock[] = [];
  calls.forEach((call: { id?: unknown; function?: { name?: unknown; arguments?: unknown } } | null, i) => {
    const name = call?.function?.name;
    if (typeof name !== 'string' || name === '') {
      warnings.push(`tool call ${i + 1} has no function name: dropped`);
      return;
    }
    const id = typeof call!.id === 'string' && call!.id !== '' ? call!.id : null;
    if (!id) warnings.push(`tool call ${i + 1} (${name}) has no id: one was made up`);
    blocks.push({
      type: 'tool_use',
      id: id ?? `call_made_up_${i + 1}_${Date.now().toString(36)}`,
      name,
      input: parseArguments(call!.function!.arguments, name, warnings),
    });
  });
  return blocks;
}

function parseArguments(raw: unknown, name: string, warnings: string[]): unknown {
  if (raw === undefined || raw === null || (typeof raw === 'string' && raw.trim() === '')) return {}; // a call without arguments
  if (typeof raw !== 'string') return raw;
  try {
    const parsed: unknown = JSON.parse(raw);
    if (parsed !== null && typeof parsed === 'object' && !Array.isArray(parsed)) return parsed;
  } catch {
    /* kept as text, below */
  }
  warnings.push(`the arguments of the call to ${name} are not a JSON object: kept as text, and the tool is not run`);
  return raw;
}

/**
 * The provider's answer in our terms: choices[0].message as a text block and tool_use blocks. A 200
 * that is not a completion fails the attempt: an error object by its kind, anything else (a proxy's
 * HTML page, an empty body, no choices) as no usable answer (-1, retried).
 */
export function toLlmResponse(body: unknown, requestId: string | null, requestedModel: string): LlmResponse {
  if (body === null || typeof body !== 'object' || Array.isArray(body)) {
    throw new LlmError(-1, `the answer was ${notACompletion(body)} (HTTP 200)`, { type: 'invalid_response', requestId });
  }
  const b = body as Record<string, unknown>;
  if (b.error !== undefined && b.error !== null) throw errorOfBody(b.error as ChatErrorObject, requestId);
  const choice = Array.isArray(b.choices) ? (b.choices[0] as Record<string, unknown> | undefined) : undefined;
  if (!choice || typeof choice !== 'object') {
    throw new LlmError(-1, 'the answer holds no choice (HTTP 200)', { type: 'invalid_response', requestId });
  }
  const warnings: string[] = [];
  const message = (choice.message ?? {}) as Record<string, unknown>;
  const content: ContentBlock[] = [];
  if (typeof message.content === 'string' && message.content !== '') content.push({ type: 'text', text: message.content });
  // A refusal comes as its own field, with finish_reason "stop": it is the answer, and a refusal.
  const refusal = typeof message.refusal === 'string' && message.refusal !== '' ? message.refusal : null;
  if (refusal) content.push({ type: 'text', text: refusal });
  content.push(...toolUseBlocks(message.tool_calls, warnings));
  const response: LlmResponse = {
    id: typeof b.id === 'string' ? b.id : null,
    model: typeof b.model === 'string' && b.model !== '' ? b.model : requestedModel,
    content,
    stopReason: refusal ? 'refusal' : stopReasonOf(choice.finish_reason, warnings),
    usage: normaliseChatUsage(b.usage, warnings),
    requestId,
    attempts: 1,
  };
  if (warnings.length > 0) response.warnings = warnings;
  return response;
}

function notACompletion(body: unknown): string {
  if (body === undefined || (typeof body === 'string' && body.trim() === '')) return 'an empty body';
  if (typeof body === 'string') return 'a body that is not JSON, such as an HTML page';
  return 'JSON that is not a completion';
}
