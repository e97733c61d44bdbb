/**
 * `durable-agent/client` is for browsers: every module its entry loads, followed through the imports
 * that stay at run time (`import type` vanishes at build), must import only other modules of src/:
 * no `node:` module, no Node built-in by its bare name, no package (pg, fastify, zod …).
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import ts from 'typescript';
import { describe, expect, it } from 'vitest';

const ENTRY = path.resolve('src/client/index.ts');

/** The specifiers a module loads at run time (type-only imports and re-exports left out). */
function runtimeImports(file: string): string[] {
  const source = ts.createSourceFile(file, fs.readFileSync(file, 'utf8'), ts.ScriptTarget.Latest, false, ts.ScriptKind.TS);
  const found: string[] = [];
  const visit = (node: ts.Node): void => {
    if (ts.isImportDeclaration(node) && !node.importClause?.isTypeOnly) found.push((node.moduleSpecifier as ts.StringLiteral).text);
    else if (ts.isExportDeclaration(node) && node.moduleSpecifier && !node.isTypeOnly)
      found.push((node.moduleSpecifier as ts.StringLiteral).text);
    else if (ts.isImportEqualsDeclaration(node) && !node.isTypeOnly && ts.isExternalModuleReference(node.moduleReference)) {
      found.push((node.moduleReference.expression as ts.StringLiteral).text);
    } else if (
      ts.isCallExpression(node) &&
      (node.expression.kind === ts.SyntaxKind.ImportKeyword || (ts.isIdentifier(node.expression) && node.expression.text === 'require'))
    ) {
      const [arg] = node.arguments;
      found.push(arg && ts.isStringLiteralLike(arg) ? arg.text : '(a computed specifier)');
    }
    ts.forEachChild(node, visit);
  };
  visit(source);
  return found;
}

/** Each module reachable from `entry` with the chain of modules that led to it; and each import that leaves src/. */
function moduleGraph(entry: string): { modules: string[]; outside: string[] } {
  const seen = new Map<string, string[]>([[entry, [entry]]]);
  const queue = [entry];
  const outside: string[] = [];
  const name = (file: string) => path.relative(path.resolve('.'), file);
  while (queue.length > 0) {
    const file = queue.shift()!;
    const chain = seen.get(file)!;
    for (const specifier of runtimeImports(file)) {
      if (!specifier.startsWith('.')) {
        outside.push(`${specifier} (${chain.map(name).join(' → ')})`);
        continue;
      }
      const target = path.resolve(path.dirname(file), specifier);
      if (!seen.has(target)) {
        seen.set(target, [...chain, target]);
        queue.push(target);
      }
    }
  }
  return { modules: [...seen.keys()].map(name).sort(), outside };
}

describe('the client entry', () => {
  it('loads no Node module and no package, at any depth: it can be bundled for a browser', () => {
    const { modules, outside } = moduleGraph(ENTRY);
    expect(modules).toEqual(
      expect.arrayContaining(['src/client/index.ts', 'src/client/client.ts', 'src/events/follow.ts', 'src/events/protocol.ts']),
    );
    expect(outside).toEqual([]);
  });

  it('would see a Node import deep in the graph, a bare built-in and a package (the check checks)', () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'client-graph-'));
    try {
      fs.writeFileSync(path.join(dir, 'entry.ts'), "import type { Pool } from 'pg';\nexport { a } from './a.ts';\n");
      fs.writeFileSync(path.join(dir, 'a.ts'), "import { b } from './b.ts';\nexport const a = b;\n");
      fs.writeFileSync(
        path.join(dir, 'b.ts'),
        "import fs from 'node:fs';\nimport { type X } from 'fastify';\nexport const b = () => import('crypto');\n",
      );
      const { outside } = moduleGraph(path.join(dir, 'entry.ts'));
      expect(outside.map((o) => o.split(' ')[0])).toEqual(['node:fs', 'fastify', 'crypto']);
      expect(outside[0]).toMatch(/entry\.ts → .*a\.ts → .*b\.ts\)$/);
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
});
