import { once } from 'node:events';
import fs from 'node:fs';
import type { MessagePort } from 'node:worker_threads';
import { afterEach, describe, expect, it } from 'vitest';
import { runOnSideThread, type SideProgram } from '../../src/util/side-thread.ts';
import { waitFor } from '../support/wait-for.ts';

/** The process's threads (Linux), the side thread among them while it runs. */
const threads = () => fs.readdirSync('/proc/self/task').length;

/** Answers each message with the thread's id; ends when its port closes. */
const ECHO = `
const { threadId } = require('node:worker_threads');
port.on('message', () => port.postMessage({ threadId, data }));
`;

const opened: SideProgram[] = [];
const run = (source: string, data: unknown = null) => {
  const p = runOnSideThread(source, data);
  opened.push(p);
  return p;
};

async function ask(port: MessagePort): Promise<{ threadId: number; data: unknown }> {
  const answer = once(port, 'message');
  port.postMessage('?');
  const [m] = await answer;
  return m;
}

afterEach(() => {
  for (const p of opened.splice(0)) {
    p.port.close();
    p.release();
  }
});

describe('the side thread', () => {
  it('runs every program of the process on one thread, each with its own port and data', async () => {
    const a = run(ECHO, 'a');
    const b = run(ECHO, { b: 2 });
    const [fromA, fromB] = await Promise.all([ask(a.port), ask(b.port)]);
    expect(fromA.data).toBe('a');
    expect(fromB.data).toEqual({ b: 2 });
    expect(fromA.threadId).toBeGreaterThan(0);
    expect(fromB.threadId).toBe(fromA.threadId);
  });

  it("keeps the thread's heap small: its limits are the thread's own, not the process's", async () => {
    const p = run(`
const { resourceLimits } = require('node:worker_threads');
port.on('message', () => port.postMessage({ threadId: 0, data: { limits: resourceLimits, heapLimitMb: require('node:v8').getHeapStatistics().heap_size_limit / 2 ** 20 } }));
`);
    const { data } = (await ask(p.port)) as { data: { limits: Record<string, number>; heapLimitMb: number } };
    expect(data.limits).toMatchObject({ maxYoungGenerationSizeMb: 2, maxOldGenerationSizeMb: 256 });
    // The main thread's limit is sized by the machine's memory (GBs here); the side thread's by its own.
    expect(data.heapLimitMb).toBeLessThan(300);
  });

  it('ends with the last release, not before; the next program gets a new thread', async () => {
    const a = run(ECHO);
    const b = run(ECHO);
    const first = (await ask(a.port)).threadId;
    const threadsWithIt = threads();
    let bEnded = false;
    void b.ended.then(() => (bEnded = true));
    a.release();
    expect(await a.ended).toBeNull();
    // Still there for b.
    expect((await ask(b.port)).threadId).toBe(first);
    expect(bEnded).toBe(false);
    b.release();
    expect(await b.ended).toBeNull();
    await waitFor('the side thread to end', () => threads() < threadsWithIt, 5_000);
    const c = run(ECHO);
    expect((await ask(c.port)).threadId).not.toBe(first);
  });

  it("tells a program's synchronous throw on its port, ends the program, and the thread goes on", async () => {
    const bad = run(`throw new Error('no good');`);
    const [m] = await once(bad.port, 'message');
    expect(m).toEqual({ type: 'failed', message: 'no good' });
    expect(await bad.ended).toBeNull();
    const good = run(ECHO, 1);
    expect((await ask(good.port)).data).toBe(1);
  });

  it("settles every program's ended with the error that ended the thread", async () => {
    const bystander = run(ECHO);
    const first = (await ask(bystander.port)).threadId;
    run(`setTimeout(() => { throw new Error('late failure'); }, 10);`);
    const error = await bystander.ended;
    expect(error?.message).toBe('late failure');
    const next = run(ECHO);
    expect((await ask(next.port)).threadId).not.toBe(first);
  });
});
