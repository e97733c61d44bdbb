/**
 * The documentation cannot drift: the generated pages equal what `npm run docs` writes now, and every
 * relative link of README.md, CHANGELOG.md and docs/*.md reaches a file (and, into a page, a heading).
 */
import fs from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { DOCS_DIR, generatedDocs } from '../../scripts/docs.ts';

const ROOT = path.resolve(DOCS_DIR, '..');

describe('generated docs', () => {
  it('docs/configuration.md and docs/api.md are what `npm run docs` generates from the code', async () => {
    for (const [file, text] of Object.entries(await generatedDocs())) {
      const committed = fs.existsSync(path.join(DOCS_DIR, file)) ? fs.readFileSync(path.join(DOCS_DIR, file), 'utf8') : '';
      expect(committed, `docs/${file} is out of date: run npm run docs`).toBe(text);
    }
  });

  it('lists every environment variable and every route', async () => {
    const docs = await generatedDocs();
    for (const name of ['DATABASE_URL', 'LLM_STREAMING', 'REDACT', 'DURABLE_AGENT_URL'])
      expect(docs['configuration.md']).toContain(`| \`${name}\` |`);
    expect(docs['configuration.md']).toContain(
      '| `PRICES_FILE` | USD per million tokens per model: `input`, `output`, `cacheWrite`, `cacheRead` | `prices.json` |',
    );
    for (const route of [
      'POST `/api/runs`',
      'GET `/api/runs/{id}/events`',
      'POST `/api/runs/{id}/tool-calls/{toolUseId}/decision`',
      'GET `/openapi.json`',
    ]) {
      expect(docs['api.md']).toContain(`## ${route}`);
    }
  });
});

/** GitHub's anchor for a heading: lower case, punctuation dropped, spaces to dashes, repeats numbered. */
function anchorsOf(markdown: string): Set<string> {
  const anchors = new Set<string>();
  const seen = new Map<string, number>();
  for (const line of withoutFences(markdown).split('\n')) {
    const heading = /^#{1,6}\s+(.*?)\s*#*\s*$/.exec(line)?.[1];
    if (heading === undefined) continue;
    const base = heading
      .replace(/\[([^\]]*)\]\([^)]*\)/g, '$1')
      .toLowerCase()
      .replace(/[^\p{L}\p{N}\s_-]/gu, '')
      .replace(/\s/g, '-');
    const n = seen.get(base) ?? 0;
    seen.set(base, n + 1);
    anchors.add(n === 0 ? base : `${base}-${n}`);
  }
  return anchors;
}

function withoutFences(markdown: string): string {
  return markdown.replace(/^(```|~~~)[\s\S]*?^\1/gm, '');
}

/** Fenced blocks and inline code hold examples, not links. */
function withoutCode(markdown: string): string {
  return withoutFences(markdown).replace(/`[^`\n]*`/g, '');
}

function pages(): string[] {
  const docs = fs
    .readdirSync(DOCS_DIR)
    .filter((f) => f.endsWith('.md'))
    .map((f) => path.join(DOCS_DIR, f));
  return [path.join(ROOT, 'README.md'), path.join(ROOT, 'CHANGELOG.md'), ...docs].filter((f) => fs.existsSync(f));
}

describe('links', () => {
  it('every relative link in README.md, CHANGELOG.md and docs/*.md resolves to a file, and its #anchor to a heading', () => {
    const broken: string[] = [];
    for (const page of pages()) {
      const text = fs.readFileSync(page, 'utf8');
      for (const [, target] of withoutCode(text).matchAll(/!?\[[^\]]*\]\(([^)\s]+)(?:\s+"[^"]*")?\)/g)) {
        if (/^[a-z][a-z0-9+.-]*:/i.test(target!)) continue;
        const [file, anchor] = target!.split('#') as [string, string | undefined];
        const resolved = file === '' ? page : path.resolve(path.dirname(page), decodeURI(file));
        const where = `${path.relative(ROOT, page)}: ${target}`;
        if (!fs.existsSync(resolved)) {
          broken.push(`${where} (no such file)`);
        } else if (anchor && resolved.endsWith('.md') && !anchorsOf(fs.readFileSync(resolved, 'utf8')).has(anchor)) {
          broken.push(`${where} (no such heading)`);
        }
      }
    }
    expect(broken).toEqual([]);
  });

  it('reads headings and code as GitHub does', () => {
    expect(anchorsOf('# Tool calls in parallel\n## `ctx.log` and more\n## Tool calls in parallel')).toEqual(
      new Set(['tool-calls-in-parallel', 'ctxlog-and-more', 'tool-calls-in-parallel-1']),
    );
    expect(withoutCode('see [a](b.md)\n```\n[c](d.md)\n```\n`[e](f.md)`')).not.toMatch(/d\.md|f\.md/);
  });
});
