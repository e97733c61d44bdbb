/**
 * Importing the package loads only what every runtime needs: the OpenAI SDK, the HTTP server and the
 * MCP SDK are loaded when an agent, the API or an MCP tool uses them (each is tens of MB of a worker's
 * memory). A static import anywhere on the way (a helper in a module that also imports the SDK) undoes
 * that silently; this test is what notices.
 */
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { expect, it } from 'vitest';
import { assertBuilt } from '../support/cli-process.ts';

const run = promisify(execFile);

it('importing the package loads neither the OpenAI SDK, nor fastify, nor the MCP SDK', async () => {
  assertBuilt();
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'durable-agent-lazy-'));
  // A resolve hook that names every package a module is loaded from. The hooks run on a thread of their
  // own, whose process.stderr may not be flushed before the process exits, so it appends to a file.
  const hooks = path.join(dir, 'hooks.mjs');
  const loaded = path.join(dir, 'packages.txt');
  fs.writeFileSync(
    hooks,
    `import { appendFileSync } from 'node:fs';
export async function resolve(specifier, context, next) {
  const r = await next(specifier, context);
  const m = /node_modules\\/((@[^/]+\\/)?[^/]+)/.exec(r.url);
  if (m) appendFileSync(${JSON.stringify(loaded)}, 'PACKAGE ' + m[1] + '\\n');
  return r;
}\n`,
  );
  const register = path.join(dir, 'register.mjs');
  fs.writeFileSync(register, `import { register } from 'node:module';\nregister(${JSON.stringify(`file://${hooks}`)});\n`);
  await run(process.execPath, [
    '--import',
    register,
    '--input-type=module',
    '-e',
    `await import(${JSON.stringify(path.resolve('dist/index.js'))})`,
  ]);
  const packages = new Set(
    fs
      .readFileSync(loaded, 'utf8')
      .split('\n')
      .filter((l) => l.startsWith('PACKAGE '))
      .map((l) => l.slice('PACKAGE '.length)),
  );
  expect(packages.has('pg')).toBe(true);
  expect([...packages].filter((p) => ['openai', 'fastify', '@modelcontextprotocol/sdk', '@anthropic-ai/sdk'].includes(p))).toEqual([]);
  fs.rmSync(dir, { recursive: true, force: true });
});
