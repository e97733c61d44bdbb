/**
 * The lease keeper on the main thread: every lease the worker holds, renewed in one statement per
 * interval. A step that blocks the event loop stops it too, so the runtime uses the keeper off the
 * main thread (src/leases/lease-keeper-thread.ts) instead; this one serves embedders and tests that
 * give the worker a store but no database URL.
 */
import type { RunId } from '../domain/types.ts';
import type { HeldLease, LeaseKeeper, LeaseKeeperFactory, LeaseOwner, RenewedLease } from '../ports/engine-store.ts';
import { renewWithinMs } from '../core/lease-policy.ts';

export type { LeaseKeeper, LeaseKeeperFactory, LeaseKeeperListener } from '../ports/engine-store.ts';

export function inProcessLeaseKeeper(
  renew: (owner: LeaseOwner, held: readonly HeldLease[], withinMs: number) => Promise<RenewedLease[]>,
): LeaseKeeperFactory {
  return (owner, intervalMs, listener): LeaseKeeper => {
    const held = new Map<RunId, string>();
    const cancelReported = new Set<RunId>();
    let timer: NodeJS.Timeout | undefined;
    let inFlight = false;

    const round = async () => {
      if (inFlight) return; // a slow renewal is not stacked on
      inFlight = true;
      const leases = [...held].map(([runId, token]) => ({ runId, token }));
      try {
        const renewed = await renew(owner, leases, renewWithinMs(owner.leaseMs, intervalMs));
        const alive = new Set(renewed.map((r) => `${r.runId} ${r.token}`));
        for (const l of leases) {
          if (alive.has(`${l.runId} ${l.token}`) || held.get(l.runId) !== l.token) continue;
          held.delete(l.runId);
          listener.lost(l);
        }
        for (const r of renewed) {
          if (r.followed && held.has(r.runId)) listener.followed?.(r.runId);
          if (!r.cancelRequested || cancelReported.has(r.runId) || !held.has(r.runId)) continue;
          cancelReported.add(r.runId);
          listener.cancelRequested(r.runId);
        }
      } catch (e) {
        listener.failed(e as Error);
      } finally {
        inFlight = false;
      }
    };

    return {
      ready: Promise.resolve(),
      hold({ runId, token }) {
        held.set(runId, token);
        timer ??= setInterval(() => void round(), intervalMs).unref();
      },
      drop(runId) {
        held.delete(runId);
        cancelReported.delete(runId);
        if (held.size === 0) {
          clearInterval(timer);
          timer = undefined;
        }
      },
      async close() {
        clearInterval(timer);
        timer = undefined;
        held.clear();
      },
    };
  };
}
