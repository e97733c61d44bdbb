import { describe, expect, it } from 'vitest';
import { acceptReply } from '../../src/engine/model-reply.ts';
import { MAX_TOKEN_COUNT as INT4_MAX } from '../../src/domain/types.ts';
import { storableContent, storableCost, storableText, storableUsage, storableValue } from '../../src/core/storable.ts';
import { response, usage } from '../support/scripted-llm.ts';
import type { ContentBlock } from '../../src/domain/types.ts';
import { elementsCapacity } from '../support/heap-snapshot.ts';

describe('storable text', () => {
  it('replaces U+0000 and lone surrogates with U+FFFD, and keeps surrogate pairs', () => {
    expect(storableText('a\u0000b')).toBe('a\uFFFDb');
    expect(storableText('\ud800x\udc00')).toBe('\uFFFDx\uFFFD');
    expect(storableText('emoji 😀 and \ud83d')).toBe('emoji 😀 and \uFFFD');
    expect(storableText('\udc00\ud800')).toBe('\uFFFD\uFFFD'); // a pair in the wrong order is two lone halves
  });

  it('returns the very same string when there is nothing to replace', () => {
    const s = 'plain ünïcödé 😀';
    expect(storableText(s)).toBe(s);
  });

  it('cleans every string of a value, object keys included, and keeps unchanged parts by reference', () => {
    const untouched = { n: 1, ok: true, list: ['x'] };
    const v = { text: 'a\u0000', 'k\u0000ey': 1, nested: [{ deep: '\ud800' }], untouched, none: null };
    const clean = storableValue(v);
    expect(clean).toEqual({ text: 'a\uFFFD', 'k\uFFFDey': 1, nested: [{ deep: '\uFFFD' }], untouched, none: null });
    expect(clean.untouched).toBe(untouched);
    const same = { a: ['b', { c: 'd' }] };
    expect(storableValue(same)).toBe(same);
  });

  it('turns content that is not a list of blocks into no content, and drops what is not a block', () => {
    expect(storableContent(null)).toEqual([]);
    expect(storableContent('text')).toEqual([]);
    expect(storableContent([null, 'x', { text: 'no type' }, { type: 'text', text: 'ok' }])).toEqual([{ type: 'text', text: 'ok' }]);
    const blocks = [{ type: 'text', text: 'ok' }];
    expect(storableContent(blocks)).toBe(blocks);
  });
});

describe('storable counts', () => {
  it('clamps token counts to 0..2^31-1, rounding, and counts what is no number as 0', () => {
    expect(
      storableUsage({ inputTokens: -5, outputTokens: 2 ** 40, cacheCreationInputTokens: 1.6, cacheReadInputTokens: Number.NaN }),
    ).toEqual({
      inputTokens: 0,
      outputTokens: INT4_MAX,
      cacheCreationInputTokens: 2,
      cacheReadInputTokens: 0,
    });
    expect(
      storableUsage({ inputTokens: '7' as never, outputTokens: Infinity, cacheCreationInputTokens: 0, cacheReadInputTokens: 3 }),
    ).toEqual({
      inputTokens: 0,
      outputTokens: 0,
      cacheCreationInputTokens: 0,
      cacheReadInputTokens: 3,
    });
  });

  it('keeps a cost finite, non-negative and within numeric(18, 8)', () => {
    expect(storableCost(0.25)).toBe(0.25);
    expect(storableCost(-1)).toBe(0);
    expect(storableCost(Number.NaN)).toBe(0);
    expect(storableCost(1e30)).toBeLessThan(1e10);
  });
});

describe('acceptReply', () => {
  it("adds the failed attempts' usage to the reply's own and says what it cleaned", () => {
    const reply = {
      ...response([{ type: 'text', text: 'x\u0000' }], 'end_turn', usage(10, -1)),
      failedAttemptsUsage: usage(5, 5),
      attempts: 2,
    };
    const { response: kept, warnings } = acceptReply(reply);
    expect(kept.content).toEqual([{ type: 'text', text: 'x\uFFFD' }]);
    expect(kept.usage).toEqual(usage(15, 5));
    expect(kept.attempts).toBe(2);
    expect(warnings.map((w) => w.warning)).toEqual(['unstorable-text-replaced', 'usage-out-of-range']);
  });

  it('keeps the blocks in an array of exactly their number: the conversation holds it for the rest of the run', async () => {
    // As the providers' parsers leave them: grown by push (or made by filter), with room for 16 more.
    const content: ContentBlock[] = [];
    content.push({ type: 'text', text: 'looking' }, { type: 'tool_use', id: 'tu_1', name: 'lookup', input: {} });
    expect(await elementsCapacity(content)).toBeGreaterThan(2);
    const { response: kept } = acceptReply(response(content, 'tool_use', usage(10, 1)));
    expect(kept.content).toEqual(content);
    expect(await elementsCapacity(kept.content)).toBe(2);
  });

  it('passes a clean reply through with no warning', () => {
    const reply = response([{ type: 'text', text: 'fine' }], 'end_turn', usage(10, 1));
    const { response: kept, warnings } = acceptReply(reply);
    expect(kept).toEqual(reply);
    expect(warnings).toEqual([]);
  });
});
