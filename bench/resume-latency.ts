/**
 * Resume latency after SIGKILL, with the default lease (30 s): two worker processes (the chaos suite's
 * worker, the built package) against a model stand-in that takes its time; the one that claims a run
 * is killed mid-step, and the time until the other has claimed the run is measured. Owner liveness,
 * not the lease, decides it.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import type pg from 'pg';
import { RunRecords } from '../src/store/run-records.ts';
import { startChaosModel } from './chaos/model.ts';

const here = path.dirname(fileURLToPath(import.meta.url));

interface Proc {
  name: string;
  child: ChildProcess;
  ready: Promise<void>;
}

/** Milliseconds from each kill to the run's claim by the surviving worker, `samples` times. */
export async function resumeLatencies(url: string, pool: pg.Pool, samples: number): Promise<number[]> {
  const model = await startChaosModel(4_000); // every call is in flight long enough to be killed in
  const records = new RunRecords(pool);

  const procs: Proc[] = [];
  let n = 0;
  const start = (): Proc => {
    const name = `resume-bench-${++n}`;
    const child = spawn(process.execPath, ['--import', 'tsx', path.join(here, 'chaos/worker.ts')], {
      env: {
        ...process.env,
        DATABASE_URL: url,
        WORKER_NAME: name,
        LLM_PROVIDER: 'anthropic',
        ANTHROPIC_API_KEY: 'bench',
        ANTHROPIC_BASE_URL: model.url,
        DEFAULT_MODEL: 'chaos-model',
        LOG_LEVEL: 'fatal',
        LEASE_SECONDS: '',
        DURABLE_AGENT_CRASH_AT: '',
        RETENTION_DAYS: '',
      },
      stdio: ['ignore', 'pipe', 'ignore'],
    });
    const ready = new Promise<void>((resolve) =>
      createInterface({ input: child.stdout! }).on('line', (l) => l.includes('"ready"') && resolve()),
    );
    const p = { name, child, ready };
    procs.push(p);
    return p;
  };
  const latencies: number[] = [];
  try {
    let workers = [start(), start()];
    for (let i = 0; i < samples; i++) {
      await Promise.all(workers.map((w) => w.ready));
      const run = await records.create({
        input: `chaos run ${i}`,
        model: 'chaos-model',
        tokenBudget: 1_000_000,
        timeoutSeconds: 600,
        maxSteps: 20,
      });
      let owner: string | null = null;
      while (!owner) {
        await new Promise((r) => setTimeout(r, 20));
        owner = (await records.state(run.id)).lockedBy;
      }
      const victim = workers.find((w) => w.name === owner)!;
      victim.child.kill('SIGKILL');
      await new Promise((r) => victim.child.once('exit', r));
      const killedAt = performance.now();
      for (;;) {
        const s = await records.state(run.id);
        if (s.lockedBy !== owner) break;
        await new Promise((r) => setTimeout(r, 10));
      }
      latencies.push(Math.round(performance.now() - killedAt));
      await records.cancel(run.id).catch(() => {});
      workers = [...workers.filter((w) => w !== victim), start()];
    }
  } finally {
    for (const p of procs) p.child.kill('SIGKILL');
    await model.close();
  }
  return latencies;
}
