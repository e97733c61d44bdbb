/**
 * Redaction of what comes into a run from outside the model: secrets in a run's input and metadata,
 * in tool results, in people's decisions and in error texts are replaced by `[redacted]` before they
 * are stored, and every string value of a log record passes through the same patterns. Model output
 * is never redacted: a stored assistant turn goes back to the model as it came. Pure: patterns in,
 * functions out.
 *
 * Patterns apply to string values, never to serialised text: a pattern that runs "to the end of the
 * text" then ends with its string, and JSON stays JSON (a cut in serialised text would drop the
 * closing quote and braces, and everything after them).
 *
 * The default patterns cover the shapes of common secrets; REDACT adds patterns of your own (regular
 * expressions, JavaScript syntax), and `REDACT=off` turns redaction off. A pattern should match the
 * secret alone: everything it matches is replaced.
 */

export interface RedactPattern {
  /** What the pattern finds, for the README and for error messages. */
  name: string;
  /** A JavaScript regular expression, without delimiters or flags. */
  source: string;
  /**
   * Texts of which every match holds at least one, compared as they are (case counts): a text that
   * holds none is not scanned. Finding a few letters is many times cheaper than running a regular
   * expression over the text (most of all one that begins with a lookbehind, tried at every position),
   * and nearly every text redacted, every log line among them, holds no secret. A list that misses a
   * form the pattern matches lets that form through unredacted: the unit tests try each default
   * pattern's every form without its texts.
   */
  contains?: readonly string[];
}

/** The default list (README, Operating). Each is applied on its own, in this order. */
export const DEFAULT_REDACT_PATTERNS: readonly RedactPattern[] = [
  { name: 'Anthropic API key (sk-ant-…)', source: String.raw`sk-ant-[A-Za-z0-9_-]{16,}`, contains: ['sk-ant-'] },
  { name: 'OpenAI-style secret key (sk-…, sk-proj-…)', source: String.raw`\bsk-[A-Za-z0-9_-]{20,}`, contains: ['sk-'] },
  { name: 'AWS access key id (AKIA…, ASIA…)', source: String.raw`\b(?:AKIA|ASIA)[0-9A-Z]{16}\b`, contains: ['AKIA', 'ASIA'] },
  {
    name: 'GitHub token (ghp_…, gho_…, ghu_…, ghs_…, ghr_…)',
    source: String.raw`\bgh[pousr]_[A-Za-z0-9]{36,}`,
    contains: ['ghp_', 'gho_', 'ghu_', 'ghs_', 'ghr_'],
  },
  { name: 'GitHub fine-grained token (github_pat_…)', source: String.raw`\bgithub_pat_[A-Za-z0-9_]{22,}`, contains: ['github_pat_'] },
  {
    name: 'bearer token (the token after "Bearer")',
    source: String.raw`(?<=\b[Bb]earer\s+)[A-Za-z0-9._~+/=-]{8,}`,
    contains: ['Bearer', 'bearer'],
  },
  {
    name: 'private key block (-----BEGIN … PRIVATE KEY-----, to its END line or to the end of the text)',
    source: String.raw`-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----(?:[\s\S]*?-----END [A-Z0-9 ]*PRIVATE KEY-----|[\s\S]*$)`,
    contains: ['-----BEGIN '],
  },
  { name: 'durable-agent API key (dak_…)', source: String.raw`\bdak_[A-Za-z0-9_-]{43}`, contains: ['dak_'] },
];

export const REDACTED = '[redacted]';

export type Redact = (text: string) => string;

/** Leaves text as it is (REDACT=off). */
export const noRedaction: Redact = (text) => text;

/** Compiles patterns (a bad one throws a SyntaxError naming it) into one function that redacts text. */
export function redactor(patterns: readonly RedactPattern[]): Redact {
  const compiled = patterns.map((p) => {
    try {
      return { re: new RegExp(p.source, 'g'), contains: p.contains };
    } catch (e) {
      throw new SyntaxError(`${p.name}: ${(e as Error).message}`, { cause: e });
    }
  });
  if (compiled.length === 0) return noRedaction;
  return (text) => {
    let out = text;
    for (const { re, contains } of compiled) {
      if (contains && !holdsAny(out, contains)) continue;
      re.lastIndex = 0;
      out = out.replace(re, REDACTED);
    }
    return out;
  };
}

function holdsAny(text: string, parts: readonly string[]): boolean {
  for (const part of parts) if (text.includes(part)) return true;
  return false;
}

/**
 * Every string inside a JSON value redacted (object keys are names, not data: left alone). The same
 * reference when nothing matched, and nothing is copied until something does: most values hold no secret.
 */
export function redactValue<T>(v: T, redact: Redact): T {
  if (typeof v === 'string') return redact(v) as T;
  if (Array.isArray(v)) {
    let out: unknown[] | null = null;
    for (let i = 0; i < v.length; i++) {
      const item: unknown = v[i];
      const clean = redactValue(item, redact);
      if (clean !== item) (out ??= [...v])[i] = clean;
    }
    return (out ?? v) as T;
  }
  if (v !== null && typeof v === 'object') {
    const source = v as Record<string, unknown>;
    let out: Record<string, unknown> | null = null;
    for (const k in source) {
      if (!Object.hasOwn(source, k)) continue;
      const item = source[k];
      const clean = redactValue(item, redact);
      // Defined, not assigned: an own "__proto__" key (JSON.parse makes one) assigned would set the prototype.
      if (clean !== item)
        Object.defineProperty((out ??= { ...source }), k, { value: clean, writable: true, enumerable: true, configurable: true });
    }
    return (out ?? v) as T;
  }
  return v;
}

const JSON_CONTAINER = /^\s*[[{]/;

/**
 * A text that may be JSON (a tool result is text, and often JSON text) redacted as a value: a JSON
 * object or array has its string values redacted and is serialised again, only when something matched,
 * so a result without secrets is stored byte for byte; any other text is redacted as one string.
 * The patterns are tried on the text as it is first (as on a log line): a result with nothing to
 * redact, nearly every one, is not parsed. A secret only a JSON escape hides (`Bearer\t…`) is missed.
 */
export function redactText(text: string, redact: Redact): string {
  if (redact === noRedaction || redact(text) === text) return text;
  if (JSON_CONTAINER.test(text)) {
    let parsed: unknown;
    try {
      parsed = JSON.parse(text);
    } catch {
      return redact(text);
    }
    const clean = redactValue(parsed, redact);
    return clean === parsed ? text : JSON.stringify(clean);
  }
  return redact(text);
}

/** `redact` for texts that may be JSON (see redactText). */
export function textRedactor(redact: Redact): Redact {
  return redact === noRedaction ? noRedaction : (text) => redactText(text, redact);
}

/**
 * REDACT as configured: unset → the defaults; a JSON array of strings, or one pattern per line →
 * the defaults and those; `off` → nothing is redacted.
 */
export function parseRedactSetting(value: string | undefined): RedactPattern[] | null {
  if (value === undefined) return [...DEFAULT_REDACT_PATTERNS];
  if (value.trim() === 'off') return null;
  let sources: unknown;
  if (value.trim().startsWith('[')) {
    try {
      sources = JSON.parse(value);
    } catch {
      throw new SyntaxError('not a JSON array of strings');
    }
    if (!Array.isArray(sources) || !sources.every((s) => typeof s === 'string' && s.length > 0)) {
      throw new SyntaxError('not a JSON array of non-empty strings');
    }
  } else {
    sources = value
      .split('\n')
      .map((l) => l.trim())
      .filter((l) => l.length > 0);
  }
  const own = (sources as string[]).map((source, i) => ({ name: `pattern ${i + 1} (${source.slice(0, 40)})`, source }));
  // Compile now, so a bad pattern is a configuration error at start, not a failed write later.
  redactor(own);
  return [...DEFAULT_REDACT_PATTERNS, ...own];
}
