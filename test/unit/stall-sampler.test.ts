import { afterEach, expect, it } from 'vitest';
import { sampleStalls, type StallSample, type StallSampling } from '../../src/engine/stall-sampler.ts';
import { runOnSideThread } from '../../src/util/side-thread.ts';

let sampling: StallSampling | undefined;
afterEach(() => sampling?.close());

function blockTheLoop(ms: number): void {
  const end = Date.now() + ms;
  while (Date.now() < end);
}

it('samples the stalls of the main thread again once the side thread died under it', async () => {
  sampling = sampleStalls({ sampleAfterMs: 40, sampleEveryMs: 40 });
  await sampling.ready;
  const killer = runOnSideThread(`setTimeout(() => { throw new Error('the side thread fails'); }, 0);`, null);
  expect((await killer.ended)?.message).toBe('the side thread fails');
  killer.release();

  // Stalls until one is sampled: the sampler comes back a moment after its thread died.
  let samples: StallSample[] = [];
  for (const deadline = Date.now() + 10_000; samples.length === 0 && Date.now() < deadline;) {
    const from = Date.now();
    blockTheLoop(200);
    await new Promise((r) => setTimeout(r, 30));
    samples = sampling.samples(from, Date.now());
  }
  expect(samples.length).toBeGreaterThan(0);
  expect(samples[0]!.where[0]).toMatch(/^blockTheLoop \(/);
});
