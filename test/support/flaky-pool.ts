/**
 * A real pg.Pool with connection faults injected around chosen statements, as a network or a server
 * restart would cause them: the statement never reaches the server (`before`), or it commits and
 * the reply is lost (`after`). Every other statement goes through untouched.
 */
import type pg from 'pg';

export interface Fault {
  /** Which statements: the name of a prepared statement (`durable_agent_…`) or a piece of the SQL text; or a pattern of names. */
  match: string | RegExp;
  when: 'before' | 'after';
  /** How many matching statements fail, one after another. Default 1. */
  times?: number;
  /** The error the client sees; an ECONNRESET by default. */
  error?: () => Error;
  /** Runs when the fault fires, before the error is thrown (e.g. to let another worker take the lease). */
  onFire?: () => Promise<void>;
}

export const connectionReset = () => Object.assign(new Error('read ECONNRESET'), { code: 'ECONNRESET' });

interface Armed extends Fault {
  left: number;
}

export interface FlakyPool {
  pool: pg.Pool;
  inject(fault: Fault): void;
  /** How many faults fired. */
  fired: number;
}

export function flakyPool(real: pg.Pool): FlakyPool {
  const faults: Armed[] = [];
  const state: FlakyPool = {
    pool: Object.create(real, {
      query: {
        value: async (config: string | pg.QueryConfig, values?: unknown[]) => {
          const name = typeof config === 'string' ? '' : (config.name ?? '');
          const text = typeof config === 'string' ? config : config.text;
          const matches = (m: string | RegExp) => (typeof m === 'string' ? name === m || text.includes(m) : m.test(name));
          const fault = faults.find((f) => f.left > 0 && matches(f.match));
          if (!fault) return real.query(config as pg.QueryConfig, values);
          fault.left--;
          state.fired++;
          if (fault.when === 'after') await real.query(config as pg.QueryConfig, values);
          await fault.onFire?.();
          throw (fault.error ?? connectionReset)();
        },
      },
    }),
    inject(fault) {
      faults.push({ ...fault, left: fault.times ?? 1 });
    },
    fired: 0,
  };
  return state;
}
