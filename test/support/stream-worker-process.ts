/**
 * A real worker process whose model streams from the fake Messages API at ANTHROPIC_BASE_URL. With
 * CRASH_MID_STREAM=1 it kills itself (SIGKILL) right after its first batch of streamed text commits.
 */
import { armCrashPoint } from '../../src/engine/crash-points.ts';
import { createLlmClient } from '../../src/llm/index.ts';
import { testWorker } from './engine.ts';
import { workerProcess } from './worker-harness.ts';

const { store, options: fromEnv, serve } = workerProcess(4);
const llm = createLlmClient({
  llmProvider: 'anthropic',
  anthropicApiKey: process.env.ANTHROPIC_API_KEY!,
  anthropicBaseUrl: process.env.ANTHROPIC_BASE_URL!,
  demoLatencyMs: 0,
  llmStreaming: true,
  stepTimeoutMs: 20_000,
  maxAttempts: 3,
  retryBaseMs: 10,
  retryCapMs: 50,
});
if (process.env.CRASH_MID_STREAM === '1') armCrashPoint({ point: 'mid-stream', action: 'kill' });
const worker = testWorker(store, llm, [], {
  ...fromEnv,
});
await serve(worker);
