import { describe, expect, it } from 'vitest';
import type { RunId, ToolUseBlock } from '../../src/domain.ts';
import { FatalError } from '../../src/errors.ts';
import { ToolExecutor } from '../../src/tools/executor.ts';
import { defineTool } from '../../src/tools/types.ts';

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

  it('turns a failing tool, an unknown tool and a timeout into is_error results for the model', async () => {
    expect(await executor.execute(use('boom'), ctx())).toEqual({ status: 'ERROR', result: 'error: disk full' });
    expect(await executor.execute(use('nope'), ctx())).toEqual({ status: 'ERROR', result: 'error: unknown tool "nope"' });
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

  it('refuses two tools with one name', () => {
    expect(() => new ToolExecutor([tool('x', async () => 1), tool('x', async () => 2)], 100)).toThrow(/share a name/);
  });
});
