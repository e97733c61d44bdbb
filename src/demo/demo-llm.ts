import { randomBytes } from 'node:crypto';
import type { ContentBlock, Message, ToolResultBlock } from '../domain/types.ts';
import { LlmError } from '../domain/errors.ts';
import { timerSleeper, type Sleeper } from '../util/sleep.ts';
import type { LlmCallOptions, LlmClient, LlmRequest, LlmResponse, ToolDefinition } from '../llm/types.ts';

/** Every text the demo model writes starts with this, so nobody mistakes it for a real model's answer. */
export const DEMO_LABEL = '[demo model]';

export interface DemoLlmClientOptions {
  /** @unit milliseconds — how long each call pretends to think. */
  latencyMs: number;
  sleeper?: Sleeper;
}

/**
 * An offline, deterministic stand-in for a model, so the quickstart works without an API key. It
 * does one thing a real agent does: when the user's words match an available tool it calls it, and
 * once the results are back it answers from them. The same conversation always gets the same answer.
 * It follows its system prompt as far as a keyword matcher can: a tool the prompt forbids ("never
 * use X") is not used, and an answer it cannot give says what its instructions are.
 */
export class DemoLlmClient implements LlmClient {
  readonly provider = 'demo';
  private readonly sleeper: Sleeper;

  constructor(private readonly options: DemoLlmClientOptions) {
    this.sleeper = options.sleeper ?? timerSleeper;
  }

  /**
   * Streams like a real model: the text of its answer in DEMO_STREAM_CHUNKS pieces spread over its
   * latency (the last one when the latency is up); an answer without text arrives whole at the end.
   */
  async send(request: LlmRequest, options: LlmCallOptions = {}): Promise<LlmResponse> {
    // Fresh ids on every call, as the API's: a tool_use id is the idempotency key of the tool call, so
    // two runs asking the same question must not share one.
    const id = randomBytes(9).toString('hex');
    const content = demoReply(request, `toolu_demo_${id}`);
    const usage = {
      inputTokens: approxTokens(JSON.stringify([request.system, request.messages, request.tools])),
      outputTokens: approxTokens(JSON.stringify(content)),
      cacheCreationInputTokens: 0,
      cacheReadInputTokens: 0,
    };
    const text = content.map((b) => (b.type === 'text' ? b.text : '')).join('');
    const chunks = text === '' ? [] : streamChunks(text, DEMO_STREAM_CHUNKS);
    const pauses = Math.max(chunks.length, 1);
    for (let i = 0; i < pauses; i++) {
      try {
        await this.sleeper.sleep(this.options.latencyMs / pauses, options.signal);
      } catch (error) {
        throw new LlmError(-1, 'request aborted', { type: 'aborted', cause: error });
      }
      if (i < chunks.length) options.onText?.(chunks[i]!, 1);
    }
    return {
      id: `msg_demo_${id}`,
      model: request.model,
      content,
      stopReason: content.some((b) => b.type === 'tool_use') ? 'tool_use' : 'end_turn',
      usage,
      requestId: null,
      attempts: 1,
    };
  }
}

/** How many pieces the demo model streams its text in. */
export const DEMO_STREAM_CHUNKS = 4;

/** `text` cut at word boundaries into at most `count` pieces that join back to it exactly. */
export function streamChunks(text: string, count: number): string[] {
  const words = text.match(/\s*\S+\s*/g) ?? [text];
  const per = Math.ceil(words.length / count);
  const chunks: string[] = [];
  for (let i = 0; i < words.length; i += per) chunks.push(words.slice(i, i + per).join(''));
  return chunks;
}

/** About four characters a token, as for English text. */
function approxTokens(text: string): number {
  return Math.max(1, Math.ceil(text.length / 4));
}

/** The demo model's whole behaviour, pure: the content blocks it answers `request` with. */
export function demoReply(request: LlmRequest, toolUseId: string): ContentBlock[] {
  const last = request.messages.at(-1);
  const results = last && typeof last.content !== 'string' ? last.content.filter(isToolResult) : [];
  if (results.length > 0) return [text(results.map(describeResult).join('\n'))];

  const said = last?.role === 'user' ? plainText(last) : '';
  const allowed = allowedTools(request.system, request.tools);
  const asked = askedFor(said, allowed);
  if (asked) return [{ type: 'tool_use', id: toolUseId, name: asked.name, input: asked.input }];
  const tool = pickTool(said, allowed);
  if (tool) return [{ type: 'tool_use', id: toolUseId, name: tool.name, input: toolInput(said, tool) }];
  const available = allowed.length > 0 ? ` I know the tools ${allowed.map((t) => t.name).join(', ')}, but none fits.` : '';
  const role = request.system ? ` My instructions: "${clip(firstSentence(request.system), 160)}"` : '';
  return [
    text(
      `I am the offline demo model (set ANTHROPIC_API_KEY to use Claude), so I cannot really answer "${clip(said, 120)}".${available}${role}`,
    ),
  ];
}

/**
 * The tools the system prompt lets it use: a prompt that says "never use X", "do not call X" or
 * "don't use X" (X a tool's name) takes X away, as a real model would follow that instruction.
 */
export function allowedTools(system: string | null, tools: readonly ToolDefinition[]): readonly ToolDefinition[] {
  if (!system) return tools;
  const forbidden = new Set(
    [...system.matchAll(/\b(?:never|do not|don't|must not)\s+(?:use|call)\s+[`"']?([A-Za-z0-9_-]+)/gi)].map((m) => m[1]!.toLowerCase()),
  );
  return forbidden.size === 0 ? tools : tools.filter((t) => !forbidden.has(t.name.toLowerCase()));
}

function firstSentence(text: string): string {
  return text.trim().match(/^[^.!?\n]*[.!?]?/)?.[0] ?? text;
}

const WAIT_WORDS = /\b(wait|sleep|pause|check back|later)\b/i;
const DURATION = /\b(\d{1,7})\s*(seconds?|secs?|s|minutes?|mins?|m|hours?|h)\b/i;

/**
 * The two requests the demo model answers with a fixed tool rather than by keyword overlap: closing a
 * ticket (close_ticket, which a person must approve) and waiting or checking back later (sleep, 5
 * seconds unless the text names a duration).
 */
export function askedFor(input: string, tools: readonly ToolDefinition[]): { name: string; input: Record<string, unknown> } | null {
  const has = (name: string) => tools.some((t) => t.name === name);
  const id = input.match(ID_PATTERN)?.[0];
  if (has('close_ticket') && id && /\bclose\b/i.test(input)) {
    const because = input.match(/\b(?:as|because|since|with resolution|resolution:?)\s+(.+)$/i)?.[1]?.trim();
    return { name: 'close_ticket', input: { ticketId: id.toUpperCase(), resolution: because || 'Closed at the request of the user.' } };
  }
  if (has('sleep') && WAIT_WORDS.test(input)) {
    const d = input.match(DURATION);
    const n = d ? Number(d[1]) : 5;
    const unit = d?.[2]?.toLowerCase() ?? 's';
    const seconds = unit.startsWith('h') ? n * 3600 : unit.startsWith('m') ? n * 60 : n;
    return { name: 'sleep', input: { seconds: Math.min(Math.max(seconds, 1), 2_592_000) } };
  }
  return null;
}

const STOP_WORDS = new Set([
  'the',
  'and',
  'for',
  'are',
  'which',
  'what',
  'with',
  'that',
  'this',
  'from',
  'one',
  'all',
  'any',
  'our',
  'my',
  'me',
]);
const ID_PATTERN = /\b[A-Za-z]+-\d+\b/;

/** Lower-cased words, plurals folded to singular, so "tickets" meets "ticket". */
function words(text: string): string[] {
  return (text.toLowerCase().match(/[a-z0-9]+/g) ?? []).map((w) => (w.length > 3 && w.endsWith('s') ? w.slice(0, -1) : w));
}

function properties(tool: ToolDefinition): Record<string, { type?: unknown }> {
  const props = tool.input_schema.properties;
  return props && typeof props === 'object' ? (props as Record<string, { type?: unknown }>) : {};
}

/**
 * Which tool the words call for, by keyword overlap (ties go to the tool whose name the words name
 * more, then to the tool listed first; null when no tool scores at least 2):
 * - 2 points per word of the tool's name in the text ("list_tickets" ← "tickets"),
 * - 1 point per longer word of its description in the text,
 * - 1 point per input property named in the text ("overdue"),
 * - 2 points when the text holds an id like ACME-12 and the tool takes an id (get_ticket).
 */
export function pickTool(input: string, tools: readonly ToolDefinition[]): ToolDefinition | null {
  const said = new Set(words(input));
  const hasId = ID_PATTERN.test(input);
  let best: ToolDefinition | null = null;
  let bestScore = 1;
  let bestNameHits = 0;
  for (const tool of tools) {
    const overlap = (ws: string[]) => new Set(ws.filter((w) => said.has(w))).size;
    const nameWords = words(tool.name.replace(/[_-]/g, ' '));
    const descriptionWords = words(tool.description).filter((w) => w.length > 3 && !STOP_WORDS.has(w) && !nameWords.includes(w));
    const propNames = Object.keys(properties(tool));
    const propWords = propNames.flatMap((p) => words(splitName(p))).filter((w) => !nameWords.includes(w));
    const nameHits = overlap(nameWords);
    let score = 2 * nameHits + overlap(descriptionWords) + overlap(propWords);
    if (hasId && propNames.some(isIdProperty)) score += 2;
    if (score > bestScore || (score === bestScore && best !== null && nameHits > bestNameHits)) {
      best = tool;
      bestScore = score;
      bestNameHits = nameHits;
    }
  }
  return best;
}

/**
 * The tool's input, from what the schema asks for and the text offers: an id-like token for an `…id`
 * property, true for a boolean property the text names ("overdue"), and for another string property
 * the word just before a word of the tool's name ("acme" in "acme tickets"). Nothing is invented.
 */
export function toolInput(input: string, tool: ToolDefinition): Record<string, unknown> {
  const said = words(input);
  const nameWords = new Set(words(tool.name.replace(/[_-]/g, ' ')));
  const result: Record<string, unknown> = {};
  let qualifierUsed = false;
  for (const [name, schema] of Object.entries(properties(tool))) {
    if (isIdProperty(name)) {
      const id = input.match(ID_PATTERN)?.[0];
      if (id) result[name] = id;
    } else if (schema.type === 'string' && TEXT_PROPERTY.test(name)) {
      const message = quotedText(input);
      if (message) result[name] = message;
    } else if (schema.type === 'boolean') {
      if (words(name.replace(/_/g, ' ')).every((w) => said.includes(w))) result[name] = true;
    } else if (schema.type === 'string' && !qualifierUsed) {
      const at = said.findIndex((w, i) => i > 0 && nameWords.has(w));
      const qualifier = at > 0 ? said[at - 1]! : '';
      if (qualifier && !STOP_WORDS.has(qualifier) && !(properties(tool)[qualifier]?.type === 'boolean')) {
        result[name] = qualifier;
        qualifierUsed = true;
      }
    }
  }
  return result;
}

/** `ticket_id`, `ticketId`, `id`: a property that takes an id. */
function isIdProperty(name: string): boolean {
  return /(^|_)id$/i.test(name) || /[a-z]Id$/.test(name);
}

/** snake_case and camelCase names as words: "ticketId" → "ticket Id". */
function splitName(name: string): string {
  return name.replace(/_/g, ' ').replace(/([a-z])([A-Z])/g, '$1 $2');
}

/** A property that takes free text (a comment's body, a message), filled from what the user quoted. */
const TEXT_PROPERTY = /^(body|text|comment|message|content|note)$/i;

/**
 * The text the user wants written: in quotes ("…" or '…'), else what follows "saying", "that says"
 * or a colon. Null when the user gave none: nothing is invented.
 */
export function quotedText(input: string): string | null {
  const quoted = input.match(/"([^"]+)"|“([^”]+)”|'([^']{2,})'/);
  if (quoted) return (quoted[1] ?? quoted[2] ?? quoted[3])!.trim();
  const after = input.match(/\b(?:saying|that says|which says)\b\s*(.+)$|:\s*(.+)$/is);
  const text = (after?.[1] ?? after?.[2])?.trim().replace(/[.!]+$/, '');
  return text ? text : null;
}

function isToolResult(block: ContentBlock): block is ToolResultBlock {
  return block.type === 'tool_result';
}

function plainText(message: Message): string {
  if (typeof message.content === 'string') return message.content;
  return message.content.map((b) => (b.type === 'text' && typeof b.text === 'string' ? b.text : '')).join(' ');
}

function text(body: string): ContentBlock {
  return { type: 'text', text: `${DEMO_LABEL} ${body}` };
}

function clip(s: string, max: number): string {
  const flat = s.replace(/\s+/g, ' ').trim();
  return flat.length > max ? `${flat.slice(0, max - 1)}…` : flat;
}

/** One sentence about one tool result: the items it lists when it is JSON, else a short quote. */
function describeResult(block: ToolResultBlock): string {
  const raw: unknown = block.content;
  const body = typeof raw === 'string' ? raw : Array.isArray(raw) ? raw.map((b) => (b as { text?: string }).text ?? '').join('') : '';
  // Error results begin "error: " already; said once.
  if (block.is_error) return `The tool reported an error: ${clip(body.replace(/^error:\s*/, ''), 200)}`;
  let parsed: unknown;
  try {
    parsed = JSON.parse(body);
  } catch {
    return `The tool answered: "${clip(body, 200)}"`;
  }
  const items = Array.isArray(parsed) ? parsed : firstArrayIn(parsed);
  if (!items) return `The tool answered: ${clip(body, 200)}`;
  if (items.length === 0) return 'The tool found nothing.';
  const listed = items.slice(0, 10).map(describeItem).join('; ');
  const more = items.length > 10 ? ` and ${items.length - 10} more` : '';
  return `I found ${items.length} item${items.length === 1 ? '' : 's'}: ${listed}${more}.`;
}

function firstArrayIn(value: unknown): unknown[] | null {
  if (!value || typeof value !== 'object') return null;
  const found = Object.values(value).find(Array.isArray);
  return found ?? null;
}

function describeItem(item: unknown): string {
  if (!item || typeof item !== 'object') return clip(String(item), 60);
  const o = item as Record<string, unknown>;
  const id = o.id ?? o.key ?? o.number;
  const title = o.title ?? o.name ?? o.summary ?? o.subject;
  const parts = [id, title].filter((v) => typeof v === 'string' || typeof v === 'number').map(String);
  return parts.length > 0 ? parts.join(' ') : clip(JSON.stringify(item), 60);
}
