/**
 * The engine's log speaks the Messages API's content blocks; this maps them to the AI SDK's language
 * model specification (LanguageModelV3 of @ai-sdk/provider 3.x) and its stream back, so a step that
 * went to Gemini, Bedrock or Mistral is logged like any other. Pure, and only types of the SDK: the
 * package stays an optional peer, never loaded by the runtime itself.
 *
 *   log (ours)                                   LanguageModelV3 prompt
 *   system prompt                                {role: system}
 *   user text / image / document blocks          {role: user, content: [text | file (mediaType)]}
 *   tool_result blocks (is_error: a failure)     {role: tool, content: [tool-result (text | error-text | content)]}
 *   assistant text / tool_use                    {role: assistant, content: [text | tool-call]}
 *   assistant thinking / redacted_thinking       reasoning parts, the provider's metadata as providerOptions
 *
 * What the provider attached to a part of its answer (Anthropic's thinking signature, Gemini's
 * thought signature on a function call, OpenAI's item ids) is kept on the block as `provider_metadata`
 * and goes back with it as the part's providerOptions, which is where the AI SDK's providers look for
 * it. A block this mapping cannot express fails the call before it is sent (status 0), rather than
 * being dropped without a word.
 */
import type {
  LanguageModelV3CallOptions,
  LanguageModelV3FilePart,
  LanguageModelV3FinishReason,
  LanguageModelV3FunctionTool,
  LanguageModelV3Message,
  LanguageModelV3Prompt,
  LanguageModelV3StreamPart,
  LanguageModelV3TextPart,
  LanguageModelV3ToolResultOutput,
  LanguageModelV3ToolResultPart,
  SharedV3ProviderOptions,
} from '@ai-sdk/provider';
import type { ContentBlock, Message, Usage } from '../domain/types.ts';
import { LlmError } from '../domain/errors.ts';
import { tokenCount } from './normalise.ts';
import type { CallOptions, LlmRequest, LlmResponse } from './types.ts';

/** Provider options by provider key (`{ google: { … } }`), as the specification passes them. */
export type ProviderOptions = SharedV3ProviderOptions;

/** What the mapping needs to know of the model it maps for. */
export interface ModelContext {
  /** The model's provider id, e.g. "google.generative-ai": where `thinking` maps to, if anywhere. */
  provider: string;
  modelId: string;
  /** URL patterns the model fetches itself, by media type (its `supportedUrls`); other URLs are refused. */
  supportedUrls: Readonly<Record<string, readonly RegExp[]>>;
  /** Provider options sent with every call (aiSdk's `providerOptions`), under those `thinking` maps to. */
  providerOptions?: ProviderOptions;
}

/** The field of a block that holds what its provider attached to it, sent back as the part's providerOptions. */
export const PROVIDER_METADATA = 'provider_metadata';

type UserPart = LanguageModelV3TextPart | LanguageModelV3FilePart;
type AssistantPart = Extract<LanguageModelV3Message, { role: 'assistant' }>['content'][number];
type ResultContent = Extract<LanguageModelV3ToolResultOutput, { type: 'content' }>['value'][number];
type Record_ = Record<string, unknown>;

const isRecord = (v: unknown): v is Record_ => v !== null && typeof v === 'object' && !Array.isArray(v);

/** The call for one step: prompt, tools and options; the caller adds its abort signal. */
export function toCallOptions(request: LlmRequest, model: ModelContext): LanguageModelV3CallOptions {
  const call: LanguageModelV3CallOptions = { prompt: toPrompt(request, model), maxOutputTokens: request.maxTokens };
  if (request.tools.length > 0) {
    call.tools = request.tools.map((t) => ({
      type: 'function' as const,
      name: t.name,
      description: t.description,
      inputSchema: t.input_schema as LanguageModelV3FunctionTool['inputSchema'],
    }));
  }
  const o = request.options ?? {};
  if (o.temperature !== undefined) call.temperature = o.temperature;
  if (o.topP !== undefined) call.topP = o.topP;
  if (o.topK !== undefined) call.topK = o.topK;
  if (o.stopSequences !== undefined) call.stopSequences = [...o.stopSequences];
  if (o.toolChoice !== undefined) {
    const c = o.toolChoice;
    call.toolChoice = typeof c === 'object' ? { type: 'tool', toolName: c.name } : { type: c === 'any' ? 'required' : c };
  }
  const thinking = o.thinking ? thinkingOptions(model.provider, o.thinking) : null;
  // The log's max tokens holds the thinking budget, as the Messages API's max_tokens does; these
  // providers add the budget on top of maxOutputTokens, so it is taken out first.
  if (thinking?.addsBudget && o.thinking?.type === 'enabled')
    call.maxOutputTokens = Math.max(1, request.maxTokens - o.thinking.budgetTokens);
  const providerOptions = mergeProviderOptions(model.providerOptions, thinking?.options);
  if (providerOptions) call.providerOptions = providerOptions;
  return call;
}

/** A thinking setting as provider options; `addsBudget`: the provider sends maxOutputTokens + the budget as its limit. */
export interface ThinkingOptions {
  options: ProviderOptions;
  addsBudget: boolean;
}

/**
 * The specification has no switch for thinking: each provider takes it in its own options. It is
 * mapped where the provider's setting says the same thing (a budget of tokens, or the model deciding)
 * and refused elsewhere, since a run that asks for thinking and silently gets none is worse than one
 * that is told. OpenAI's reasoning effort is a level, not a budget: it is set with aiSdk's
 * `providerOptions` instead.
 */
export function thinkingOptions(provider: string, thinking: NonNullable<CallOptions['thinking']>): ThinkingOptions {
  const p = provider.toLowerCase();
  const enabled = thinking.type === 'enabled';
  // @ai-sdk/anthropic, and Claude on Vertex ("vertex.anthropic.messages"), read the "anthropic" key.
  if (p.includes('anthropic')) {
    const setting = enabled ? { type: 'enabled', budgetTokens: thinking.budgetTokens } : { type: 'adaptive' };
    return { options: { anthropic: { thinking: setting } }, addsBudget: true };
  }
  // @ai-sdk/amazon-bedrock: Claude models' reasoning.
  if (p.startsWith('amazon-bedrock') || p.startsWith('bedrock')) {
    const setting = enabled ? { type: 'enabled', budgetTokens: thinking.budgetTokens } : { type: 'adaptive' };
    return { options: { bedrock: { reasoningConfig: setting } }, addsBudget: true };
  }
  // @ai-sdk/google and @ai-sdk/google-vertex: a budget (within maxOutputTokens), or -1 for Gemini's
  // dynamic thinking; the thoughts are asked for, so they stream as thinking.
  if (p.startsWith('google')) {
    const setting = { thinkingBudget: enabled ? thinking.budgetTokens : -1, includeThoughts: true };
    return { options: { google: { thinkingConfig: setting } }, addsBudget: false };
  }
  throw new LlmError(
    0,
    `thinking is not mapped for provider "${provider}": the AI SDK has no common switch for it; leave thinking out and set the provider's own option with aiSdk(model, { providerOptions }), e.g. { openai: { reasoningEffort: 'high' } }`,
    { type: 'unsupported_option' },
  );
}

/** `extra` over `base`, provider key by provider key (a key's own options merged, `extra` winning). */
function mergeProviderOptions(base: ProviderOptions | undefined, extra: ProviderOptions | undefined): ProviderOptions | undefined {
  if (!extra) return base && Object.keys(base).length > 0 ? base : undefined;
  const merged: ProviderOptions = { ...base };
  for (const [key, value] of Object.entries(extra)) merged[key] = { ...merged[key], ...value };
  return merged;
}

function blocksOf(m: Message): ContentBlock[] {
  return typeof m.content === 'string' ? [{ type: 'text', text: m.content }] : m.content;
}

function unsupported(what: string, index: number): LlmError {
  return new LlmError(0, `message ${index} holds ${what}, which aiSdk cannot send to an AI SDK model`, { type: 'unsupported_content' });
}

/** The prompt: the system message, then each message of the log; `request.messages` is never mutated. */
export function toPrompt(request: LlmRequest, model: ModelContext): LanguageModelV3Prompt {
  const prompt: LanguageModelV3Prompt = [];
  if (request.system) prompt.push({ role: 'system', content: request.system });
  // A tool result names its call only by id; the specification wants the tool's name too.
  const toolNames = new Map<string, string>();
  request.messages.forEach((m, i) => {
    if (m.role === 'assistant') {
      const message = assistantMessage(m, i);
      for (const part of message?.content ?? []) if (part.type === 'tool-call') toolNames.set(part.toolCallId, part.toolName);
      if (message) prompt.push(message);
    } else {
      prompt.push(...userMessages(m, i, toolNames, model));
    }
  });
  return prompt;
}

/** Tool results first, as their own `tool` message (they answer the assistant's calls), then the user's parts. */
function userMessages(m: Message, index: number, toolNames: ReadonlyMap<string, string>, model: ModelContext): LanguageModelV3Message[] {
  const results: LanguageModelV3ToolResultPart[] = [];
  const parts: UserPart[] = [];
  for (const block of blocksOf(m)) {
    if (block.type === 'tool_result') results.push(toolResult(block, index, toolNames));
    else if (block.type === 'text') parts.push({ type: 'text', text: String(block.text ?? '') });
    else if (block.type === 'image' || block.type === 'document') parts.push(filePart(block, index, model));
    else throw unsupported(`a "${block.type}" block`, index);
  }
  const messages: LanguageModelV3Message[] = [];
  if (results.length > 0) messages.push({ role: 'tool', content: results });
  if (parts.length > 0) messages.push({ role: 'user', content: parts });
  return messages;
}

interface Source {
  type?: unknown;
  media_type?: unknown;
  data?: unknown;
  url?: unknown;
}

/**
 * An image or document block as a file part. base64 data goes as it is; a URL goes as a URL only to a
 * model that fetches such URLs itself (its `supportedUrls`): the AI SDK's own calls download the others
 * first, and the runtime does not fetch URLs on a model's behalf, so those fail here, before the call.
 */
function filePart(block: ContentBlock, index: number, model: ModelContext): LanguageModelV3FilePart {
  const source = (isRecord(block.source) ? block.source : {}) as Source;
  const filename = typeof block.title === 'string' && block.title !== '' ? { filename: block.title } : {};
  if (source.type === 'base64' && typeof source.media_type === 'string' && typeof source.data === 'string') {
    return { type: 'file', mediaType: source.media_type, data: source.data, ...filename };
  }
  if (source.type === 'url' && typeof source.url === 'string') {
    // The Messages API's URL documents are PDFs; an image's type is the provider's to find out.
    const mediaType = block.type === 'image' ? 'image/*' : 'application/pdf';
    if (!urlSupported(source.url, mediaType, model.supportedUrls)) {
      throw new LlmError(
        0,
        `message ${index} holds ${block.type === 'image' ? 'an image' : 'a document'} by URL, which model "${model.modelId}" of ${model.provider} does not fetch itself: send it as base64`,
        { type: 'unsupported_content' },
      );
    }
    return { type: 'file', mediaType, data: new URL(source.url), ...filename };
  }
  if (block.type === 'document' && source.type === 'text' && typeof source.data === 'string') {
    // A string is base64 to the specification: plain text is encoded.
    return { type: 'file', mediaType: 'text/plain', data: Buffer.from(source.data, 'utf8').toString('base64'), ...filename };
  }
  throw unsupported(`a "${block.type}" block with a source of type ${JSON.stringify(source.type ?? null)}`, index);
}

/** The specification's rule: a media type pattern (`image/*`, `*`) and a regular expression over the lower-cased URL. */
export function urlSupported(url: string, mediaType: string, supported: Readonly<Record<string, readonly RegExp[]>>): boolean {
  const lower = url.toLowerCase();
  const [kind] = mediaType.split('/');
  return Object.entries(supported).some(([pattern, expressions]) => {
    const p = pattern.toLowerCase();
    const matches =
      p === '*' || p === '*/*' || p === mediaType || ((p.endsWith('/*') || mediaType.endsWith('/*')) && p.split('/')[0] === kind);
    return matches && expressions.some((e) => new RegExp(e.source, e.flags.replace('g', '')).test(lower));
  });
}

function toolResult(block: ContentBlock, index: number, toolNames: ReadonlyMap<string, string>): LanguageModelV3ToolResultPart {
  const id = String(block.tool_use_id);
  const toolName = toolNames.get(id);
  if (toolName === undefined) throw unsupported(`a tool_result for "${id}", a call no earlier tool_use made`, index);
  return { type: 'tool-result', toolCallId: id, toolName, output: toolOutput(block.content, block.is_error === true, index) };
}

/**
 * A result is text ('text', or 'error-text' for a failed call); one with images or documents is
 * 'content'. The specification's error output is text only, so a failed call's images are left out.
 */
function toolOutput(content: unknown, isError: boolean, index: number): LanguageModelV3ToolResultOutput {
  const text = (value: string): LanguageModelV3ToolResultOutput => ({ type: isError ? 'error-text' : 'text', value });
  if (typeof content === 'string') return text(content);
  if (!Array.isArray(content)) return text(content === undefined || content === null ? '' : JSON.stringify(content));
  const parts = content.map((b: unknown) => resultPart(b, index));
  if (isError || parts.every((p) => p.type === 'text')) {
    return text(parts.map((p) => (p.type === 'text' ? p.text : '')).join(''));
  }
  return { type: 'content', value: parts };
}

function resultPart(block: unknown, index: number): ResultContent {
  const b = isRecord(block) ? block : {};
  const source = (isRecord(b.source) ? b.source : {}) as Source;
  if (b.type === 'text') return { type: 'text', text: String(b.text ?? '') };
  if (b.type === 'image' && source.type === 'base64' && typeof source.data === 'string' && typeof source.media_type === 'string') {
    return { type: 'image-data', data: source.data, mediaType: source.media_type };
  }
  if (b.type === 'image' && source.type === 'url' && typeof source.url === 'string') return { type: 'image-url', url: source.url };
  if (b.type === 'document' && source.type === 'base64' && typeof source.data === 'string' && typeof source.media_type === 'string') {
    return { type: 'file-data', data: source.data, mediaType: source.media_type };
  }
  if (b.type === 'document' && source.type === 'url' && typeof source.url === 'string') {
    return { type: 'file-url', url: source.url, mediaType: 'application/pdf' };
  }
  throw unsupported(`a tool_result with a ${JSON.stringify(b.type ?? null)} part the specification's tool output cannot hold`, index);
}

/** What the provider attached to the block, as the providerOptions it goes back with. */
function optionsOf(block: ContentBlock): { providerOptions?: ProviderOptions } {
  const metadata = block[PROVIDER_METADATA];
  return isRecord(metadata) ? { providerOptions: metadata as ProviderOptions } : {};
}

/**
 * Thinking goes back as reasoning: with the metadata its provider attached, or, for a block written by
 * the runtime's own Anthropic client, its signature where @ai-sdk/anthropic reads one. Redacted
 * thinking is only Anthropic's (and Bedrock's Claude): an empty reasoning part carrying its data, which
 * those providers send back as redacted_thinking and others leave out.
 */
function assistantMessage(m: Message, index: number): Extract<LanguageModelV3Message, { role: 'assistant' }> | null {
  const parts: AssistantPart[] = [];
  for (const block of blocksOf(m)) {
    switch (block.type) {
      case 'text':
        // A reply can hold an empty text block next to a tool call; several APIs refuse one sent back.
        if (String(block.text ?? '') !== '') parts.push({ type: 'text', text: String(block.text), ...optionsOf(block) });
        break;
      case 'tool_use':
        parts.push({
          type: 'tool-call',
          toolCallId: String(block.id),
          toolName: String(block.name),
          input: block.input ?? {},
          ...optionsOf(block),
        });
        break;
      case 'thinking': {
        const signature = typeof block.signature === 'string' && block.signature !== '' ? block.signature : null;
        const own = optionsOf(block);
        parts.push({
          type: 'reasoning',
          text: String(block.thinking ?? ''),
          ...(own.providerOptions ? own : signature ? { providerOptions: { anthropic: { signature } } } : {}),
        });
        break;
      }
      case 'redacted_thinking': {
        const own = optionsOf(block);
        parts.push({
          type: 'reasoning',
          text: '',
          providerOptions: own.providerOptions ?? { anthropic: { redactedData: String(block.data ?? '') } },
        });
        break;
      }
      default:
        throw unsupported(`a "${block.type}" block`, index);
    }
  }
  return parts.length > 0 ? { role: 'assistant', content: parts } : null;
}

/** What a stream part adds that is seen as it streams: answer text, or thinking text. */
export interface StreamedText {
  kind: 'text' | 'thinking';
  text: string;
}

/** A block of the answer, with the raw input of a tool call until the stream is whole. */
interface Pending {
  block: ContentBlock;
  /** The tool call's input as streamed (a JSON text), parsed at the end. */
  input?: unknown;
}

/** The most kinds of dropped part one answer names in its warnings. */
const MAX_DROPPED_KINDS = 8;

/**
 * Folds the parts of `doStream` into the answer: text and reasoning joined from their deltas by id
 * (in the order they began), tool calls as tool_use blocks, the response's id and model, the finish
 * reason and the usage. Pure: the client feeds it the parts (an `error` part is the client's to
 * raise) and reports the text each adds.
 *
 * Parts that are not the model's answer to this runtime are dropped with a warning: a tool the
 * provider ran itself and its result, files it generated, sources it cited, an approval it asks for.
 * A stream that ends without its finish part fails as no usable answer (-1, retried), as do tool
 * input that is not JSON and a finish reason of "error" (the model stopped on an error of its own).
 */
export class AiSdkStreamAssembler {
  private id: string | null = null;
  private model: string | null = null;
  private readonly pending: Pending[] = [];
  private readonly open = new Map<string, ContentBlock>();
  private finishReason: LanguageModelV3FinishReason | null = null;
  private rawUsage: unknown = undefined;
  private readonly warnings: string[] = [];
  private readonly dropped = new Set<string>();

  constructor(private readonly requestedModel: string) {}

  /** Folds one part in; returns the text or thinking it adds (never empty), or null. */
  add(part: LanguageModelV3StreamPart): StreamedText | null {
    switch (part.type) {
      case 'stream-start':
        for (const w of part.warnings ?? []) this.warnings.push(`the provider warned: ${describeWarning(w)}`);
        return null;
      case 'response-metadata':
        if (typeof part.id === 'string' && part.id !== '') this.id ??= part.id;
        if (typeof part.modelId === 'string' && part.modelId !== '') this.model ??= part.modelId;
        return null;
      case 'text-start':
      case 'text-end':
        this.block('text', part.id, part.providerMetadata);
        return null;
      case 'text-delta':
        return this.delta('text', part);
      case 'reasoning-start':
      case 'reasoning-end':
        this.block('thinking', part.id, part.providerMetadata);
        return null;
      case 'reasoning-delta':
        return this.delta('thinking', part);
      case 'tool-call':
        if (part.providerExecuted) this.drop(`a call of "${part.toolName}" the provider ran itself`);
        else this.toolCall(part);
        return null;
      case 'finish':
        this.finishReason = part.finishReason;
        this.rawUsage = part.usage;
        return null;
      case 'tool-result':
        this.drop(`the result of "${part.toolName}", a tool the provider ran itself`);
        return null;
      case 'file':
      case 'source':
      case 'tool-approval-request':
        this.drop(`a "${part.type}" part`);
        return null;
      default:
        // raw chunks (never asked for), tool input as it streams (the tool-call part has it whole),
        // an error (the client's), and whatever a later version adds.
        return null;
    }
  }

  /** A text or reasoning delta added to its block, whose field is named as the kind: `text`, `thinking`. */
  private delta(kind: 'text' | 'thinking', part: { id: string; delta?: string; providerMetadata?: unknown }): StreamedText | null {
    const block = this.block(kind, part.id, part.providerMetadata);
    block[kind] = `${String(block[kind])}${part.delta ?? ''}`;
    return part.delta ? { kind, text: part.delta } : null;
  }

  private block(kind: 'text' | 'thinking', id: string, metadata: unknown): ContentBlock {
    const key = `${kind}:${id}`;
    let block = this.open.get(key);
    if (!block) {
      block = kind === 'text' ? { type: 'text', text: '' } : { type: 'thinking', thinking: '' };
      this.open.set(key, block);
      this.pending.push({ block });
    }
    mergeMetadata(block, metadata);
    return block;
  }

  private toolCall(part: Extract<LanguageModelV3StreamPart, { type: 'tool-call' }>): void {
    const n = this.pending.filter((p) => p.block.type === 'tool_use').length + 1;
    if (typeof part.toolName !== 'string' || part.toolName === '') {
      this.warnings.push(`tool call ${n} has no tool name: dropped`);
      return;
    }
    let id = part.toolCallId;
    if (typeof id !== 'string' || id === '') {
      id = `call_made_up_${n}_${Date.now().toString(36)}`;
      this.warnings.push(`tool call ${n} (${part.toolName}) has no id: one was made up`);
    }
    const block: ContentBlock = { type: 'tool_use', id, name: part.toolName, input: {} };
    mergeMetadata(block, part.providerMetadata);
    this.pending.push({ block, input: part.input });
  }

  private drop(what: string): void {
    if (this.dropped.size < MAX_DROPPED_KINDS && !this.dropped.has(what)) {
      this.dropped.add(what);
      this.warnings.push(`the answer held ${what}: dropped, as the runtime neither sent nor can store it`);
    }
  }

  /** The usage the stream has reported: null until its finish part brings it. */
  usage(): Usage | null {
    return this.finishReason === null ? null : normaliseAiSdkUsage(this.rawUsage, []);
  }

  /** The whole answer; fails (retryably, with the usage seen) for a stream cut short or an answer that is not usable. */
  finish(requestId: string | null): LlmResponse {
    if (this.finishReason === null) {
      throw new LlmError(-1, 'the stream ended before its finish part', { type: 'incomplete_stream', requestId, usage: null });
    }
    const warnings = [...this.warnings];
    const usage = normaliseAiSdkUsage(this.rawUsage, warnings);
    const reason = finishReasonOf(this.finishReason);
    if (reason.unified === 'error') {
      throw new LlmError(-1, `the model stopped on an error (finish reason ${JSON.stringify(reason.raw ?? 'error')})`, {
        type: 'finish_error',
        requestId,
        usage,
      });
    }
    const content: ContentBlock[] = [];
    for (const { block, input } of this.pending) {
      if (block.type === 'tool_use') {
        block.input = parseInput(input, block, content.filter((b) => b.type === 'tool_use').length + 1, requestId, usage);
        content.push(block);
      } else if (block.type === 'text') {
        if (block.text !== '') content.push(block);
      } else {
        const thinking = finishThinking(block);
        if (thinking) content.push(thinking);
      }
    }
    const response: LlmResponse = {
      id: this.id,
      model: this.model ?? this.requestedModel,
      content,
      stopReason: stopReasonOf(reason, warnings),
      usage,
      requestId,
      attempts: 1,
    };
    if (warnings.length > 0) response.warnings = warnings;
    return response;
  }
}

/**
 * Merges what a provider attached to a part into its block, provider key by provider key: a text's or
 * reasoning's metadata comes in pieces (Anthropic's signature with the last delta, OpenAI's item id at
 * the end). A "__proto__" key, outside data, is skipped rather than set as a prototype.
 */
function mergeMetadata(block: ContentBlock, metadata: unknown): void {
  if (!isRecord(metadata)) return;
  const current = (isRecord(block[PROVIDER_METADATA]) ? block[PROVIDER_METADATA] : {}) as Record<string, Record_>;
  for (const [key, value] of Object.entries(metadata)) {
    if (key === '__proto__' || !isRecord(value)) continue;
    current[key] = { ...current[key], ...value };
  }
  if (Object.keys(current).length > 0) block[PROVIDER_METADATA] = current;
}

/** The first string field `name` of any provider's metadata on the block. */
function metadataField(block: ContentBlock, name: string): string | null {
  const metadata = block[PROVIDER_METADATA];
  if (!isRecord(metadata)) return null;
  for (const value of Object.values(metadata)) {
    if (isRecord(value) && typeof value[name] === 'string' && value[name] !== '') return value[name];
  }
  return null;
}

/**
 * Reasoning as the log keeps it: a thinking block with its signature where the provider gave one
 * (Anthropic's, Bedrock's), a redacted_thinking block for reasoning the provider sent encrypted, and
 * nothing for reasoning with neither text nor metadata.
 */
function finishThinking(block: ContentBlock): ContentBlock | null {
  const metadata = block[PROVIDER_METADATA];
  const redacted = metadataField(block, 'redactedData');
  if (redacted !== null) return { type: 'redacted_thinking', data: redacted, [PROVIDER_METADATA]: metadata };
  const signature = metadataField(block, 'signature');
  if (signature !== null) block.signature = signature;
  return block.thinking === '' && metadata === undefined ? null : block;
}

/** A tool call's input (a JSON text to the specification); none at all is a call without arguments. */
function parseInput(raw: unknown, block: ContentBlock, n: number, requestId: string | null, usage: Usage): unknown {
  if (raw === undefined || raw === null || (typeof raw === 'string' && raw.trim() === '')) return {};
  if (typeof raw !== 'string') return raw;
  try {
    return JSON.parse(raw) as unknown;
  } catch {
    throw new LlmError(-1, `the input of tool call ${n} (${String(block.name)}) is not JSON`, {
      type: 'invalid_response',
      requestId,
      usage,
    });
  }
}

/** The specification's finish reason; a provider written against an early draft sends the unified string alone. */
function finishReasonOf(reason: unknown): { unified: string; raw: string | undefined } {
  if (typeof reason === 'string') return { unified: reason, raw: undefined };
  const r = isRecord(reason) ? reason : {};
  return { unified: typeof r.unified === 'string' ? r.unified : 'other', raw: typeof r.raw === 'string' ? r.raw : undefined };
}

const STOP_REASONS: Readonly<Record<string, string>> = {
  stop: 'end_turn',
  length: 'max_tokens',
  'tool-calls': 'tool_use',
  'content-filter': 'refusal',
};

/**
 * The unified finish reason as the engine's stop reason. Where the provider's own reason is one the
 * engine knows more precisely (Anthropic's "stop_sequence", "model_context_window_exceeded") it is
 * taken. "other", the specification's catch-all, ends the turn as "end_turn" with a warning naming the
 * provider's reason: providers use it for ends they do not classify, most of them ordinary.
 */
export function stopReasonOf(reason: unknown, warnings: string[]): string {
  const { unified, raw } = finishReasonOf(reason);
  if (raw === 'stop_sequence' || raw === 'model_context_window_exceeded') return raw;
  const mapped = STOP_REASONS[unified];
  if (mapped) return mapped;
  warnings.push(
    `finish reason ${JSON.stringify(unified)} (the provider's ${JSON.stringify(raw ?? null)}) is not one the engine knows: taken as "end_turn"`,
  );
  return 'end_turn';
}

/**
 * The specification's usage in our terms. Its input total includes what was read from and written to
 * the cache, which ours keeps apart (reads are cheaper and stay out of a run's budget, writes are
 * priced apart): input = total − cache reads − cache writes, or the non-cached count where a provider
 * gives no total. Output is the total, reasoning included. Missing counts are 0.
 */
export function normaliseAiSdkUsage(raw: unknown, warnings: string[]): Usage {
  const source = isRecord(raw) ? raw : {};
  if (source !== raw) warnings.push('usage was missing: counted as 0 tokens');
  // A number where an object belongs is a provider of an earlier draft, whose counts were plain totals.
  const input = isRecord(source.inputTokens) ? source.inputTokens : { total: source.inputTokens };
  const output = isRecord(source.outputTokens) ? source.outputTokens : { total: source.outputTokens };
  const read = tokenCount(input.cacheRead, 'inputTokens.cacheRead', warnings);
  const written = tokenCount(input.cacheWrite, 'inputTokens.cacheWrite', warnings);
  let fresh: number;
  if (input.total === undefined || input.total === null) {
    fresh = tokenCount(input.noCache, 'inputTokens.noCache', warnings);
  } else {
    const total = tokenCount(input.total, 'inputTokens.total', warnings);
    fresh = total - read - written;
    if (fresh < 0) {
      warnings.push(`usage.inputTokens: cache reads (${read}) and writes (${written}) exceed the total (${total}): input counted as 0`);
      fresh = 0;
    }
  }
  return {
    inputTokens: fresh,
    outputTokens: tokenCount(output.total, 'outputTokens.total', warnings),
    cacheCreationInputTokens: written,
    cacheReadInputTokens: read,
  };
}

function describeWarning(w: unknown): string {
  const r = isRecord(w) ? w : {};
  if (typeof r.message === 'string') return r.message;
  const feature = typeof r.feature === 'string' ? r.feature : 'a setting';
  const details = typeof r.details === 'string' ? ` (${r.details})` : '';
  return r.type === 'compatibility' ? `${feature} is used in a compatibility mode${details}` : `${feature} is not supported${details}`;
}
