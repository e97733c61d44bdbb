/**
 * A run's input as content blocks, as the Messages API takes them in a user turn: text, images
 * (screenshots, photos) and documents (PDFs, plain text), each from base64 data or a URL. Checked at
 * the edge, stored once with the run and sent as they came on every call of it.
 */
import { z } from 'zod';

export const CONTENT_LIMITS = {
  blocks: 100,
  /** The Messages API's limit for one image. */
  imageBytes: 5 * 1024 * 1024,
  /** The Messages API's limit for one PDF (its whole request is limited to 32 MB as well). */
  documentBytes: 32 * 1024 * 1024,
  /** All blocks together, as base64 and text: what one run's input may hold. */
  totalChars: 32 * 1024 * 1024,
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

const CacheControl = z.strictObject({ type: z.literal('ephemeral'), ttl: z.enum(['5m', '1h']).optional() }).optional();

const TextBlock = z.strictObject({
  type: z.literal('text'),
  text: z.string().min(1).max(CONTENT_LIMITS.textChars),
  cache_control: CacheControl,
});

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
  cache_control: CacheControl,
});

const DocumentBlock = z.strictObject({
  type: z.literal('document'),
  source: z.discriminatedUnion('type', [
    z.strictObject({
      type: z.literal('base64'),
      media_type: z.literal('application/pdf', { error: 'must be application/pdf (plain text goes as a text source)' }),
      data: base64(CONTENT_LIMITS.documentBytes, 'a document'),
    }),
    z.strictObject({
      type: z.literal('text'),
      media_type: z.literal('text/plain'),
      data: z.string().min(1).max(CONTENT_LIMITS.textChars),
    }),
    UrlSource,
  ]),
  title: z.string().min(1).max(500).optional(),
  context: z.string().min(1).max(10_000).optional(),
  citations: z.strictObject({ enabled: z.boolean() }).optional(),
  cache_control: CacheControl,
});

const InputBlock = z.discriminatedUnion('type', [TextBlock, ImageBlock, DocumentBlock], {
  error: 'must be a text, image or document block',
});

/** Characters of the blocks' payloads: their text and their base64 data. */
function payloadChars(blocks: readonly z.infer<typeof InputBlock>[]): number {
  let n = 0;
  for (const b of blocks) {
    if (b.type === 'text') n += b.text.length;
    else if (b.source.type === 'url') n += b.source.url.length;
    else n += b.source.data.length;
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

/** What a tool's result may hold as content blocks: text and images. */
const ToolResultBlock = z.discriminatedUnion('type', [TextBlock.omit({ cache_control: true }), ImageBlock.omit({ cache_control: true })]);
const ToolContent = z.strictObject({ content: z.array(ToolResultBlock).min(1).max(CONTENT_LIMITS.blocks) });

const CONTENT_PREFIX = '{"content":[';

/**
 * A tool's value as content blocks, when it is `{ content: [...] }` of text and image blocks (a
 * screenshot with a caption); null for any other value, which is sent as text. A value of that shape
 * whose blocks are malformed is an Error saying which, for the tool's ERROR result.
 */
export function toolContent(value: unknown): ContentResult | null {
  if (value === null || typeof value !== 'object' || !Array.isArray((value as { content?: unknown }).content)) return null;
  if (Object.keys(value).length !== 1) return null;
  const parsed = ToolContent.safeParse(value);
  if (!parsed.success) {
    const first = parsed.error.issues[0]!;
    throw new Error(`the tool returned { content } that is not text and image blocks: ${first.path.join('.')}: ${first.message}`);
  }
  return parsed.data.content as ContentResult;
}

export type ContentResult = ({ type: 'text'; text: string } | { type: 'image'; source: Record<string, unknown> })[];

/** A tool result as stored: the JSON of `{ content: blocks }`, which `resultContent` reads back. */
export function storedContent(content: ContentResult): string {
  return JSON.stringify({ content });
}

/**
 * A stored tool result as the model gets it: the blocks of a `{ content: [...] }` result, or the text.
 * A text that merely looks like one (a tool that returned that JSON as a string) reads the same way:
 * the model is sent the same blocks either way.
 */
export function resultContent(stored: string): string | ContentResult {
  if (!stored.startsWith(CONTENT_PREFIX)) return stored;
  try {
    return toolContent(JSON.parse(stored)) ?? stored;
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
