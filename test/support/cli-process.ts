/**
 * Real `durable-agent` processes for end-to-end tests: started, watched, waited for, killed. They run
 * the compiled CLI (bin/ → dist/), as an installed package does; `npm test` builds it first.
 */
import { type ChildProcess, execFile, spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import { envVariables } from '../../src/config/environment.ts';
import { freePort } from '../../src/db/embedded.ts';

export { freePort };

export const BIN = path.resolve('bin/durable-agent.js');

/** Refuses to test a build older than the sources (`npm run build` stamps dist/.tsbuildinfo). */
export function assertBuilt(): void {
  const stamp = fs.statSync(path.resolve('dist/.tsbuildinfo'), { throwIfNoEntry: false });
  const sources = fs.readdirSync(path.resolve('src'), { recursive: true, withFileTypes: true }).filter((e) => e.isFile());
  const newest = Math.max(...sources.map((e) => fs.statSync(path.join(e.parentPath, e.name)).mtimeMs));
  if (!stamp || stamp.mtimeMs < newest) throw new Error('dist/ is missing or older than src/: run `npm run build` first (npm test does)');
}

export interface Proc {
  name: string;
  child: ChildProcess;
  out: string;
  err: string;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** The test runner's environment without any variable the project reads (CI's second pass sets DATABASE_URL), plus `extra`. */
export function cleanEnv(extra: Record<string, string>): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { ...process.env };
  const variables = envVariables();
  for (const k of Object.keys(env)) if (variables.includes(k) || k.startsWith('ANTHROPIC_')) delete env[k];
  return { ...env, ...extra };
}

const exec = promisify(execFile);

/** One `durable-agent` command run to its end with `env`: its exit code and what it printed. */
export async function runCli(args: string[], env: NodeJS.ProcessEnv): Promise<{ code: number; out: string; err: string }> {
  assertBuilt();
  try {
    const { stdout, stderr } = await exec(process.execPath, [BIN, ...args], { env, timeout: 30_000 });
    return { code: 0, out: stdout, err: stderr };
  } catch (e) {
    const { code, stdout, stderr } = e as { code: number; stdout: string; stderr: string };
    return { code, out: stdout, err: stderr };
  }
}

/** The processes a test file started, so they can be printed on failure and killed afterwards. */
export class CliProcesses {
  readonly all: Proc[] = [];

  start(name: string, args: string[], env: NodeJS.ProcessEnv): Proc {
    assertBuilt();
    const child = spawn(process.execPath, [BIN, ...args], { env, stdio: ['ignore', 'pipe', 'pipe'] });
    const p: Proc = {
      name,
      child,
      out: '',
      err: '',
      exited: new Promise((resolve) => child.once('exit', (code, signal) => resolve({ code, signal }))),
    };
    child.stdout!.on('data', (c: Buffer) => (p.out += c.toString('utf8')));
    child.stderr!.on('data', (c: Buffer) => (p.err += c.toString('utf8')));
    this.all.push(p);
    return p;
  }

  transcript(): string {
    return this.all
      .map((p) => `----- ${p.name} (pid ${p.child.pid}) stdout -----\n${p.out}\n----- ${p.name} stderr -----\n${p.err}`)
      .join('\n');
  }

  async killAll(): Promise<void> {
    for (const p of this.all) if (alive(p)) p.child.kill('SIGKILL');
    await Promise.all(this.all.map((p) => p.exited));
  }
}

export const alive = (p: Proc) => p.child.exitCode === null && p.child.signalCode === null;

export async function until<T>(
  what: string,
  fn: () => Promise<T | null | undefined | false> | T | null | undefined | false,
  timeoutMs: number,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await fn();
    if (v) return v;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await sleep(100);
  }
}

export async function waitForOutput(p: Proc, pattern: RegExp, timeoutMs: number): Promise<RegExpMatchArray> {
  return until(
    `${p.name} to print ${pattern}`,
    () => {
      const m = p.out.match(pattern);
      if (m) return m;
      if (!alive(p)) throw new Error(`${p.name} exited (${p.child.exitCode ?? p.child.signalCode}) before printing ${pattern}`);
      return null;
    },
    timeoutMs,
  );
}

export async function exitWithin(p: Proc, timeoutMs: number) {
  return Promise.race([
    p.exited,
    sleep(timeoutMs).then(() => {
      throw new Error(`${p.name} did not exit within ${timeoutMs} ms`);
    }),
  ]);
}

/**
 * `durable-agent serve` of the demo agent on a free port of this machine, once its banner is out: the
 * server the CLI tests talk to. `demoLatencyMs` paces the demo model (0: answers at once).
 */
export async function serveDemo(procs: CliProcesses, databaseUrl: string, demoLatencyMs: number): Promise<{ serve: Proc; base: string }> {
  const port = await freePort();
  const serve = procs.start(
    'serve',
    ['serve'],
    cleanEnv({
      DATABASE_URL: databaseUrl,
      PORT: String(port),
      LLM_PROVIDER: 'demo',
      DEMO_LATENCY_MS: String(demoLatencyMs),
      LOG_LEVEL: 'warn',
    }),
  );
  await waitForOutput(serve, /Then: curl/, 60_000);
  return { serve, base: `http://127.0.0.1:${port}` };
}
