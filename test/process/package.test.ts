/**
 * The package as a user gets it: `npm pack`, installed into an empty project, used from plain Node
 * ESM (no tsx, no sources) to run an agent with a zod tool on real PostgreSQL, and type-checked from
 * a strict TypeScript consumer with `nodenext` resolution.
 */
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { assertBuilt, cleanEnv } from '../support/cli-process.ts';
import { testDatabase, type TestDatabase } from '../support/db.ts';
import { type FakeAnthropic, startFakeAnthropic } from '../support/fake-anthropic.ts';

const run = promisify(execFile);
const REPO = path.resolve('.');
const TSC = path.join(REPO, 'node_modules/typescript/bin/tsc');

let project: string;
let packed: string[];
/** What npm printed on stderr while installing the tarball into the empty project. */
let installWarnings: string[];

beforeAll(async () => {
  assertBuilt();
  project = fs.mkdtempSync(path.join(os.tmpdir(), 'durable-agent-consumer-'));
  // The build is current (assertBuilt): pack it as it is rather than build it a second time.
  const { stdout } = await run('npm', ['pack', '--ignore-scripts', '--json', '--pack-destination', project], { cwd: REPO });
  const [info] = JSON.parse(stdout) as { filename: string; files: { path: string }[] }[];
  packed = info!.files.map((f) => f.path);
  fs.writeFileSync(path.join(project, 'package.json'), JSON.stringify({ name: 'consumer', private: true, type: 'module' }));
  // From the registry cache that `npm ci` filled; zod and @types/node as a user's project has them.
  // Without the optional binaries of the embedded server (60 MB to copy): this project has DATABASE_URL.
  const installed = await run(
    'npm',
    [
      'install',
      '--prefer-offline',
      '--no-audit',
      '--no-fund',
      '--omit=optional',
      `./${info!.filename}`,
      'zod@4.6.7',
      '@types/node@20.19.43',
    ],
    { cwd: project, timeout: 240_000 },
  );
  installWarnings = installed.stderr.split('\n').filter((line) => line.startsWith('npm warn'));
}, 300_000);

afterAll(() => {
  if (project) fs.rmSync(project, { recursive: true, force: true });
});

describe('the tarball', () => {
  it('holds the compiled code, its declarations, migrations, prices and the command; no tests, benchmarks or sources', () => {
    expect(packed).toEqual(
      expect.arrayContaining([
        'dist/index.js',
        'dist/index.d.ts',
        'dist/client/index.js',
        'dist/client/index.d.ts',
        'dist/internals.js',
        'dist/internals.d.ts',
        'dist/cli/main.js',
        'dist/db/migrations/0001_runs.sql',
        'bin/durable-agent.js',
        'prices.json',
        'README.md',
        'package.json',
      ]),
    );
    expect(packed.filter((p) => /^(test|bench|src|scripts)\//.test(p) || p.endsWith('.tsbuildinfo'))).toEqual([]);
    const installed = path.join(project, 'node_modules/durable-agent');
    expect(fs.existsSync(path.join(project, 'node_modules/tsx'))).toBe(false);
    // Declarations name .js files, which exist beside them.
    const declarations = fs.readFileSync(path.join(installed, 'dist/index.d.ts'), 'utf8');
    expect(declarations).toContain("from './runtime/create-runtime.js'");
    expect(declarations).not.toMatch(/from '\.[^']*\.ts'/);
    expect(fs.readFileSync(path.join(installed, 'dist/client/index.d.ts'), 'utf8')).not.toMatch(/from '\.[^']*\.ts'/);
  });

  it('ships a client entry whose compiled modules import nothing but each other (no Node module, no package)', () => {
    const dist = path.join(project, 'node_modules/durable-agent/dist');
    const entry = path.join(dist, 'client/index.js');
    const seen = new Set([entry]);
    const queue = [entry];
    const outside: string[] = [];
    const IMPORT = /\bfrom\s*['"]([^'"]+)['"]|\bimport\s*\(?\s*['"]([^'"]+)['"]/g;
    while (queue.length > 0) {
      const file = queue.shift()!;
      const code = fs
        .readFileSync(file, 'utf8')
        .replace(/\/\*[\s\S]*?\*\//g, '')
        .replace(/^\s*\/\/.*$/gm, '');
      for (const m of code.matchAll(IMPORT)) {
        const specifier = (m[1] ?? m[2])!;
        if (!specifier.startsWith('.')) {
          outside.push(`${specifier} in ${path.relative(dist, file)}`);
          continue;
        }
        const target = path.resolve(path.dirname(file), specifier);
        if (!seen.has(target)) {
          seen.add(target);
          queue.push(target);
        }
      }
    }
    expect([...seen].map((f) => path.relative(dist, f)).sort()).toEqual(
      expect.arrayContaining(['client/client.js', 'client/http.js', 'events/follow.js']),
    );
    expect(outside).toEqual([]);
  });

  it('installs without a warning: no install script of its own (it ships built), and the engines it declares', () => {
    const manifest = JSON.parse(fs.readFileSync(path.join(project, 'node_modules/durable-agent/package.json'), 'utf8')) as {
      scripts: Record<string, string>;
      engines: { node: string };
    };
    expect(Object.keys(manifest.scripts).filter((s) => /^(pre|post)?install$|^prepare$/.test(s))).toEqual([]);
    expect(manifest.engines).toEqual({ node: '>=22.13' });
    // On a Node older than the engines say, npm rightly warns about them; about nothing else.
    const tooOld = Number(process.versions.node.split('.')[0]) < 22;
    expect(installWarnings.filter((line) => !(tooOld && line.includes('EBADENGINE')))).toEqual([]);
  });

  it('installs the command, which finds the migrations it ships', async () => {
    const bin = path.join(project, 'node_modules/.bin/durable-agent');
    const { stdout } = await run(bin, ['--help'], { cwd: project });
    expect(stdout).toContain('Usage: durable-agent <command> [options]');

    // An empty database (not a clone of the suite's migrated template) gets every migration.
    const admin = new pg.Client({ connectionString: inject('adminUrl') });
    await admin.connect();
    const name = `${inject('dbPrefix')}_empty_${randomBytes(4).toString('hex')}`;
    await admin.query(`CREATE DATABASE ${pg.escapeIdentifier(name)}`);
    try {
      const url = new URL(inject('adminUrl'));
      url.pathname = `/${name}`;
      const migrated = await run(bin, ['migrate'], { cwd: project, env: cleanEnv({ DATABASE_URL: url.toString() }) });
      const shipped = packed
        .filter((p) => p.startsWith('dist/db/migrations/'))
        .map((p) => path.basename(p, '.sql'))
        .sort();
      expect(shipped.length).toBeGreaterThan(0);
      expect(migrated.stdout).toMatch(new RegExp(`^applied ${shipped.join(', ')} to `));
    } finally {
      await admin.query(`DROP DATABASE IF EXISTS ${pg.escapeIdentifier(name)} WITH (FORCE)`);
      await admin.end();
    }
  });
});

describe('a plain ESM program using the installed package', () => {
  let db: TestDatabase;
  let fake: FakeAnthropic;
  beforeAll(async () => {
    db = await testDatabase();
    fake = await startFakeAnthropic({ apiKey: 'sk-ant-test-package-0000' });
  });
  afterAll(async () => {
    await fake?.close();
    await db?.close();
  });

  it('runs agents by name, one with a zod tool, to the end, durably, on PostgreSQL', async () => {
    fake.toolUse('toolu_pkg_1', 'get_weather', { city: 'Paris' }).text('Take an umbrella.').text('Filed.');
    fs.writeFileSync(
      path.join(project, 'weather.mjs'),
      `import { z } from 'zod';
import { createRuntime, defineAgent, tool } from 'durable-agent';
import { createClient, foldEvents, RUN_EVENT_TYPES } from 'durable-agent/client';
import * as internals from 'durable-agent/internals';
import * as root from 'durable-agent';

const calls = [];
const weather = tool({
  name: 'get_weather',
  description: 'The forecast for a city.',
  input: z.object({ city: z.string(), days: z.number().int().default(1) }),
  execute: async ({ city, days }, { idempotencyKey }) => {
    calls.push({ city, days, idempotencyKey });
    return city + ': rain';
  },
});
const helper = defineAgent({ name: 'helper', system: 'You answer in one sentence.', tools: [weather] });
const clerk = defineAgent({ name: 'clerk', system: 'You file things.', tools: [] });

const rt = await createRuntime({ agents: [helper, clerk], api: { port: 0 } });
const health = (await fetch(rt.url + '/healthz')).status;
const run = await rt.runs.create({ input: 'Do I need an umbrella in Paris?' });
const done = await rt.runs.wait(run.id, { timeoutMs: 60000 });
const filed = await rt.runs.wait((await rt.runs.create({ input: 'File it.', agent: 'clerk' })).id, { timeoutMs: 60000 });
const api = createClient({ baseUrl: rt.url });
const seen = [];
for await (const e of api.runs.events(run.id)) seen.push(e);
const client = {
  status: (await api.runs.get(run.id)).status,
  steps: (await api.runs.timeline(run.id)).map((s) => s.kind),
  folded: foldEvents(seen).finished.output,
  types: RUN_EVENT_TYPES.length > 0,
};
const wiring = ['startRuntime', 'loadConfig', 'RunStore', 'Worker', 'livenessSession'];
const parts = { internals: wiring.filter((name) => typeof internals[name] === 'function'), root: wiring.filter((name) => name in root) };
await rt.close();
console.log('RESULT ' + JSON.stringify({ status: done.status, agent: done.agent, output: done.output, calls, health, filed: [filed.status, filed.agent, filed.output], client, parts }));
`,
    );
    const env = cleanEnv({
      DATABASE_URL: db.url,
      ANTHROPIC_API_KEY: 'sk-ant-test-package-0000',
      ANTHROPIC_BASE_URL: fake.url,
      LOG_LEVEL: 'warn',
    });
    const { stdout } = await run(process.execPath, ['weather.mjs'], { cwd: project, env, timeout: 90_000 });
    const result = JSON.parse(/^RESULT (.*)$/m.exec(stdout)![1]!);
    expect(result).toEqual({
      status: 'SUCCEEDED',
      agent: 'helper',
      output: 'Take an umbrella.',
      calls: [{ city: 'Paris', days: 1, idempotencyKey: 'toolu_pkg_1' }],
      health: 200,
      filed: ['SUCCEEDED', 'clerk', 'Filed.'],
      // The same run through durable-agent/client; the wiring parts from durable-agent/internals only.
      client: { status: 'SUCCEEDED', steps: ['MODEL', 'TOOL', 'MODEL'], folded: 'Take an umbrella.', types: true },
      parts: { internals: ['startRuntime', 'loadConfig', 'RunStore', 'Worker', 'livenessSession'], root: [] },
    });
    expect(JSON.stringify(fake.requests[2]!.body.system)).toContain('You file things.');
    expect(fake.requests[0]!.body.tools).toEqual([
      expect.objectContaining({
        name: 'get_weather',
        input_schema: {
          type: 'object',
          properties: {
            city: { type: 'string' },
            days: { type: 'integer', default: 1, minimum: expect.any(Number), maximum: expect.any(Number) },
          },
          required: ['city'],
        },
      }),
    ]);
    expect(JSON.stringify(fake.requests[1]!.body.messages)).toContain('"tool_use_id":"toolu_pkg_1","content":"Paris: rain"');
    // Every step is in the database: two model calls and the tool call.
    const { rows } = await db.pool.query<{ kind: string; status: string }>(
      `SELECT kind, status FROM durable_agent.run_step WHERE run_id = (SELECT id FROM durable_agent.run WHERE agent = 'helper') ORDER BY seq`,
    );
    expect(rows).toEqual([
      { kind: 'MODEL', status: 'DONE' },
      { kind: 'TOOL', status: 'DONE' },
      { kind: 'MODEL', status: 'DONE' },
    ]);
  });
});

describe("the README's example", () => {
  let db: TestDatabase;
  let fake: FakeAnthropic;
  beforeAll(async () => {
    db = await testDatabase();
    fake = await startFakeAnthropic({ apiKey: 'sk-ant-test-readme-0000' });
  });
  afterAll(async () => {
    await fake?.close();
    await db?.close();
  });

  it('runs as written in a project that installed the tarball', async () => {
    const readme = fs.readFileSync(path.join(REPO, 'README.md'), 'utf8');
    const example = /```js\n(\/\/ agent\.mjs\n[\s\S]*?)```/.exec(readme)?.[1];
    expect(example, 'README.md has a js block starting with "// agent.mjs"').toBeDefined();
    fs.writeFileSync(path.join(project, 'agent.mjs'), example!);
    fake.toolUse('toolu_readme_1', 'get_forecast', { city: 'Paris' }).text('Yes: rain all afternoon.');
    const env = cleanEnv({
      DATABASE_URL: db.url,
      ANTHROPIC_API_KEY: 'sk-ant-test-readme-0000',
      ANTHROPIC_BASE_URL: fake.url,
      PORT: '0',
      LOG_LEVEL: 'warn',
    });
    const { stdout } = await run(process.execPath, ['agent.mjs'], { cwd: project, env, timeout: 90_000 });
    expect(stdout).toMatch(/^SUCCEEDED Yes: rain all afternoon\. http:\/\/[^ ]+:\d+\/api\/runs\/[0-9a-f-]{36}\/timeline$/m);
    expect(JSON.stringify(fake.requests[1]!.body.messages)).toContain('rain all afternoon');
  });
});

describe('a TypeScript consumer', () => {
  it('type-checks against the installed declarations (strict, nodenext): tools from zod and JSON Schema, the client, the internals', async () => {
    fs.writeFileSync(
      path.join(project, 'tsconfig.json'),
      JSON.stringify({
        compilerOptions: {
          strict: true,
          module: 'nodenext',
          moduleResolution: 'nodenext',
          target: 'es2022',
          noEmit: true,
          types: ['node'],
        },
        include: ['consumer.ts'],
      }),
    );
    fs.writeFileSync(
      path.join(project, 'consumer.ts'),
      `import { z } from 'zod';
import { createRuntime, defineAgent, defineTool, tool, InputError, WaitTimeoutError, type Run, type RuntimeEvent } from 'durable-agent';
import { ApiError, createClient, foldEvents, type RunDetail, type RunEvent, type TimelineStep, type UnknownRunEvent } from 'durable-agent/client';
import { loadConfig, startRuntime, RunStore, Worker, livenessSession, type Config, type Runtime } from 'durable-agent/internals';
// @ts-expect-error the wiring parts are not on the public path
import { startRuntime as fromRoot } from 'durable-agent';

const weather = tool({
  name: 'get_weather',
  description: 'The forecast for a city.',
  input: z.object({ city: z.string(), days: z.number().int().default(1) }),
  execute: async ({ city, days }, ctx) => {
    ctx.log.info({ city }, 'forecast asked');
    return \`\${city.toUpperCase()} \${days.toFixed(0)} \${ctx.idempotencyKey} \${ctx.runId}\`;
  },
  needsApproval: ({ city }) => city === 'Paris',
});
// @ts-expect-error execute gets the parsed input: city is a string
tool({ name: 'bad', description: 'x', input: z.object({ city: z.string() }), execute: async ({ city }) => city.toFixed() });
const clock = defineTool({ name: 'now', description: 'The time.', inputSchema: { type: 'object' }, execute: async () => new Date().toISOString() });
// A JSON Schema: the input is what the caller says it is, or unknown.
const forecast = tool<{ city: string }>({
  name: 'get_forecast',
  description: 'The forecast.',
  inputSchema: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] },
  execute: async ({ city }) => city.toUpperCase(),
  needsApproval: ({ city }) => city === 'Paris',
});
// @ts-expect-error without a type argument the input is unknown
tool({ name: 'raw', description: 'x', inputSchema: { type: 'object' }, execute: async (input) => input.city });

const helper = defineAgent({ name: 'helper', system: 'Be brief.', tools: [weather, clock, forecast], maxTokens: 512, version: '1' });
// Tools from MCP servers only: no tools of its own.
const desk = defineAgent({ name: 'desk', system: 'You run the desk.', mcpServers: [{ name: 'files', command: 'node', args: ['files.js'] }] });
const seen: RuntimeEvent['type'][] = [];
const rt = await createRuntime({ agents: [helper, desk], api: { port: 0 }, worker: true, onEvent: (e) => seen.push(e.type) });
const run: Run = await rt.runs.create({ input: 'Umbrella in Paris?', tokenBudget: 10_000, metadata: { user: 'u1' } });
try {
  const done = await rt.runs.wait(run.id, { timeoutMs: 30_000 });
  const output: string | null = done.output;
  console.log(output, rt.url, done.status === 'SUCCEEDED');
} catch (e) {
  if (e instanceof WaitTimeoutError || e instanceof InputError) console.log(e.message);
}
const page = await rt.runs.list({ status: 'SUCCEEDED', limit: 5 });
console.log(page.runs.map((r) => r.id), page.nextCursor, await rt.runs.get(run.id), seen);
// @ts-expect-error an unknown status
await rt.runs.list({ status: 'DONE' });
await rt.close();

const api = createClient({ baseUrl: 'http://127.0.0.1:8080', apiKey: 'dak_x', fetch });
const created = await api.runs.create({ input: 'Umbrella?', tokenBudget: 1000 }, { idempotencyKey: 'k1' });
const detail: RunDetail = await api.runs.get(created.id);
const waitingFor: string[] = detail.waiting?.toolCalls.map((c) => c.toolName) ?? [];
const steps: TimelineStep[] = await api.runs.timeline(created.id);
await api.runs.decide(created.id, 'toolu_1', { decision: 'deny', reason: 'no' });
const listed = await api.runs.list({ status: 'WAITING', limit: 10 });
const events: (RunEvent | UnknownRunEvent)[] = [];
for await (const e of api.runs.events(created.id, { after: 0 })) events.push(e);
console.log(waitingFor, steps[0]?.latencyMs, listed.nextCursor, foldEvents(events).text, new ApiError('x', 404).status, fromRoot);
// @ts-expect-error input is a string
await api.runs.create({ input: 42 });
// @ts-expect-error not a decision
await api.runs.decide(created.id, 'toolu_1', { decision: 'maybe' });

const config: Readonly<Config> = loadConfig({ DATABASE_URL: 'postgres://localhost/x' });
const wired: Runtime = await startRuntime(config, { api: false, worker: true });
const store: RunStore = wired.store;
const worker: Worker | null = wired.worker;
console.log(store, worker, typeof livenessSession);
await wired.close();
`,
    );
    const result = await run(process.execPath, [TSC, '-p', project], { cwd: project, timeout: 180_000 }).then(
      () => ({ code: 0, out: '' }),
      (e: { code: number; stdout: string }) => ({ code: e.code, out: e.stdout }),
    );
    expect(result).toEqual({ code: 0, out: '' });
  }, 200_000);
});
