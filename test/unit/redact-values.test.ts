/**
 * Redaction works on string values, never on serialised text: a pattern that runs "to the end of the
 * text" (a private key without its END line) ends with its string, so a log line stays one JSON
 * object and a stored JSON text keeps its shape.
 */
import { describe, expect, it } from 'vitest';
import { createLogger } from '../../src/observability/logger.ts';
import { DEFAULT_REDACT_PATTERNS, noRedaction, redactText, redactValue, redactor } from '../../src/core/redact.ts';

const redact = redactor(DEFAULT_REDACT_PATTERNS);
const UNTERMINATED = '-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASC';
const AWS = 'AKIAIOSFODNN7EXAMPLE';

function capture(opts: Parameters<typeof createLogger>[0] = {}) {
  const chunks: string[] = [];
  const logger = createLogger({ level: 'info', ...opts, destination: { write: (s: string) => void chunks.push(s) } });
  return { logger, output: () => chunks.join('') };
}

const records = (output: string) =>
  output
    .split('\n')
    .filter((l) => l.length > 0)
    .map((l) => JSON.parse(l) as Record<string, unknown>);

describe('a log line', () => {
  it('logging an error that quotes an unterminated private key: one JSON object with its other fields, the next record on its own line', () => {
    const { logger, output } = capture({ redact: redact });
    logger.error({ run_id: 'run-1', worker: 'w-1', err: new Error(`the model said: ${UNTERMINATED}`) }, 'model call failed');
    logger.info({ run_id: 'run-2', worker: 'w-2' }, 'step finished');

    const text = output();
    expect(text.split('\n').filter(Boolean)).toHaveLength(2);
    const [failed, next] = records(text);
    expect(failed).toMatchObject({
      level: 50,
      run_id: 'run-1',
      worker: 'w-1',
      msg: 'model call failed',
      err: { type: 'Error', message: 'the model said: [redacted]' },
    });
    expect(typeof failed!.time).toBe('number');
    expect(next).toMatchObject({ level: 30, run_id: 'run-2', worker: 'w-2', msg: 'step finished' });
    expect(text).not.toContain('MIIEvQ');
  });

  it('the built-in scrub (no REDACT) works on values too, and a line without a secret is written as pino wrote it', () => {
    const { logger, output } = capture();
    logger.warn({ header: 'Bearer abcdefgh12345678', n: 1, note: `key sk-${'a1'.repeat(12)} and dak_${'b2'.repeat(12)}` }, 'odd header');
    logger.info({ n: 2, text: 'nothing to see' }, 'plain');
    const [odd, plain] = records(output());
    expect(odd).toMatchObject({ header: '[redacted]', n: 1, note: 'key [redacted] and [redacted]', msg: 'odd header' });
    expect(plain).toMatchObject({ n: 2, text: 'nothing to see', msg: 'plain' });
    // Byte for byte: the fields in pino's order and spacing.
    expect(output().split('\n')[1]).toMatch(/^\{"level":30,"time":\d+,"n":2,"text":"nothing to see","msg":"plain"\}$/);
  });
});

describe('redactValue', () => {
  it('redacts every string inside a value, keys left alone, the same reference when nothing matched', () => {
    const clean = { a: 'x', b: [1, 'y', { c: null }], d: true };
    expect(redactValue(clean, redact)).toBe(clean);
    const dirty = { a: 'x', b: [1, `key ${AWS}`, { c: UNTERMINATED }], [AWS]: 'k' };
    const out = redactValue(dirty, redact);
    expect(out).toEqual({ a: 'x', b: [1, 'key [redacted]', { c: '[redacted]' }], [AWS]: 'k' });
    // The caller's value is not changed.
    expect(dirty.b[1]).toBe(`key ${AWS}`);
  });

  it('an own "__proto__" key (as JSON.parse makes one) is redacted as a field, not taken for the prototype', () => {
    const parsed = JSON.parse(`{"__proto__": "${AWS}", "x": 1}`) as Record<string, unknown>;
    const out = redactValue(parsed, redact);
    expect(JSON.stringify(out)).toBe('{"__proto__":"[redacted]","x":1}');
  });
});

describe('redactText', () => {
  it('JSON text keeps its shape; without a match it is returned byte for byte; other text is one string', () => {
    expect(JSON.parse(redactText(JSON.stringify({ k: UNTERMINATED, host: 'db', port: 5432 }), redact))).toEqual({
      k: '[redacted]',
      host: 'db',
      port: 5432,
    });
    const pretty = '[\n  { "host": "db" }\n]';
    expect(redactText(pretty, redact)).toBe(pretty);
    expect(redactText(`id=${AWS}\n${UNTERMINATED}`, redact)).toBe('id=[redacted]\n[redacted]');
    // Text that only looks like JSON is redacted as text.
    expect(redactText(`{ not json ${AWS}`, redact)).toBe('{ not json [redacted]');
    expect(redactText(`{"k":"${AWS}"}`, noRedaction)).toBe(`{"k":"${AWS}"}`);
  });
});
