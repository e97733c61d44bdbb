import { describe, expect, it } from 'vitest';
import type { RunId } from '../../src/domain/types.ts';
import { Followers, StepStream } from '../../src/engine/step-stream.ts';
import type { NewEvent } from '../../src/ports/new-event.ts';
import { elementsCapacity } from '../support/heap-snapshot.ts';

const owner = { worker: 'w1', token: 't1', leaseMs: 30_000 };

describe('StepStream of a run nobody follows', () => {
  it('writes nothing itself and hands its events to the checkpoint, in an array of exactly their number', async () => {
    const appended: NewEvent[][] = [];
    const stream = new StepStream(
      { appendEvents: async (_run, _owner, events) => void appended.push([...events]) },
      'r1' as RunId,
      owner,
      3,
      0,
      new Followers(),
    );
    stream.start();
    stream.text('Let me ', 1);
    stream.text('look.', 1);
    const rest = await stream.rest();
    expect(appended).toEqual([]);
    expect(rest).toEqual([
      { type: 'step.started', data: { seq: 3, kind: 'MODEL', attempt: 1 } },
      { type: 'text.delta', data: { seq: 3, attempt: 1, text: 'Let me look.' } },
    ]);
    // Kept with the checkpoint while its write waits, one per run in flight.
    expect(await elementsCapacity(rest)).toBe(2);
  });
});
