/**
 * Redaction of what is stored, with a real worker and PostgreSQL: a tool result holding a (fake) key
 * reaches the model whole in the attempt that produced it, is stored redacted, and a resumed run
 * sends the model the redacted text; the input is stored redacted; no log line carries the key.
 *
 * The run's events are not on this branch yet: the same redacted text is what the tool step's
 * statement writes, so an events table filled by that statement gets it too.
 */
import { Writable } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { armCrashPoint, disarmCrashPoints } from '../../src/engine/crash-points.ts';
import { logEvents } from '../../src/observability/log-events.ts';
import { createLogger } from '../../src/observability/logger.ts';
import { DEFAULT_REDACT_PATTERNS, redactor } from '../../src/observability/redact.ts';
import { RunStore } from '../../src/store/run-store.ts';
import { defineTool } from '../../src/tools/types.ts';
import { testDatabase, type TestDatabase } from '../support/db.ts';
import { expireLease, newRun, SimulatedCrash, testWorker } from '../support/engine.ts';
import { response, ScriptedLlm, usage } from '../support/scripted-llm.ts';

const KEY = 'sk-ant-api03-FAKEfakeFAKEfake0123456789abcdefABCDEF-_0123456789xyzXYZ';
const AWS = 'AKIAIOSFODNN7EXAMPLE';

let db: TestDatabase;
let store: RunStore;
const lines: string[] = [];
const logger = createLogger({
  level: 'debug',
  redact: redactor(DEFAULT_REDACT_PATTERNS),
  destination: new Writable({
    write(chunk, _enc, done) {
      lines.push(String(chunk));
      done();
    },
  }),
});

beforeAll(async () => {
  db = await testDatabase();
  store = new RunStore(db.pool, { redact: redactor(DEFAULT_REDACT_PATTERNS) });
});
afterAll(async () => {
  disarmCrashPoints();
  await db.close();
});

describe('a tool result holding a key', () => {
  it('the model gets it whole in the attempt that produced it; the step, the logs and a resumed run get it redacted', async () => {
    let calls = 0;
    const readEnv = defineTool({
      name: 'read_env',
      description: 'Reads the environment',
      inputSchema: { type: 'object' },
      execute: async () => {
        // The first time, the tool crashes its worker with the key in the message (a log line's worth).
        if (++calls === 1) throw new SimulatedCrash(`could not connect with ${AWS}`);
        return `ANTHROPIC_API_KEY=${KEY}\nAWS_ACCESS_KEY_ID=${AWS}\nHOME=/root`;
      },
    });
    const llm = new ScriptedLlm()
      .thenToolUse('toolu_env_1', 'read_env', {})
      .then(() => response([{ type: 'text', text: 'Looked.' }], 'end_turn', usage(10, 3)))
      .then(() => response([{ type: 'text', text: 'Looked again.' }], 'end_turn', usage(10, 3)));
    const worker = testWorker(store, llm, [readEnv], { name: 'w-redact', logger, events: [logEvents(logger)] });
    const run = await newRun(store, `Check the box; my key is ${KEY}`);

    // Attempt 1: the model asks for the tool, which crashes the attempt.
    await expect(worker.runOnce()).rejects.toThrow(SimulatedCrash);
    // Attempt 2: the tool runs again and answers; the model call after it is cut off by a crash.
    await expireLease(db.pool, run.id);
    armCrashPoint({ point: 'after-model-response', runId: run.id });
    await expect(worker.runOnce()).rejects.toThrow();
    disarmCrashPoints();
    // Attempt 3 resumes from the log.
    await expireLease(db.pool, run.id);
    expect((await worker.runOnce())?.status).toBe('SUCCEEDED');

    const toolResult = (i: number) => JSON.stringify(llm.seen[i]!.messages.at(-1));
    // The model's call in attempt 2 had the result as the tool returned it...
    expect(toolResult(1)).toContain(KEY);
    expect(toolResult(1)).toContain(AWS);
    // ...the resumed attempt sent what is stored.
    expect(toolResult(2)).not.toContain(KEY);
    expect(toolResult(2)).toContain('ANTHROPIC_API_KEY=[redacted]\\nAWS_ACCESS_KEY_ID=[redacted]\\nHOME=/root');
    // The input is stored redacted, so the model never saw the key in it.
    expect(JSON.stringify(llm.seen[0]!.messages[0])).toContain('my key is [redacted]');

    const { rows: steps } = await db.pool.query<{ response: string }>(
      `SELECT response FROM durable_agent.run_step WHERE run_id = $1 AND kind = 'TOOL'`,
      [run.id],
    );
    expect(steps[0]!.response).toBe('ANTHROPIC_API_KEY=[redacted]\nAWS_ACCESS_KEY_ID=[redacted]\nHOME=/root');
    const everything = JSON.stringify((await db.pool.query('SELECT r.*, s.* FROM durable_agent.run r JOIN durable_agent.run_step s ON s.run_id = r.id WHERE r.id = $1', [run.id])).rows);
    expect(everything).not.toContain(KEY);
    expect(everything).not.toContain(AWS);

    // The crash was logged, with its message, without the key.
    const crash = lines.find((l) => l.includes('"attempt_ended"') && l.includes('could not connect'));
    expect(crash, lines.join('')).toBeDefined();
    expect(crash).toContain('could not connect with [redacted]');
    expect(lines.join('')).not.toContain(KEY);
    expect(lines.join('')).not.toContain(AWS);
    worker.stop().catch(() => {});
  });
});
