import { describe, expect, it } from 'vitest';
import { CreateRunBody, LIMITS } from '../../src/runs/requests.ts';

/** Metadata whose JSON is `bytes` bytes of UTF-8, most of them in three-byte characters. */
function metadataOf(bytes: number): Record<string, unknown> {
  const frame = JSON.stringify({ note: '' }).length;
  const wide = Math.floor((bytes - frame) / 3);
  const note = '€'.repeat(wide) + 'x'.repeat(bytes - frame - wide * 3);
  const metadata = { note };
  expect(new TextEncoder().encode(JSON.stringify(metadata)).length).toBe(bytes);
  return metadata;
}

describe('CreateRunBody metadata', () => {
  it('counts its size in UTF-8 bytes of its JSON, not in characters: the limit itself passes, a byte more does not', () => {
    expect(CreateRunBody.safeParse({ input: 'x', metadata: metadataOf(LIMITS.metadataBytes) }).success).toBe(true);
    const over = CreateRunBody.safeParse({ input: 'x', metadata: metadataOf(LIMITS.metadataBytes + 1) });
    expect(over.success).toBe(false);
    expect(over.error?.issues[0]?.message).toBe(`must be at most ${LIMITS.metadataBytes} bytes as JSON`);
  });
});
