import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config/environment.ts';
import { DEFAULT_REDACT_PATTERNS, parseRedactSetting, redactor } from '../../src/core/redact.ts';
import { API_KEY_PATTERN } from '../../src/store/api-keys.ts';

const redact = redactor(DEFAULT_REDACT_PATTERNS);

// Fake secrets of each shape (none of them is real).
const SECRETS = {
  anthropic: 'sk-ant-api03-Xq9v2LmN4pR7sT1uW3yZ5aB8cD0eF2gH4iJ6kL8mN0pQ2rS4tU6vW8xY0zA2bC4dE6fG8hI0jK2lM4nO6pQ8rS-Tu0VwAA',
  openai: 'sk-proj-A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8S9t0',
  aws: 'AKIAIOSFODNN7EXAMPLE',
  github: 'ghp_1234567890abcdefghijABCDEFGHIJ123456',
  githubPat: 'github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyz0123456789ABCDEFGHIJKLMNOPQ',
  ours: `dak_${'Zz9-_'.repeat(8)}abc`,
};

describe('the default redaction patterns', () => {
  it.each(Object.entries(SECRETS))('%s: the secret is gone, the text around it stays', (_name, secret) => {
    const out = redact(`before ${secret} after`);
    expect(out).toBe('before [redacted] after');
  });

  it('bearer tokens keep the word Bearer; private key blocks go whole, even without their END line', () => {
    expect(redact('Authorization: Bearer abc.def-ghi_123')).toBe('Authorization: Bearer [redacted]');
    const block = '-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA\n-----END RSA PRIVATE KEY-----';
    expect(redact(`key:\n${block}\nend`)).toBe('key:\n[redacted]\nend');
    expect(redact('-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXk')).toBe('[redacted]');
  });

  it('leaves ordinary text alone', () => {
    const text = 'Ticket ACME-101 is overdue; ask the skeptic (sk-8) about AKIA or the gh_cli, bearer of bad news.';
    expect(redact(text)).toBe(text);
  });

  it("a pattern's `contains` texts are what it needs: each form of each secret, without them, is no match", () => {
    // Every form a default pattern has: each alternative of its prefix, and more than one way on after it.
    const forms = [
      ...Object.values(SECRETS),
      'sk-ant-admin01-AbCdEfGhIjKlMnOpQrStUv',
      'ASIAJEXAMPLEXEK7ZQ2B',
      'AKIA0123456789ABCDEF',
      ...['ghp', 'gho', 'ghu', 'ghs', 'ghr'].map((p) => `${p}_${'aB3'.repeat(12)}`),
      'Authorization: Bearer abc.def-ghi_123',
      'authorization: bearer abc.def-ghi_123',
      '-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkq',
      '-----BEGIN EC PRIVATE KEY-----\nMHcC',
      `dak_${'Q'.repeat(43)}`,
    ];
    for (const p of DEFAULT_REDACT_PATTERNS) {
      expect(p.contains, p.name).toBeDefined();
      const matched = forms.filter((t) => new RegExp(p.source).test(t));
      expect(matched.length, p.name).toBeGreaterThan(0);
      for (const t of matched) {
        // Each of its texts broken by a zero-width space: were any form to match without them, it would leak.
        const broken = p.contains!.reduce((text, c) => text.replaceAll(c, `${c[0]}\u200b${c.slice(1)}`), t);
        expect(new RegExp(p.source).test(broken), `${p.name}: ${broken}`).toBe(false);
      }
    }
  });

  it("a text holding none of a pattern's `contains` texts is left as it is, even where the pattern would match", () => {
    const hinted = redactor([{ name: 'a', source: 'secret-[0-9]+', contains: ['zzz'] }]);
    expect(hinted('secret-42')).toBe('secret-42');
    expect(hinted('zzz secret-42')).toBe('zzz [redacted]');
  });

  it("matches this project's own keys as they are issued", () => {
    expect(SECRETS.ours).toMatch(API_KEY_PATTERN);
  });
});

describe('REDACT', () => {
  it('unset: the defaults; patterns of your own are added (JSON array or one per line); off: none', () => {
    expect(loadConfig({}).redact).toEqual(DEFAULT_REDACT_PATTERNS);
    const json = loadConfig({ REDACT: '["ACME-\\\\d+", "secret-[a-z]+"]' }).redact!;
    expect(json.slice(DEFAULT_REDACT_PATTERNS.length).map((p) => p.source)).toEqual(['ACME-\\d+', 'secret-[a-z]+']);
    expect(redactor(json)(`ACME-101 and secret-sauce and ${SECRETS.aws}`)).toBe('[redacted] and [redacted] and [redacted]');
    const lines = loadConfig({ REDACT: 'ACME-\\d+\n  \ninternal\\.example\\.com\n' }).redact!;
    expect(lines.slice(DEFAULT_REDACT_PATTERNS.length).map((p) => p.source)).toEqual(['ACME-\\d+', 'internal\\.example\\.com']);
    expect(loadConfig({ REDACT: 'off' }).redact).toBeNull();
    expect(parseRedactSetting(undefined)).toEqual(DEFAULT_REDACT_PATTERNS);
  });

  it('a pattern that is not a regular expression is a configuration error naming it', () => {
    expect(() => loadConfig({ REDACT: 'ok\n(unclosed' })).toThrow(/^invalid configuration: REDACT: pattern 2 \(\(unclosed\): .*/);
    expect(() => loadConfig({ REDACT: '["a", 3]' })).toThrow('invalid configuration: REDACT: not a JSON array of non-empty strings');
  });
});
