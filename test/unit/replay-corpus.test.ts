/**
 * Recorded logs (test/fixtures/replay/*.json: steps as the store returned them, with the run's end)
 * replayed step by step: every request the engine would make along each log must be one the Messages
 * API accepts, and the end of each log must lead where the run went.
 */
import fs from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import type { RunStatus } from '../../src/domain/types.ts';
import { decide } from '../../src/engine/decide.ts';
import { type FoldableStep, replay } from '../../src/core/replay.ts';
import { expectValidMessages } from '../support/messages-rules.ts';

interface RecordedLog {
  description: string;
  input: string;
  run: { status: RunStatus; output: string | null; error: string | null; stopReason: string | null };
  steps: FoldableStep[];
}

const DIR = path.resolve('test/fixtures/replay');
const corpus = fs
  .readdirSync(DIR)
  .filter((f) => f.endsWith('.json'))
  .sort()
  .map((f) => ({ name: path.basename(f, '.json'), log: JSON.parse(fs.readFileSync(path.join(DIR, f), 'utf8')) as RecordedLog }));

/** Logs that stop mid-run (a worker died): what the next worker does with them. */
const RESUMED: Record<string, object> = {
  'resumed-mid-tool': { type: 'tool', pending: { use: { id: 'toolu_09B' }, startedSeq: 3 } },
  // Not idempotent: the gate (gate.test.ts) turns this into a wait for a person's decision.
  'non-idempotent-started': { type: 'tool', pending: { use: { id: 'toolu_10A', name: 'charge_card' }, startedSeq: 2 } },
};

describe('the replay corpus', () => {
  it('covers every stop reason, parallel tool results, errors and a resume mid-tool', () => {
    const stops = new Set(corpus.flatMap(({ log }) => log.steps.map((s) => s.stopReason)));
    for (const stop of ['end_turn', 'stop_sequence', 'max_tokens', 'tool_use', 'pause_turn', 'refusal', 'model_context_window_exceeded']) {
      expect(stops).toContain(stop);
    }
    expect(corpus.some(({ log }) => log.steps.filter((s) => s.kind === 'TOOL' && s.status === 'DONE').length >= 3)).toBe(true);
    expect(corpus.some(({ log }) => log.steps.some((s) => s.status === 'ERROR'))).toBe(true);
    expect(corpus.some(({ log }) => log.steps.some((s) => s.status === 'STARTED'))).toBe(true);
  });

  for (const { name, log } of corpus) {
    it(`${name}: ${log.description}`, () => {
      // Every prefix of the log is a state a worker may resume from; wherever it would call the model,
      // the request must be valid.
      let modelCalls = 0;
      for (let n = 0; n <= log.steps.length; n++) {
        const c = replay(log.input, log.steps.slice(0, n));
        if (decide(c).type === 'model') {
          modelCalls++;
          expectValidMessages(c.messages, `${name}, the request after step ${n}`);
        }
      }
      // Each recorded model step was such a call.
      expect(modelCalls).toBeGreaterThanOrEqual(log.steps.filter((s) => s.kind === 'MODEL').length);

      const next = decide(replay(log.input, log.steps));
      if (log.run.status === 'RUNNING') {
        expect(next).toMatchObject(RESUMED[name]!);
      } else {
        expect(next).toMatchObject({
          type: 'finish',
          end: { status: log.run.status, ...(log.run.error !== null ? { error: log.run.error } : {}) },
        });
        if (log.run.output !== null && next.type === 'finish') expect(next.end.output).toBe(log.run.output);
      }
    });
  }
});
