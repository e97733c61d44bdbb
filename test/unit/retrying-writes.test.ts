import { describe, expect, it } from 'vitest';
import { LeaseLostError, PermanentDatabaseError } from '../../src/domain/errors.ts';
import type { RunId } from '../../src/domain/types.ts';
import type { EngineStore } from '../../src/ports/engine-store.ts';
import { retryingWrites, retryTransient } from '../../src/engine/retrying-store.ts';

const fast = { attempts: 4, baseMs: 1, capMs: 2 };
const reset = () => Object.assign(new Error('read ECONNRESET'), { code: 'ECONNRESET' });
const pgError = (code: string) => Object.assign(new Error(`error ${code}`), { code });

/** An operation that fails with `errors` one after another, then returns 'ok'. */
function failing(...errors: unknown[]) {
  const calls = { n: 0 };
  const op = async () => {
    const e = errors[calls.n++];
    if (e !== undefined) throw e;
    return 'ok';
  };
  return { op, calls };
}

describe('retryTransient', () => {
  it('tries a transient failure again until it goes through', async () => {
    const { op, calls } = failing(reset(), pgError('57P01'));
    expect(await retryTransient(op, { what: 'write', policy: fast })).toBe('ok');
    expect(calls.n).toBe(3);
  });

  it("gives up after the policy's attempts with the last error as it was", async () => {
    const last = reset();
    const { op, calls } = failing(reset(), reset(), reset(), last);
    await expect(retryTransient(op, { what: 'write', policy: fast })).rejects.toBe(last);
    expect(calls.n).toBe(4);
  });

  it('raises a permanent failure at once, saying what could not be done and why', async () => {
    const { op, calls } = failing(pgError('22021'));
    const e = await retryTransient(op, { what: 'record model step 2', policy: fast }).catch((x: unknown) => x);
    expect(e).toBeInstanceOf(PermanentDatabaseError);
    expect((e as PermanentDatabaseError).message).toBe('could not record model step 2: error 22021 (SQLSTATE 22021)');
    expect((e as PermanentDatabaseError).sqlState).toBe('22021');
    expect(calls.n).toBe(1);
  });

  it('passes anything that is not a database failure through untouched, without retrying', async () => {
    const lost = new LeaseLostError('r', 'w');
    const { op, calls } = failing(lost);
    await expect(retryTransient(op, { what: 'write', policy: fast, landed: async () => ({ value: 'never' }) })).rejects.toBe(lost);
    expect(calls.n).toBe(1);
  });

  it('on a retry whose error may mean the first try committed, returns what the write left behind', async () => {
    const { op } = failing(reset(), pgError('23505'));
    let asked = 0;
    const landed = async () => {
      asked++;
      return { value: 'found' };
    };
    expect(await retryTransient(op, { what: 'write', policy: fast, landed })).toBe('found');
    expect(asked).toBe(1);
  });

  it('treats a duplicate key on a retry as permanent when the write is not found after all', async () => {
    const { op } = failing(reset(), pgError('23505'));
    await expect(retryTransient(op, { what: 'write', policy: fast, landed: async () => null })).rejects.toBeInstanceOf(
      PermanentDatabaseError,
    );
  });

  it('stops waiting at once when its signal is aborted', async () => {
    const controller = new AbortController();
    const { op, calls } = failing(reset(), reset(), reset());
    const stop = new Error('worker stopping');
    const attempt = retryTransient(op, {
      what: 'write',
      policy: { attempts: 5, baseMs: 60_000, capMs: 60_000 },
      signal: controller.signal,
    });
    controller.abort(stop);
    await expect(attempt).rejects.toBe(stop);
    expect(calls.n).toBe(1);
  });
});

describe('retryingWrites', () => {
  /** A store whose log read fails `failures` times (a connection reset), then answers; the rest is the store's own. */
  class FlakyStore {
    reads = 0;
    constructor(private readonly failures: number) {}
    async steps(runId: string) {
      if (++this.reads <= this.failures) throw reset();
      return [{ runId }];
    }
    /** Not retried: reached through the run's copy with the store's own state. */
    async renewLeases() {
      return [this.reads];
    }
  }

  it("gives each run's copy its own signal over one store: aborting one run stops its retries only", async () => {
    const store = new FlakyStore(2);
    const aborted = new AbortController();
    aborted.abort();
    const stopped = retryingWrites(store as unknown as EngineStore, aborted.signal);
    const going = retryingWrites(store as unknown as EngineStore, new AbortController().signal);
    // The aborted run's read fails once and is not tried again; the other's is, until it goes through.
    await expect(stopped.steps('run-a' as RunId)).rejects.toThrow(/abort/i);
    expect(await going.steps('run-b' as RunId)).toEqual([{ runId: 'run-b' }]);
    expect(store.reads).toBe(3);
    expect(await going.renewLeases({ worker: 'w', leaseMs: 1 }, [])).toEqual([3]);
  });
});
