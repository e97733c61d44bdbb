/**
 * A real worker process whose model streams from the fake Messages API at ANTHROPIC_BASE_URL. With
 * CRASH_MID_STREAM=1 it kills itself (SIGKILL) right after its first batch of streamed text commits.
 */
import { armCrashPoint } from '../../src/engine/crash-points.ts';
import { createPool } from '../../src/db/pool.ts';
import { createLlmClient } from '../../src/llm/index.ts';
import { RunStore } from '../../src/store/run-store.ts';
import { testWorker } from './engine.ts';

const url = process.env.DATABASE_URL!;
const pool = createPool(url, 4);
const llm = createLlmClient({
  llmProvider: 'anthropic', anthropicApiKey: process.env.ANTHROPIC_API_KEY!, anthropicBaseUrl: process.env.ANTHROPIC_BASE_URL!,
  demoLatencyMs: 0, llmStreaming: true, stepTimeoutMs: 20_000, maxAttempts: 3, retryBaseMs: 10, retryCapMs: 50,
});
if (process.env.CRASH_MID_STREAM === '1') armCrashPoint({ point: 'mid-stream', action: 'kill' });
const worker = testWorker(new RunStore(pool), llm, [], {
  name: process.env.WORKER_NAME!,
  leaseMs: Number(process.env.LEASE_MS ?? 1000),
  pollIntervalMs: 100,
  databaseUrl: url,
});
await worker.start();
console.log(JSON.stringify({ event: 'ready' }));
process.on('SIGTERM', () => void worker.stop().then(() => pool.end()).then(() => process.exit(0)));
