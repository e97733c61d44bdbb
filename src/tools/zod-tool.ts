/**
 * `tool()`: a tool whose input is a zod schema. The model is told the schema as JSON Schema; each
 * call's input is parsed before `execute` runs, so `execute` gets the typed, parsed value (defaults
 * applied, transforms run), and an input that does not fit is never executed: the model gets an
 * is_error result naming each failing field, and can correct itself.
 */
import { z } from 'zod';
import { ConfigError, ToolError } from '../domain/errors.ts';
import type { NeedsApproval, Tool, ToolContext } from './types.ts';

export interface ToolOptions<Schema extends z.ZodType> {
  /** What the model calls it: letters, digits, `_` and `-`, at most 64 (the Messages API's rule). */
  name: string;
  /** What the tool does and when to use it: the model decides from this text. */
  description: string;
  /** The input, as a zod schema of an object. */
  input: Schema;
  /** Runs the call. The result the model sees: a string, or a value sent as JSON. Throwing gives the model an is_error result. */
  execute(input: z.output<Schema>, context: ToolContext): Promise<unknown>;
  /** See `Tool.idempotent`. Default true. */
  idempotent?: boolean;
  /** See `Tool.needsApproval`; a function is given the parsed input. */
  needsApproval?: NeedsApproval<z.output<Schema>>;
  /** See `Tool.concurrency`: the most calls of this tool at once in one worker process. */
  concurrency?: number;
  /** See `Tool.approvalTimeoutSeconds`. */
  approvalTimeoutSeconds?: number;
}

/** A tool made by `tool()`: what the engine runs, with the zod schema it was made from. */
export interface ZodTool<Schema extends z.ZodType = z.ZodType> extends Tool<z.input<Schema>> {
  readonly input: Schema;
}

export const TOOL_NAME = /^[a-zA-Z0-9_-]{1,64}$/;

/** Each failing field with its message: `city: Invalid input: expected string, received number`. */
export function describeIssues(error: z.ZodError): string {
  return error.issues.map((i) => `${i.path.length ? i.path.join('.') : '(the input itself)'}: ${i.message}`).join('; ');
}

function jsonSchemaOf(name: string, schema: z.ZodType): Record<string, unknown> {
  let json: Record<string, unknown>;
  try {
    json = z.toJSONSchema(schema, { io: 'input' }) as Record<string, unknown>;
  } catch (e) {
    throw new ConfigError(`tool "${name}": its input schema cannot be told to the model as JSON Schema: ${(e as Error).message}`);
  }
  if (json.type !== 'object') throw new ConfigError(`tool "${name}": input must be a zod object schema (z.object({…}))`);
  const { $schema: _dialect, ...rest } = json;
  return rest;
}

export function tool<Schema extends z.ZodType>(options: ToolOptions<Schema>): ZodTool<Schema> {
  const { name, description, input, execute, idempotent, needsApproval, concurrency, approvalTimeoutSeconds } = options;
  if (typeof name !== 'string' || !TOOL_NAME.test(name)) {
    throw new ConfigError(`tool name ${JSON.stringify(name)}: use 1 to 64 letters, digits, "_" or "-"`);
  }
  if (typeof description !== 'string' || !description.trim()) throw new ConfigError(`tool "${name}": description must be a non-empty string`);
  if (typeof (input as Partial<z.ZodType> | undefined)?.safeParseAsync !== 'function') {
    throw new ConfigError(`tool "${name}": input must be a zod schema`);
  }
  if (typeof execute !== 'function') throw new ConfigError(`tool "${name}": execute must be a function`);
  if (concurrency !== undefined && (!Number.isInteger(concurrency) || concurrency < 1)) {
    throw new ConfigError(`tool "${name}": concurrency must be a whole number of at least 1`);
  }
  const parse = (raw: unknown) => input.safeParseAsync(raw);
  // Like any tool's, it is given the input as the model sent it; an input that does not parse never runs.
  const onParsed = (decide: (input: z.output<Schema>) => boolean | Promise<boolean>) => async (raw: unknown) => {
    const parsed = await parse(raw);
    return parsed.success && (await decide(parsed.data));
  };
  return {
    name,
    description,
    inputSchema: jsonSchemaOf(name, input),
    input,
    ...(idempotent === undefined ? {} : { idempotent }),
    ...(concurrency === undefined ? {} : { concurrency }),
    ...(needsApproval === undefined ? {} : { needsApproval: typeof needsApproval === 'function' ? onParsed(needsApproval) : needsApproval }),
    ...(approvalTimeoutSeconds === undefined ? {} : { approvalTimeoutSeconds }),
    async execute(raw: unknown, context: ToolContext) {
      const parsed = await parse(raw);
      if (!parsed.success) throw new ToolError(`invalid input for ${name}: ${describeIssues(parsed.error)}`);
      return execute(parsed.data, context);
    },
  };
}
