/**
 * What the main thread was running while its event loop stalled, seen from another thread: a
 * stalled loop runs nothing else, so only another thread can look, and only the inspector can read
 * another thread's stack. Nothing is instrumented while the loop is well: the main thread writes a
 * heartbeat into shared memory; only when it is late does the sampler connect an inspector
 * session (`Session.connectToMainThread`) and have the main thread evaluate, at its next interrupt
 * check and without pausing, an expression that returns the stack it was running. The debugger is
 * never enabled (with it on, every promise costs several times more).
 *
 * The stack read is V8's own, with the `async` frames of the functions awaiting the one that runs
 * (what `Error.stack` shows, at no cost to code that does not fail). A tool call runs inside a
 * function named by `markToolCall` after the tool and its run, so a sample whose stack holds that
 * name caught the tool's own code running: its first part, or any part after an await.
 *
 * One sampler serves the process (every watch of every worker in it), on the side thread it shares
 * with the lease keepers (side-thread.ts). There is none off the main thread (the session would read
 * another thread) or in a Node built without the inspector.
 */
import { isMainThread, type MessagePort, MessageChannel, receiveMessageOnPort } from 'node:worker_threads';
import type { Tool } from '../tools/types.ts';
import { runOnSideThread, type SideProgram } from '../util/side-thread.ts';

/** The start of the name of the function a tool call runs in; the rest is JSON: [tool, run id]. */
const MARK = 'durable-agent tool call ';

/** One look at the stalled main thread. */
export interface StallSample {
  /** Date.now() when its stack was read. */
  at: number;
  /** The tool call whose code was running (on the stack, or awaiting what was), or null for none. */
  call: { tool: string; runId: string } | null;
  /** The innermost frames, `function (file:line)`. */
  where: string[];
}

export interface StallSampling {
  /** Settles when samples can be taken (or never will be). */
  readonly ready: Promise<void>;
  /** Samples taken from `from` to `to` (Date.now() values). */
  samples(from: number, to: number): StallSample[];
  close(): void;
}

export interface StallSamplingOptions {
  /** @unit milliseconds — a loop blocked this long is sampled. */
  sampleAfterMs: number;
  /** @unit milliseconds — and again every this long while it stays blocked. */
  sampleEveryMs: number;
}

/** `tool`, each of its calls run inside a function whose name says the tool and the run. */
export function markToolCall(tool: Tool): Tool {
  const execute = tool.execute;
  const marked = Object.create(tool) as Tool;
  marked.execute = (input, ctx) => {
    const name = MARK + JSON.stringify([tool.name, ctx.runId]);
    // A computed method name is the function's own name, the one V8 prints for its frames.
    const call = {
      async [name]() {
        return await execute.call(tool, input, ctx);
      },
    }[name]!;
    return call();
  };
  return marked;
}

/** @unit milliseconds — how often the main thread writes its heartbeat. */
const HEARTBEAT_MS = 50;
/** Slots of the shared Float64Array. */
const BEAT = 0;
const AFTER = 1;
const EVERY = 2;
/** @unit milliseconds — how often the sampler looks at the heartbeat. */
const POLL_MS = 20;
/** @unit milliseconds — how long after its thread died the sampler starts again. */
const RESTART_MS = 500;
/** Samples kept for the watches to read: the last stalls' worth. */
const KEPT = 64;

/**
 * The program on the side thread: `data` holds the shared heartbeat, the port the samples go out on and
 * the mark; `port` says it is ready, and its closing ends the program.
 */
const THREAD_SOURCE = `
const { Session } = require('node:inspector');
const shared = new Float64Array(data.shared);
const { samples, mark } = data;
// Evaluated in the stalled main thread, on top of what it was running (the inspector runs it at the
// next interrupt check, without pausing anything): that stack as V8 sees it, async frames included.
// The main thread's own settings are put back before it goes on.
const STACK = '(() => { const E = globalThis.Error, prepare = E.prepareStackTrace, limit = E.stackTraceLimit;'
  + ' E.stackTraceLimit = 200; E.prepareStackTrace = (_, sites) => sites.map((s) => [s.getFunctionName() || "", s.getFileName() || "", s.getLineNumber() || 0]);'
  + ' try { return new E().stack; } finally { E.prepareStackTrace = prepare; E.stackTraceLimit = limit; } })()';

function callOf(name) {
  if (!name.startsWith(mark)) return null;
  try {
    const [tool, runId] = JSON.parse(name.slice(mark.length));
    return { tool, runId };
  } catch { return null; }
}

// A session is connected for one sample only: a process that exits with one connected says it is
// waiting for a debugger, and one that is not connected costs the main thread nothing.
function stackNow() {
  const session = new Session();
  session.connectToMainThread();
  return new Promise((resolve, reject) => {
    session.post('Runtime.evaluate', { expression: STACK, returnByValue: true, silent: true }, (e, r) => {
      session.disconnect();
      if (e) reject(e);
      else resolve(r.result && r.result.value);
    });
  });
}

async function sample(beat) {
  const value = await stackNow();
  if (!Array.isArray(value)) return;
  // The evaluation's own frames come first and have no file; none after them: the loop was idle, the
  // stall over before the evaluation ran.
  const first = value.findIndex(([, file]) => file !== '');
  if (first < 0 || shared[${BEAT}] !== beat) return;
  const frames = value.slice(first);
  let call = null;
  for (const [name] of frames) if ((call = callOf(name))) break;
  // Node's own internals (a getter, a timer's plumbing) say less than the code that called them.
  const unmarked = frames.filter(([name]) => !name.startsWith(mark));
  const code = unmarked.filter(([, file]) => !file.startsWith('node:'));
  const where = (code.length ? code : unmarked).slice(0, 3).map(([name, file, line]) => (name || '(anonymous)') + ' (' + file + ':' + line + ')');
  samples.postMessage({ at: Date.now(), call, where });
}

let stall = -1;
let sampledAt = 0;
async function check() {
  const beat = shared[${BEAT}], after = shared[${AFTER}], every = shared[${EVERY}];
  const now = Date.now();
  if (!(after > 0 && beat > 0 && now - beat >= after)) return;
  if (beat !== stall) { stall = beat; sampledAt = 0; }
  if (now - sampledAt < every) return;
  sampledAt = now;
  await sample(beat);
}
let checking = false;
const poll = setInterval(() => {
  if (checking) return;
  checking = true;
  check().catch(() => {}).finally(() => (checking = false));
}, ${POLL_MS});
port.on('close', () => {
  clearInterval(poll);
  samples.close();
});
port.postMessage('ready');
`;

class Sampler {
  private readonly shared = new Float64Array(new SharedArrayBuffer(3 * Float64Array.BYTES_PER_ELEMENT));
  /** Where the program's samples arrive (a new port with each start). */
  private port!: MessagePort;
  private program!: SideProgram;
  private restart: NodeJS.Timeout | undefined;
  private closed = false;
  private readonly beat: NodeJS.Timeout;
  private readonly kept: StallSample[] = [];
  private readonly holders = new Map<object, StallSamplingOptions>();
  /** Settles when the first program can take samples (or never will). */
  readonly ready: Promise<void>;

  constructor() {
    this.shared[BEAT] = Date.now();
    this.beat = setInterval(() => (this.shared[BEAT] = Date.now()), HEARTBEAT_MS);
    this.beat.unref();
    this.ready = this.start();
  }

  /** Starts the program; again, a moment later, when it ends unasked (another program's error ends its thread too). */
  private start(): Promise<void> {
    const { port1, port2 } = new MessageChannel();
    const program = runOnSideThread(THREAD_SOURCE, { shared: this.shared.buffer, samples: port2, mark: MARK }, [port2]);
    this.port = port1;
    this.program = program;
    void program.ended.then(() => {
      if (this.closed || this.program !== program) return;
      program.release();
      port1.close();
      this.restart = setTimeout(() => void this.start(), RESTART_MS);
      this.restart.unref();
    });
    return new Promise((resolve) => {
      program.port.once('message', () => resolve());
      program.port.unref();
      void program.ended.then(() => resolve());
    });
  }

  hold(holder: object, opts: StallSamplingOptions): void {
    this.holders.set(holder, opts);
    this.configure();
  }

  /** Whether any holder is left. */
  release(holder: object): boolean {
    this.holders.delete(holder);
    this.configure();
    return this.holders.size > 0;
  }

  private configure(): void {
    const opts = [...this.holders.values()];
    this.shared[AFTER] = opts.length ? Math.min(...opts.map((o) => o.sampleAfterMs)) : 0;
    this.shared[EVERY] = opts.length ? Math.min(...opts.map((o) => o.sampleEveryMs)) : 0;
  }

  samples(from: number, to: number): StallSample[] {
    for (let m = receiveMessageOnPort(this.port); m; m = receiveMessageOnPort(this.port)) {
      this.kept.push(m.message as StallSample);
      if (this.kept.length > KEPT) this.kept.shift();
    }
    return this.kept.filter((s) => s.at >= from && s.at <= to);
  }

  close(): void {
    this.closed = true;
    clearTimeout(this.restart);
    clearInterval(this.beat);
    this.port.close();
    this.program.release();
  }
}

let shared: Sampler | null = null;

function inspectorUsable(): boolean {
  return isMainThread && process.features.inspector;
}

const NONE: StallSampling = { ready: Promise.resolve(), samples: () => [], close: () => {} };

/** Samples of the main thread's stalls, while the returned handle is open. */
export function sampleStalls(opts: StallSamplingOptions): StallSampling {
  if (!inspectorUsable()) return NONE;
  const sampler = (shared ??= new Sampler());
  const holder = {};
  sampler.hold(holder, opts);
  let open = true;
  return {
    ready: sampler.ready,
    samples: (from, to) => sampler.samples(from, to),
    close() {
      if (!open) return;
      open = false;
      if (!sampler.release(holder) && shared === sampler) {
        shared = null;
        sampler.close();
      }
    },
  };
}
