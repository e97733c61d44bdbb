/**
 * The chaos suite, short: three real worker processes (the built package), a few dozen runs, workers
 * killed at the named crash points and at random, backends terminated, and the suite's own PostgreSQL
 * restarted. Every run must end, with a whole timeline, tokens that add up, each tool effect once per
 * idempotency key, and no model call repeated beyond the interruptions. `npm run chaos` is the long one.
 */
import { expect, it } from 'vitest';
import { formatReport, runChaos } from '../../bench/chaos/suite.ts';

it('runs survive worker kills at every crash point, terminated backends and a server restart', async () => {
  const report = await runChaos({
    runs: 30,
    workers: 3,
    // Any one worker can take every run: a death's runs are taken over by a survivor at once.
    concurrency: 30,
    // Gentle enough for a loaded 2-core machine, where a worker process takes tens of seconds to start.
    killEveryMs: 30_000,
    terminateEveryMs: 2_000,
    restartEveryMs: 90_000,
    // On an idle machine the short run is over in about 10 s, and workers take a few seconds to start:
    // backends are terminated from 1 s of age, every 2 s, so some are whatever the machine's speed.
    terminateOlderThanMs: 1_000,
    modelLatencyMs: 1_000,
    toolMs: 50,
    databaseUrl: null, // a PostgreSQL of its own, the only kind it may restart
    timeoutMs: 400_000,
  });
  console.log(formatReport(report));
  expect(report.failures).toEqual([]);
  expect(report.succeeded).toBe(30);
  // The chaos happened: crash points fired, backends were terminated.
  expect(Object.values(report.kills).reduce((a, b) => a + b, 0)).toBeGreaterThan(0);
  expect(report.backendsTerminated).toBeGreaterThan(0);
}, 600_000);
