/**
 * `npm run bench:mcp`: what an MCP tool call costs a run besides the tool's own work. Starts the
 * test order-desk server over stdio as a worker does, then times the connection (spawn + handshake +
 * listing), calls one after another on the shared connection, calls 16 at a time, and a call that
 * finds its server killed (a new process, a new handshake, then the call). Writes bench/results/mcp.json.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { createLogger } from '../src/observability/logger.ts';
import type { McpServer } from '../src/tools/mcp-config.ts';
import { McpConnection } from '../src/tools/mcp-connection.ts';

const CALLS = Number(process.env.BENCH_MCP_CALLS ?? 2000);
const CONCURRENCY = 16;
const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'bench-mcp-'));
const pidFile = path.join(dir, 'server.pid');
const server: McpServer = {
  name: 'orders',
  command: process.execPath,
  args: [fileURLToPath(new URL('../test/support/mcp-order-server.mjs', import.meta.url))],
  env: { MCP_TEST_PIDFILE: pidFile },
};

const pct = (xs: number[], p: number) => {
  const s = [...xs].sort((a, b) => a - b);
  return Number((s[Math.min(s.length - 1, Math.floor(s.length * p))] ?? 0).toFixed(3));
};
const summary = (xs: number[]) => ({ n: xs.length, p50: pct(xs, 0.5), p99: pct(xs, 0.99), max: Number(Math.max(...xs).toFixed(3)) });

const connection = new McpConnection(server, { logger: createLogger({ level: 'silent' }) });
const call = (i: number) =>
  connection.callTool(
    'lookup_order',
    { orderId: `A-${i}` },
    { idempotencyKey: `toolu_${i}`, signal: new AbortController().signal, idempotent: true },
  );

let t = performance.now();
const tools = await connection.listTools();
const connectMs = performance.now() - t;

for (let i = 0; i < 50; i++) await call(i); // warm-up
const sequential: number[] = [];
for (let i = 0; i < CALLS; i++) {
  t = performance.now();
  await call(i);
  sequential.push(performance.now() - t);
}

const concurrent: number[] = [];
t = performance.now();
let next = 0;
await Promise.all(
  Array.from({ length: CONCURRENCY }, async () => {
    while (next < CALLS) {
      const i = next++;
      const s = performance.now();
      await call(i);
      concurrent.push(performance.now() - s);
    }
  }),
);
const concurrentPerSecond = CALLS / ((performance.now() - t) / 1000);

const reconnects: number[] = [];
for (let i = 0; i < 5; i++) {
  const pid = Number(fs.readFileSync(pidFile, 'utf8'));
  process.kill(pid, 'SIGKILL');
  while (fs.readFileSync(pidFile, 'utf8') === String(pid)) {
    t = performance.now();
    await call(i).catch(() => undefined); // the first may race the kill and find the old connection closing
    if (fs.readFileSync(pidFile, 'utf8') !== String(pid)) reconnects.push(performance.now() - t);
  }
}
await connection.close();
fs.rmSync(dir, { recursive: true, force: true });

const result = {
  when: new Date().toISOString(),
  machine: { cpus: os.cpus().length, load1: Number(os.loadavg()[0]!.toFixed(1)), node: process.version },
  tools: tools.length,
  connectAndListMs: Number(connectMs.toFixed(1)),
  sequentialCallMs: summary(sequential),
  concurrentCallMs: { concurrency: CONCURRENCY, ...summary(concurrent), callsPerSecond: Math.round(concurrentPerSecond) },
  callAfterServerKilledMs: summary(reconnects),
};
fs.mkdirSync(new URL('./results/', import.meta.url), { recursive: true });
fs.writeFileSync(new URL('./results/mcp.json', import.meta.url), `${JSON.stringify(result, null, 2)}\n`);
console.log(JSON.stringify(result, null, 2));
