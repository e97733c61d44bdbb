/**
 * Content blocks from outside the model: a run's input as the Messages API takes a user turn (text,
 * images, documents, from base64 data or a URL), checked at the edge, stored once with the run and
 * sent as they came on every call; and a tool's result as text and image blocks (a screenshot), stored
 * in the tool step under a key of its own and sent as the tool_result's content. Pure: no I/O.
 *
 * URLs are passed to the provider, never fetched here: the provider fetches them (or refuses them).
 */
import { z } from 'zod';
import { storableString } from './text-problems.ts';

export const CONTENT_LIMITS = {
  blocks: 100,
  /** The Messages API's limit for one image. */
  imageBytes: 5 * 1024 * 1024,
  /** The Messages API's limit for one PDF (its whole request is limited to 32 MB as well). */
  documentBytes: 32 * 1024 * 1024,
  /** All blocks of a run's input together, as base64 and text. */
  totalChars: 32 * 1024 * 1024,
  /** All blocks of one tool result together: a few screenshots, so that a run's later calls still fit a request. */
  toolResultChars: 10 * 1024 * 1024,
  textChars: 100_000,
  urlChars: 2_048,
} as const;

export const IMAGE_MEDIA_TYPES = ['image/jpeg', 'image/png', 'image/gif', 'image/webp'] as const;

const BASE64 = /^[A-Za-z0-9+/]*={0,2}$/;

/** Decoded size of base64 text. */
const decodedBytes = (data: string) => Math.floor((data.length * 3) / 4) - (data.endsWith('==') ? 2 : data.endsWith('=') ? 1 : 0);

const base64 = (maxBytes: number, what: string) =>
  z
    .string()
    .min(1)
    .refine((d) => d.length % 4 === 0 && BASE64.test(d), 'must be base64 (A–Z, a–z, 0–9, +, /, = padding; no line breaks)')
    .refine((d) => decodedBytes(d) <= maxBytes, `${what} must be at most ${maxBytes / 1024 / 1024} MiB`);

const UrlSource = z.strictObject({
  type: z.literal('url'),
  url: z.url({ protocol: /^https?$/, error: 'must be an http(s) URL' }).max(CONTENT_LIMITS.urlChars),
});

// No cache_control: the runtime places the breakpoints (at most four per request, the longer-lived first).
const TextBlock = z.strictObject({ type: z.literal('text'), text: storableString(CONTENT_LIMITS.textChars) });

const ImageBlock = z.strictObject({
  type: z.literal('image'),
  source: z.discriminatedUnion('type', [
    z.strictObject({
      type: z.literal('base64'),
      media_type: z.enum(IMAGE_MEDIA_TYPES, { error: `must be one of ${IMAGE_MEDIA_TYPES.join(', ')}` }),
      data: base64(CONTENT_LIMITS.imageBytes, 'an image'),
    }),
    UrlSource,
  ]),
});

const DocumentBlock = z.strictObject({
  type: z.literal('document'),
  source: z.discriminatedUnion('type', [
    z.strictObject({
      type: z.literal('base64'),
      media_type: z.literal('application/pdf', { error: 'must be application/pdf (plain text goes as a text source)' }),
      data: base64(CONTENT_LIMITS.documentBytes, 'a document'),
    }),
    z.strictObject({ type: z.literal('text'), media_type: z.literal('text/plain'), data: storableString(CONTENT_LIMITS.textChars) }),
    UrlSource,
  ]),
  title: storableString(500).optional(),
  context: storableString(10_000).optional(),
  citations: z.strictObject({ enabled: z.boolean() }).optional(),
});

const InputBlock = z.discriminatedUnion('type', [TextBlock, ImageBlock, DocumentBlock], {
  error: 'must be a text, image or document block',
});

type Block = z.infer<typeof InputBlock>;

/** Characters of the blocks' payloads: their text and their base64 data. */
function payloadChars(blocks: readonly Block[]): number {
  let n = 0;
  for (const b of blocks) {
    if (b.type === 'text') n += b.text.length;
    else n += b.source.type === 'url' ? b.source.url.length : b.source.data.length;
  }
  return n;
}

export const InputBlocks = z
  .array(InputBlock)
  .min(1)
  .max(CONTENT_LIMITS.blocks)
  .refine((blocks) => payloadChars(blocks) <= CONTENT_LIMITS.totalChars, `must hold at most ${CONTENT_LIMITS.totalChars} characters in all`)
  .describe(
    'Content blocks of the first user message, as the Messages API takes them: text, image (base64 JPEG, PNG, GIF or WebP up to 5 MiB, or a URL) and document (base64 PDF up to 32 MiB, plain text, or a URL).',
  );

/** `f` applied to each text of a run's input blocks that is text a person wrote (text blocks, plain-text documents, titles, contexts). */
export function mapInputText<B extends Record<string, unknown>>(blocks: readonly B[], f: (text: string) => string): B[] {
  return blocks.map((b) => {
    const out: Record<string, unknown> = { ...b };
    if (typeof b.text === 'string') out.text = f(b.text);
    if (typeof b.title === 'string') out.title = f(b.title);
    if (typeof b.context === 'string') out.context = f(b.context);
    const source = b.source as Record<string, unknown> | undefined;
    if (source?.type === 'text' && typeof source.data === 'string') out.source = { ...source, data: f(source.data) };
    return out as B;
  });
}

export type ContentResult = ({ type: 'text'; text: string } | { type: 'image'; source: Record<string, unknown> })[];

// A tool's text is the tool's to write: what cannot be stored is replaced when it is (storableText), not refused.
const ToolTextBlock = z.strictObject({ type: z.literal('text'), text: z.string().min(1).max(CONTENT_LIMITS.textChars) });

const ToolContent = z
  .array(z.discriminatedUnion('type', [ToolTextBlock, ImageBlock]))
  .min(1)
  .max(CONTENT_LIMITS.blocks)
  .refine(
    (blocks) => payloadChars(blocks) <= CONTENT_LIMITS.toolResultChars,
    `must hold at most ${CONTENT_LIMITS.toolResultChars} characters in all`,
  );

/**
 * A tool's value as content blocks: `{ content: [...] }` whose items are all `text` and `image` blocks
 * (a screenshot with a caption); null for any other value, which is sent as text (JSON), as before
 * tools could return blocks. Blocks that are malformed (a media type the API refuses, too large) are an
 * Error saying which, for the tool's ERROR result.
 */
export function toolContent(value: unknown): ContentResult | null {
  if (value === null || typeof value !== 'object' || Object.keys(value).length !== 1) return null;
  const { content } = value as { content?: unknown };
  const blocks =
    Array.isArray(content) &&
    content.length > 0 &&
    content.every((b) => b !== null && typeof b === 'object' && (b.type === 'text' || b.type === 'image'));
  if (!blocks) return null;
  const parsed = ToolContent.safeParse(content);
  if (!parsed.success) {
    const first = parsed.error.issues[0]!;
    throw new Error(`the tool returned content blocks the model cannot take: ${['content', ...first.path].join('.')}: ${first.message}`);
  }
  return parsed.data as ContentResult;
}

/**
 * The key a tool step's stored result keeps content blocks under. Its own key, not `content`: a tool
 * that returned `{ content }` JSON of any other kind (or before tools could return blocks) is sent as
 * the text it was, whatever its shape.
 */
const STORED_KEY = '$content';
const STORED_PREFIX = `{"${STORED_KEY}":[`;

/** A tool result as stored: the JSON of `{ $content: blocks }`, which `resultContent` reads back. */
export function storedContent(content: ContentResult): string {
  return JSON.stringify({ [STORED_KEY]: content });
}

/** A stored tool result as the model gets it: the blocks of a content result, or the text. */
export function resultContent(stored: string): string | ContentResult {
  if (!stored.startsWith(STORED_PREFIX)) return stored;
  try {
    const blocks = (JSON.parse(stored) as Record<string, unknown>)[STORED_KEY];
    return Array.isArray(blocks) ? (blocks as ContentResult) : stored;
  } catch {
    return stored;
  }
}

/** `f` applied to the text of each text block of a stored content result, or to the whole text of any other. */
export function mapResultText(stored: string, f: (text: string) => string): string {
  const content = resultContent(stored);
  if (typeof content === 'string') return f(stored);
  return storedContent(content.map((b) => (b.type === 'text' ? { ...b, text: f(b.text) } : b)));
}
