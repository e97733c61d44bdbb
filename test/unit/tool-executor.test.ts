import { describe, expect, expectTypeOf, it } from 'vitest';
import type { RunId, ToolUseBlock } from '../../src/domain/types.ts';
import { FatalError } from '../../src/domain/errors.ts';
import { createLogger, type Logger } from '../../src/observability/logger.ts';
import { capResult, ToolExecutor } from '../../src/tools/executor.ts';
import { defineTool, type ToolContext } from '../../src/tools/types.ts';
import { nextTurn } from '../support/wait-for.ts';

const use = (name: string, input: unknown = {}): ToolUseBlock => ({ type: 'tool_use', id: 'toolu_1', name, input });
const ctx = (signal = new AbortController().signal) => ({ runId: 'run-1' as RunId, signal });
const tool = (name: string, execute: (input: unknown, c: { signal: AbortSignal; idempotencyKey: string }) => Promise<unknown>) =>
  defineTool({ name, description: name, inputSchema: { type: 'object' }, execute });

describe('ToolExecutor', () => {
  const executor = new ToolExecutor(
    [
      tool('echo', async (input, c) => ({ input, key: c.idempotencyKey })),
      tool('text', async () => 'plain'),
      tool('boom', async () => {
        throw new Error('disk full');
      }),
      tool('crash', async () => {
        throw new FatalError('the worker dies');
      }),
      tool('hang', (_input, c) => new Promise((_, reject) => c.signal.addEventListener('abort', () => reject(new Error('aborted'))))),
      tool('deaf', () => new Promise(() => {})), // ignores its signal
    ],
    100,
  );

  it('returns strings as they are and other values as JSON, with the tool_use id as idempotency key', async () => {
    expect(await executor.execute(use('text'), ctx())).toEqual({ status: 'DONE', result: 'plain' });
    expect(await executor.execute(use('echo', { a: 1 }), ctx())).toEqual({ status: 'DONE', result: '{"input":{"a":1},"key":"toolu_1"}' });
  });

  it('does not run a tool on input that is not a JSON object (arguments a provider could not parse), and says why', async () => {
    const ran: unknown[] = [];
    const spy = new ToolExecutor([tool('spy', async (input) => ran.push(input))], 100);
    for (const input of ['{"q": "a"', [1, 2], null, 7]) {
      expect(await spy.execute(use('spy', input), ctx())).toEqual({
        status: 'ERROR',
        result:
          'error: the arguments are not a JSON object, so spy was not run; call it again with a JSON object that fits its input schema',
      });
    }
    expect(ran).toEqual([]);
  });

  it('turns a failing tool, an unknown tool and a timeout into is_error results for the model', async () => {
    expect(await executor.execute(use('boom'), ctx())).toEqual({ status: 'ERROR', result: 'error: disk full' });
    expect(await executor.execute(use('nope'), ctx())).toEqual({
      status: 'ERROR',
      result: 'error: tool no longer available: this agent has no tool "nope"',
    });
    expect(await executor.execute(use('hang'), ctx())).toEqual({ status: 'ERROR', result: 'error: tool hang timed out after 100 ms' });
    expect(await executor.execute(use('deaf'), ctx())).toEqual({ status: 'ERROR', result: 'error: tool deaf timed out after 100 ms' });
  });

  it('lets a FatalError and the worker giving the run up escape, recording nothing', async () => {
    await expect(executor.execute(use('crash'), ctx())).rejects.toBeInstanceOf(FatalError);
    const giveUp = new AbortController();
    const pending = executor.execute(use('hang'), ctx(giveUp.signal));
    giveUp.abort(new Error('shutting down'));
    await expect(pending).rejects.toThrow('shutting down');
  });

  it('cuts a result past the limit, with a note, to what is stored and sent, and makes it storable', async () => {
    const big = new ToolExecutor(
      [tool('big', async () => 'é'.repeat(5000)), tool('binary', async () => 'PNG\u0000\u0000\ud800')],
      100,
      2048,
    );
    const { status, result } = await big.execute(use('big'), ctx());
    expect(status).toBe('DONE');
    expect(Buffer.byteLength(result, 'utf8')).toBeLessThanOrEqual(2048);
    expect(result).toMatch(/^(é)+\n\n\[result cut: the tool returned 10000 bytes; only the first \d+ are shown above\]$/);
    expect(await big.execute(use('binary'), ctx())).toEqual({ status: 'DONE', result: 'PNG\uFFFD\uFFFD\uFFFD' });
  });

  it("gives every call a ctx.log, typed as always set: the runtime's logger with the call's context, or a silent one", async () => {
    // Strict TypeScript accepts `ctx.log.info(…)` without a check: this line fails `tsc --noEmit` if log is optional.
    expectTypeOf<ToolContext['log']>().toEqualTypeOf<Logger>();
    const logging = defineTool({
      name: 'logging',
      description: 'logs',
      inputSchema: { type: 'object' },
      execute: async (_input, c: ToolContext) => {
        c.log.info({ ticket: 'ACME-1' }, 'looked the ticket up');
        return 'logged';
      },
    });
    expect(await new ToolExecutor([logging], 100).execute(use('logging'), ctx())).toEqual({ status: 'DONE', result: 'logged' });

    const lines: string[] = [];
    const logger = createLogger({ destination: { write: (line: string) => void lines.push(line) } });
    const withLogger = new ToolExecutor([logging], 100, undefined, { logger });
    expect(await withLogger.execute(use('logging'), { ...ctx(), worker: 'w-1', seq: 3 })).toEqual({ status: 'DONE', result: 'logged' });
    expect(lines.map((l) => JSON.parse(l))).toEqual([
      expect.objectContaining({
        msg: 'looked the ticket up',
        ticket: 'ACME-1',
        run_id: 'run-1',
        worker: 'w-1',
        step_seq: 3,
        tool_use_id: 'toolu_1',
      }),
    ]);
  });

  it('refuses two tools with one name', () => {
    expect(() => new ToolExecutor([tool('x', async () => 1), tool('x', async () => 2)], 100)).toThrow(/share a name/);
  });
});

describe('capResult', () => {
  const bytes = (s: string) => Buffer.byteLength(s, 'utf8');

  it('returns a text within the limit as it is', () => {
    const s = 'x'.repeat(1024);
    expect(capResult(s, 1024)).toBe(s);
  });

  it('never cuts a character in two, whatever its width', () => {
    for (const ch of ['a', 'é', '€', '😀']) {
      for (let limit = 1024; limit < 1030; limit++) {
        const cut = capResult(ch.repeat(2000), limit);
        expect(bytes(cut)).toBeLessThanOrEqual(limit);
        expect(cut).not.toMatch(/\uFFFD/);
        const kept = cut.slice(0, cut.indexOf('\n\n[result cut'));
        expect(kept).toBe(ch.repeat(kept.length / ch.length));
        expect(cut).toContain(`only the first ${bytes(kept)} are shown`);
      }
    }
  });

  it('reads only the head of a very large result', () => {
    const cut = capResult('y'.repeat(50_000_000), 1024 * 1024);
    expect(bytes(cut)).toBeLessThanOrEqual(1024 * 1024);
    expect(cut).toContain('the tool returned 50000000 bytes');
  });
});

const limited = defineTool({
  name: 'one_at_a_time',
  description: 'x',
  inputSchema: { type: 'object' },
  concurrency: 1,
  execute: async () => 'ok',
});

describe('ToolExecutor limits', () => {
  it('refuses a turn concurrency that is not a whole number of at least 1 when made, not at the first turn of two calls', () => {
    for (const concurrency of [0, -1, 1.5, Number.NaN])
      expect(() => new ToolExecutor([], 100, undefined, { concurrency })).toThrow(/tool concurrency must be a whole number of at least 1/);
    expect(new ToolExecutor([], 100, undefined, { concurrency: 1 }).concurrency).toBe(1);
  });

  it('says which tools have a limit of their own', () => {
    const executor = new ToolExecutor([limited, tool('free', async () => 'ok')], 100);
    expect(executor.hasLimit('one_at_a_time')).toBe(true);
    expect(executor.hasLimit('free')).toBe(false);
  });
});

describe('ToolExecutor.withTools', () => {
  it('keeps the options and shares each tool limit with the executor it extends', async () => {
    const own = new ToolExecutor([limited], 100, undefined, { concurrency: 2 });
    const combined = own.withTools([tool('extra', async () => 'more')]);
    expect(combined.concurrency).toBe(2);
    expect(combined.definitions().map((d) => d.name)).toEqual(['one_at_a_time', 'extra']);

    const leave = await own.acquire('one_at_a_time', new AbortController().signal);
    let entered = false;
    const waiting = combined.acquire('one_at_a_time', new AbortController().signal).then((release) => {
      entered = true;
      return release;
    });
    await nextTurn();
    expect(entered).toBe(false); // the place taken on the old executor counts on the new one
    leave();
    (await waiting)();
    expect(entered).toBe(true);
  });
});
