/**
 * `npm run chaos`: the chaos suite at full size (minutes). Several worker processes drive 1,000 runs
 * while they are killed at every crash point and at random, their backends are terminated and the
 * server is restarted; then every run is checked. Prints a table; exits 1 when a check failed.
 *
 * By default it starts a PostgreSQL of its own (the only kind it restarts). With CHAOS_DATABASE_URL
 * it works in a scratch database on that server instead, and never restarts it.
 * Sizes: CHAOS_RUNS (1000), CHAOS_WORKERS (4), CHAOS_CONCURRENCY (50), CHAOS_MINUTES (15, the limit).
 * Cadence (milliseconds, 0: never): CHAOS_KILL_MS (5000), CHAOS_TERMINATE_MS (2000), CHAOS_RESTART_MS (30000);
 * CHAOS_TERMINATE_AGE_MS (3000): only backends at least that old are terminated (workers are killed and
 * the server restarted often, so few backends would be older than the suite's 15 s default).
 */
import { formatReport, runChaos } from './suite.ts';

const num = (name: string, fallback: number) => (process.env[name] ? Number(process.env[name]) : fallback);

const report = await runChaos({
  runs: num('CHAOS_RUNS', 1000),
  workers: num('CHAOS_WORKERS', 4),
  concurrency: num('CHAOS_CONCURRENCY', 50),
  killEveryMs: num('CHAOS_KILL_MS', 5_000),
  terminateEveryMs: num('CHAOS_TERMINATE_MS', 2_000),
  restartEveryMs: num('CHAOS_RESTART_MS', 30_000),
  terminateOlderThanMs: num('CHAOS_TERMINATE_AGE_MS', 3_000),
  modelLatencyMs: 200,
  toolMs: 50,
  databaseUrl: process.env.CHAOS_DATABASE_URL ?? null,
  crashPoints: process.env.CHAOS_CRASH_POINTS !== '0',
  timeoutMs: num('CHAOS_MINUTES', 15) * 60_000,
  log: (line) => console.log(line),
  ...(process.env.CHAOS_WORKER_LOG ? { workerLog: process.env.CHAOS_WORKER_LOG } : {}),
});
console.log(`\n${formatReport(report)}`);
process.exit(report.failures.length ? 1 : 0);
