/**
 * `tool()`: the one way to make a tool, from a zod schema (`input`) or a JSON Schema (`inputSchema`).
 *
 * With zod, the model is told the schema as JSON Schema; each call's input is parsed before `execute`
 * runs, so `execute` gets the typed, parsed value (defaults applied, transforms run), and an input
 * that does not fit is never executed: the model gets an is_error result naming each failing field,
 * and can correct itself.
 *
 * With a JSON Schema (one you already have, or one zod cannot express), the model is told it as given
 * and `execute` gets the input as the model sent it: typed `unknown`, or as the type argument says
 * (`tool<{ city: string }>({ … })`), which is a promise the tool checks for itself.
 */
import { z } from 'zod';
import { ConfigError, ToolError } from '../domain/errors.ts';
import type { NeedsApproval, Tool, ToolContext } from './types.ts';

interface ToolOptionsBase<Input> {
  /** What the model calls it: letters, digits, `_` and `-`, at most 64 (the Messages API's rule). */
  name: string;
  /** What the tool does and when to use it: the model decides from this text. */
  description: string;
  /** Runs the call. The result the model sees: a string, or a value sent as JSON. Throwing gives the model an is_error result. */
  execute(input: Input, context: ToolContext): Promise<unknown>;
  /** See `Tool.idempotent`. Default true. */
  idempotent?: boolean;
  /** See `Tool.needsApproval`; a function is given the input as `execute` would be. */
  needsApproval?: NeedsApproval<Input>;
  /** See `Tool.concurrency`: the most calls of this tool at once in one worker process. */
  concurrency?: number;
  /** See `Tool.approvalTimeoutSeconds`. */
  approvalTimeoutSeconds?: number;
  /** See `Tool.sandboxed`. */
  sandboxed?: boolean;
}

/** `tool()` with a zod schema: `execute` gets the parsed input, typed from the schema. */
export interface ToolOptions<Schema extends z.ZodType> extends ToolOptionsBase<z.output<Schema>> {
  /** The input, as a zod schema of an object. */
  input: Schema;
  inputSchema?: never;
}

/** `tool()` with a JSON Schema: `execute` gets the input as the model sent it. */
export interface JsonSchemaToolOptions<Input = unknown> extends ToolOptionsBase<Input> {
  /** The input, as a JSON Schema of an object (`{ type: 'object', properties: { … } }`), told to the model as it is (without `$schema`). */
  inputSchema: Record<string, unknown>;
  input?: never;
}

/** A tool made by `tool()` from a zod schema: what the engine runs, with the schema it was made from. */
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

export function tool<Schema extends z.ZodType>(options: ToolOptions<Schema>): ZodTool<Schema>;
export function tool<Input = unknown>(options: JsonSchemaToolOptions<Input>): Tool<Input>;
export function tool(options: ToolOptions<z.ZodType> | JsonSchemaToolOptions): Tool {
  const { name, description, execute, concurrency } = options;
  if (typeof name !== 'string' || !TOOL_NAME.test(name)) {
    throw new ConfigError(`tool name ${JSON.stringify(name)}: use 1 to 64 letters, digits, "_" or "-"`);
  }
  if (typeof description !== 'string' || !description.trim())
    throw new ConfigError(`tool "${name}": description must be a non-empty string`);
  if (options.input !== undefined && options.inputSchema !== undefined) {
    throw new ConfigError(`tool "${name}": give either input (a zod schema) or inputSchema (a JSON Schema), not both`);
  }
  if (typeof execute !== 'function') throw new ConfigError(`tool "${name}": execute must be a function`);
  if (concurrency !== undefined && (!Number.isInteger(concurrency) || concurrency < 1)) {
    throw new ConfigError(`tool "${name}": concurrency must be a whole number of at least 1`);
  }
  return options.inputSchema !== undefined ? jsonSchemaTool(options as JsonSchemaToolOptions) : zodTool(options as ToolOptions<z.ZodType>);
}

function optional({ idempotent, concurrency, approvalTimeoutSeconds, sandboxed }: ToolOptionsBase<unknown>) {
  return {
    ...(idempotent === undefined ? {} : { idempotent }),
    ...(sandboxed === undefined ? {} : { sandboxed }),
    ...(concurrency === undefined ? {} : { concurrency }),
    ...(approvalTimeoutSeconds === undefined ? {} : { approvalTimeoutSeconds }),
  };
}

function jsonSchemaTool(options: JsonSchemaToolOptions): Tool {
  const { name, description, inputSchema, execute, needsApproval } = options;
  if (typeof inputSchema !== 'object' || inputSchema === null || Array.isArray(inputSchema) || inputSchema.type !== 'object') {
    throw new ConfigError(`tool "${name}": inputSchema must be a JSON Schema of an object ({ type: 'object', … })`);
  }
  // The dialect line is dropped as from zod's and MCP's schemas: providers are told the schema itself.
  const { $schema: _dialect, ...schema } = inputSchema;
  return {
    name,
    description,
    inputSchema: schema,
    ...optional(options),
    ...(needsApproval === undefined ? {} : { needsApproval }),
    execute,
  };
}

function zodTool(options: ToolOptions<z.ZodType>): ZodTool {
  const { name, description, input, execute, needsApproval } = options;
  if (typeof (input as Partial<z.ZodType> | undefined)?.safeParseAsync !== 'function') {
    throw new ConfigError(`tool "${name}": input must be a zod schema (or give a JSON Schema as inputSchema)`);
  }
  const parse = (raw: unknown) => input.safeParseAsync(raw);
  // Like any tool's, it is given the input as the model sent it; an input that does not parse never runs.
  const onParsed = (decide: (input: unknown) => boolean | Promise<boolean>) => async (raw: unknown) => {
    const parsed = await parse(raw);
    return parsed.success && (await decide(parsed.data));
  };
  return {
    name,
    description,
    inputSchema: jsonSchemaOf(name, input),
    input,
    ...optional(options),
    ...(needsApproval === undefined
      ? {}
      : { needsApproval: typeof needsApproval === 'function' ? onParsed(needsApproval) : needsApproval }),
    async execute(raw: unknown, context: ToolContext) {
      const parsed = await parse(raw);
      if (!parsed.success) throw new ToolError(`invalid input for ${name}: ${describeIssues(parsed.error)}`);
      return execute(parsed.data, context);
    },
  };
}
