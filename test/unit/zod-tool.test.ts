import { describe, expect, it, vi } from 'vitest';
import { z } from 'zod';
import type { RunId, ToolUseBlock } from '../../src/domain/types.ts';
import { ConfigError } from '../../src/domain/errors.ts';
import { ToolExecutor } from '../../src/tools/executor.ts';
import { tool } from '../../src/tools/zod-tool.ts';

const ctx = { runId: 'run-1' as RunId, signal: new AbortController().signal };
const use = (input: unknown): ToolUseBlock => ({ type: 'tool_use', id: 'toolu_1', name: 'get_weather', input });

function weather(execute = vi.fn(async ({ city, days }: { city: string; days: number }) => `${city}: sunny for ${days} day(s)`)) {
  const t = tool({
    name: 'get_weather',
    description: 'Current weather in a city.',
    input: z.object({ city: z.string().min(1).describe('The city'), days: z.number().int().min(1).max(7).default(1) }),
    execute,
  });
  return { t, execute, executor: new ToolExecutor([t], 1_000) };
}

describe('tool() with a zod schema', () => {
  it('tells the model the JSON Schema of the input', () => {
    const { executor } = weather();
    expect(executor.definitions()).toEqual([
      {
        name: 'get_weather',
        description: 'Current weather in a city.',
        input_schema: {
          type: 'object',
          properties: {
            city: { type: 'string', minLength: 1, description: 'The city' },
            days: { type: 'integer', minimum: 1, maximum: 7, default: 1 },
          },
          required: ['city'],
        },
      },
    ]);
  });

  it('gives execute the parsed input, defaults applied, with the idempotency key', async () => {
    const { executor, execute } = weather();
    expect(await executor.execute(use({ city: 'Paris' }), ctx)).toEqual({ status: 'DONE', result: 'Paris: sunny for 1 day(s)' });
    expect(execute).toHaveBeenCalledWith(
      { city: 'Paris', days: 1 },
      expect.objectContaining({ idempotencyKey: 'toolu_1', runId: 'run-1' }),
    );
  });

  it('never executes an input that does not fit: the model gets an is_error result naming each failing field', async () => {
    const { executor, execute } = weather();
    expect(await executor.execute(use({ city: 42, days: 9 }), ctx)).toEqual({
      status: 'ERROR',
      result:
        'error: invalid input for get_weather: city: Invalid input: expected string, received number; days: Too big: expected number to be <=7',
    });
    expect(await executor.execute(use('Paris'), ctx)).toEqual({
      status: 'ERROR',
      // Not an object at all (arguments a provider could not parse): the executor refuses it before the schema.
      result:
        'error: the arguments are not a JSON object, so get_weather was not run; call it again with a JSON object that fits its input schema',
    });
    expect(execute).not.toHaveBeenCalled();
  });

  it('keeps idempotent and needsApproval; a needsApproval function is given the parsed input, and false for one that does not parse', async () => {
    const decide = vi.fn(({ amount }: { amount: number }) => amount > 100);
    const refund = tool({
      name: 'refund',
      description: 'Refunds an invoice.',
      input: z.object({ amount: z.coerce.number() }),
      execute: async () => 'ok',
      idempotent: false,
      needsApproval: decide,
    });
    expect(refund.idempotent).toBe(false);
    const needsApproval = refund.needsApproval as (input: unknown) => Promise<boolean>;
    expect(await needsApproval({ amount: '250' })).toBe(true);
    expect(decide).toHaveBeenCalledWith({ amount: 250 });
    expect(await needsApproval({ amount: 'lots' })).toBe(false);
    expect(tool({ name: 'always', description: 'x', input: z.object({}), execute: async () => 1, needsApproval: true }).needsApproval).toBe(
      true,
    );
    expect('needsApproval' in tool({ name: 'never', description: 'x', input: z.object({}), execute: async () => 1 })).toBe(false);
  });

  it('refuses a definition the model could not be told, naming the tool', () => {
    const define = (over: Record<string, unknown>) => () =>
      tool({ name: 'get_weather', description: 'd', input: z.object({}), execute: async () => 1, ...over } as never);
    expect(define({ name: 'get weather' })).toThrow(new ConfigError('tool name "get weather": use 1 to 64 letters, digits, "_" or "-"'));
    expect(define({ description: ' ' })).toThrow(new ConfigError('tool "get_weather": description must be a non-empty string'));
    expect(define({ input: z.string() })).toThrow(new ConfigError('tool "get_weather": input must be a zod object schema (z.object({…}))'));
    expect(define({ input: { type: 'object' } })).toThrow(
      new ConfigError('tool "get_weather": input must be a zod schema (or give a JSON Schema as inputSchema)'),
    );
    expect(define({ inputSchema: { type: 'object' } })).toThrow(
      new ConfigError('tool "get_weather": give either input (a zod schema) or inputSchema (a JSON Schema), not both'),
    );
    expect(define({ input: z.object({ when: z.date() }) })).toThrow(
      /tool "get_weather": its input schema cannot be told to the model as JSON Schema: Date cannot be represented/,
    );
  });
});

describe('tool() with a JSON Schema', () => {
  const forecast = {
    $schema: 'https://json-schema.org/draft/2020-12/schema',
    type: 'object',
    properties: { city: { type: 'string' } },
    required: ['city'],
  };

  it('tells the model the schema as given (without its dialect line) and gives execute the input as the model sent it', async () => {
    const execute = vi.fn(async (input: { city: string }) => `${input.city}: rain`);
    const decide = vi.fn((input: { city: string }) => input.city === 'Paris');
    const t = tool<{ city: string }>({
      name: 'get_forecast',
      description: 'The forecast.',
      inputSchema: forecast,
      execute,
      idempotent: false,
      concurrency: 2,
      needsApproval: decide,
    });
    const executor = new ToolExecutor([t], 1_000);
    expect(executor.definitions()).toEqual([
      {
        name: 'get_forecast',
        description: 'The forecast.',
        input_schema: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] },
      },
    ]);
    expect(
      await executor.execute({ type: 'tool_use', id: 'toolu_2', name: 'get_forecast', input: { city: 'Oslo', extra: 1 } }, ctx),
    ).toEqual({ status: 'DONE', result: 'Oslo: rain' });
    expect(execute).toHaveBeenCalledWith({ city: 'Oslo', extra: 1 }, expect.objectContaining({ idempotencyKey: 'toolu_2' }));
    expect({
      idempotent: t.idempotent,
      concurrency: t.concurrency,
      needsApproval: await (t.needsApproval as (i: unknown) => boolean)({ city: 'Paris' }),
    }).toEqual({
      idempotent: false,
      concurrency: 2,
      needsApproval: true,
    });
  });

  it('types the input unknown unless the caller names its type (checked by tsc)', async () => {
    const t = tool({
      name: 'echo',
      description: 'd',
      inputSchema: { type: 'object' },
      // @ts-expect-error the input is unknown until the tool checks it
      execute: async (input) => input.city,
    });
    expect(t.inputSchema).toEqual({ type: 'object' });
  });

  it('refuses a schema that is not of an object, naming the tool', () => {
    const define = (inputSchema: unknown) => () =>
      tool({ name: 'get_forecast', description: 'd', inputSchema: inputSchema as Record<string, unknown>, execute: async () => 1 });
    const refusal = new ConfigError(`tool "get_forecast": inputSchema must be a JSON Schema of an object ({ type: 'object', … })`);
    expect(define({ type: 'string' })).toThrow(refusal);
    expect(define([])).toThrow(refusal);
    expect(define(null)).toThrow(refusal);
  });
});
