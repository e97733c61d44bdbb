import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config/environment.ts';
import { ConfigError, EncryptionError } from '../../src/domain/errors.ts';
import { parseEncryptionKeys } from '../../src/config/encryption-keys.ts';
import { NO_ENCRYPTION, Sealer } from '../../src/store/encryption.ts';
import { openBlocks, openEventText, sealBlocks, sealEventData, sealToolCalls } from '../../src/store/sealed-columns.ts';

const key = () => randomBytes(32).toString('base64');

describe('encryption keys', () => {
  it('derives a stable id for ENCRYPTION_KEY and keeps the order of ENCRYPTION_KEYS (the first seals)', () => {
    const k = key();
    expect(parseEncryptionKeys(k, undefined)![0]!.id).toBe(parseEncryptionKeys(k, undefined)![0]!.id);
    const [a, b] = parseEncryptionKeys(undefined, `new:${key()}, old:${key()}`)!;
    expect([a!.id, b!.id]).toEqual(['new', 'old']);
    expect(new Sealer([a!, b!]).keyId).toBe('new');
  });

  it('refuses bad keys with a message that never quotes them', () => {
    const short = randomBytes(16).toString('base64');
    for (const [env, needle] of [
      [{ ENCRYPTION_KEY: short }, 'ENCRYPTION_KEY must be 32 bytes in base64'],
      [{ ENCRYPTION_KEYS: `a:${key()},a:${key()}` }, 'each id may appear once'],
      [{ ENCRYPTION_KEYS: short }, 'must be id:key'],
      [{ ENCRYPTION_KEY: key(), ENCRYPTION_KEYS: `a:${key()}` }, 'not both'],
    ] as const) {
      let thrown: unknown;
      try {
        loadConfig(env);
      } catch (e) {
        thrown = e;
      }
      expect(thrown).toBeInstanceOf(ConfigError);
      expect((thrown as Error).message).toContain(needle);
      expect((thrown as Error).message).not.toContain(short);
    }
  });
});

describe('Sealer', () => {
  const [k1, k2] = parseEncryptionKeys(undefined, `k1:${key()},k2:${key()}`)!;
  const sealer = new Sealer([k1!]);

  it('seals texts and JSON values so that they open to what was sealed, and never the same way twice', () => {
    const secret = 'the marker ünïcödé 🙂';
    const sealed = sealer.text(secret);
    expect(sealed).not.toContain('marker');
    expect(sealed).toMatch(/^da\.enc:1:t:k1:/);
    expect(sealer.text(secret)).not.toBe(sealed);
    expect(sealer.openText(sealed)).toBe(secret);
    const value = { a: [1, 'two', { three: null }] };
    expect(sealer.open(sealer.json(value))).toEqual(value);
    expect(sealer.openText('plain, stored before encryption')).toBe('plain, stored before encryption');
  });

  it('opens with any key of its ring and refuses a value it has no key for, or one that was altered', () => {
    const sealedWithOld = new Sealer([k2!]).text('old value');
    expect(new Sealer([k1!, k2!]).openText(sealedWithOld)).toBe('old value');
    expect(() => sealer.openText(sealedWithOld)).toThrow(/key k2, which ENCRYPTION_KEYS does not have/);
    expect(() => NO_ENCRYPTION.openText(sealedWithOld)).toThrow(EncryptionError);
    const sealed = sealer.text('value');
    const body = Buffer.from(sealed.split(':').at(-1)!, 'base64url');
    body[body.length - 1]! ^= 1;
    expect(() => sealer.openText(`da.enc:1:t:k1:${body.toString('base64url')}`)).toThrow(/does not open/);
    // The form is authenticated: a text's envelope relabelled as JSON does not open.
    expect(() => sealer.open(sealed.replace(':t:', ':j:'))).toThrow(/does not open/);
  });

  it('leaves what SQL reads plain: block types and ids, event seq and attempt, tool call ids', () => {
    const blocks = sealBlocks(sealer, [
      { type: 'text', text: 'marker text' },
      { type: 'tool_use', id: 'toolu_1', name: 'lookup', input: { q: 'marker input' } },
    ]);
    expect(JSON.stringify(blocks)).not.toContain('marker');
    expect(blocks.map((b) => [b.type, 'id' in b ? b.id : null])).toEqual([
      ['text', null],
      ['tool_use', 'toolu_1'],
    ]);
    expect(openBlocks(sealer, blocks)).toEqual([
      { type: 'text', text: 'marker text' },
      { type: 'tool_use', id: 'toolu_1', name: 'lookup', input: { q: 'marker input' } },
    ]);
    const data = sealEventData(sealer, { seq: 3, attempt: 2, text: 'marker delta' });
    expect(data).toMatchObject({ seq: 3, attempt: 2 });
    expect(JSON.stringify(data)).not.toContain('marker');
    const calls = sealToolCalls(sealer, [{ toolUseId: 'toolu_2', toolName: 'refund', input: { amount: 'marker' } }]);
    expect(calls[0]).toMatchObject({ toolUseId: 'toolu_2', toolName: 'refund' });
    expect(openEventText(sealer, JSON.stringify({ kind: 'approval', toolCalls: calls }))).toBe(
      JSON.stringify({ kind: 'approval', toolCalls: [{ toolUseId: 'toolu_2', toolName: 'refund', input: { amount: 'marker' } }] }),
    );
  });

  it('reseals for a rotation: envelopes of the new key kept, older ones and plain values sealed with it', () => {
    const both = new Sealer([k2!, k1!]);
    const current = both.text('current');
    expect(both.resealing.text(current)).toBe(current);
    const old = sealer.text('old');
    const resealed = both.resealing.text(old);
    expect(resealed).toMatch(/^da\.enc:1:t:k2:/);
    expect(both.openText(resealed)).toBe('old');
    expect(both.open(both.resealing.json(sealer.json({ n: 1 })))).toEqual({ n: 1 });
    expect(both.openText(both.resealing.text('plain'))).toBe('plain');
  });
  it('stores a plain value that starts like a sealed one behind an escape, and reads it back as it was', () => {
    for (const plain of ['da.enc:1:t:k1:AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA', 'da.raw:x', 'da.enc:', 'da.other']) {
      const stored = NO_ENCRYPTION.text(plain);
      expect(stored === plain).toBe(plain === 'da.other');
      expect(NO_ENCRYPTION.openText(stored)).toBe(plain);
      expect(sealer.openText(sealer.text(plain))).toBe(plain);
    }
    expect(NO_ENCRYPTION.text('an ordinary text')).toBe('an ordinary text');
    // Opening looks at payload positions only: a plain field that looks sealed is left alone.
    const block = { type: 'tool_use', id: 'da.enc:1:t:k9:AAAA', name: 'da.enc:1:t:k9:AAAA', input: {} };
    expect(openBlocks(NO_ENCRYPTION, sealBlocks(NO_ENCRYPTION, [block]))).toEqual([block]);
    const plainBlocks = [{ type: 'text', text: 'nothing to change' }];
    expect(sealBlocks(NO_ENCRYPTION, plainBlocks)).toBe(plainBlocks);
  });
});
