/**
 * One thread for the process's helpers that must go on while the main event loop is blocked: the
 * lease keepers and the stall sampler. Every thread is an isolate of its own (~11 MB resident) and
 * these helpers do little, so they share one. Each program runs in it with a message port of its own
 * and must end itself (its timers, its connections) when that port closes: the thread serves others
 * still. It ends with the last program's release.
 *
 * Programs are plain JavaScript given as source text, run as `function (require, port, data)`: worker
 * threads do not go through the loaders that compile TypeScript, so a program loads what it needs by
 * resolved path. An error a program throws later (or a rejection it leaves unhandled) ends the thread
 * and every program on it: each owner hears it by `ended`, and starts its program again if it should.
 */
import { MessageChannel, type MessagePort, type TransferListItem, Worker as Thread } from 'node:worker_threads';

/** The thread's own program: it runs each program it is sent, with the port that came with it. */
const DISPATCHER = `
const { parentPort } = require('node:worker_threads');
parentPort.on('message', ({ source, data, port }) => {
  try {
    new Function('require', 'port', 'data', source)(require, port, data);
  } catch (e) {
    port.postMessage({ type: 'failed', message: e && e.message ? e.message : String(e) });
    port.close();
  }
});
`;

export interface SideProgram {
  /** The main thread's end of the program's channel (a listener on it keeps the process alive until its `unref()`). */
  readonly port: MessagePort;
  /**
   * Settles when the program is over: its port closed (by the program, or by `release`), or its thread
   * ended; with the thread's error when that is what ended it, otherwise null.
   */
  readonly ended: Promise<Error | null>;
  /** Closes the port, which ends the program, and lets go of the thread (once): the last one out terminates it. */
  release(): void;
}

interface Side {
  thread: Thread;
  users: number;
  /** The error the thread failed with: told before its exit, and before its ports close. */
  failure: Error | null;
  exited: Promise<void>;
}

let current: Side | null = null;

/**
 * The thread's heap, sized for what its programs hold (a few MB: the held runs' ids and a connection)
 * rather than like the process's: a young generation allowed hundreds of MB, and an old one grown up to
 * 4× what each full collection kept. At or below 256 MB of old generation V8 grows it by at most 1.3×;
 * a 2 MB young generation is collected often, cheaply (figures in docs/performance.md). 256 is far above
 * what 10,000 held runs take, because a thread at its limit is ended (ERR_WORKER_OUT_OF_MEMORY): its
 * programs hear `ended` and the lease keeper starts again, but leases may lapse in between.
 */
const SIDE_HEAP = { maxYoungGenerationSizeMb: 2, maxOldGenerationSizeMb: 256 } as const;

function start(): Side {
  const thread = new Thread(DISPATCHER, { eval: true, resourceLimits: SIDE_HEAP });
  // The process's life is the main thread's business; the helpers only serve it.
  thread.unref();
  // Without a listener, a program's uncaught error would be thrown on the main thread.
  thread.on('error', (e) => {
    side.failure = e;
    // The thread is going: a program started from now on gets a new one.
    if (current === side) current = null;
  });
  const side: Side = {
    thread,
    users: 0,
    failure: null,
    exited: new Promise((resolve) =>
      thread.once('exit', () => {
        if (current === side) current = null;
        resolve();
      }),
    ),
  };
  return side;
}

/** Runs `source` on the side thread with `data` (and `transfer`, ports or buffers moved with it). */
export function runOnSideThread(source: string, data: unknown, transfer: readonly TransferListItem[] = []): SideProgram {
  const side = (current ??= start());
  side.users++;
  const { port1, port2 } = new MessageChannel();
  side.thread.postMessage({ source, data, port: port2 }, [port2, ...transfer]);
  let released = false;
  return {
    port: port1,
    // A thread's ports close as it exits, sooner or later than its 'exit': either way its error is known.
    ended: new Promise((resolve) => {
      port1.once('close', () => resolve(side.failure));
      void side.exited.then(() => resolve(side.failure));
    }),
    release() {
      if (released) return;
      released = true;
      port1.close();
      if (--side.users > 0) return;
      if (current === side) current = null;
      void side.thread.terminate();
    },
  };
}
