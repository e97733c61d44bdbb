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
