/**
 * Agents: what a runtime drives runs with. An agent is a definition in code — a name, a system prompt,
 * and optionally its tools (its own, or from MCP servers), the model its runs use by default and a cap on
 * output tokens per model call.
 * Definitions are checked here once, so a mistake fails at start with one line naming it.
 */
import { z } from 'zod';
import { ConfigError } from '../domain/errors.ts';
import type { CompactionOption } from '../core/compaction.ts';
import { ModelOptionsSchema, optionsProblem } from '../llm/model-options.ts';
import type { LlmClient, ModelOptions } from '../llm/types.ts';
import { freezeMcpServers, type McpServer, type McpServerOptions, McpServersSchema } from '../tools/mcp-config.ts';
import type { Tool } from '../tools/types.ts';
import { TOOL_NAME } from '../tools/zod-tool.ts';
import { BUILTIN_TOOL_NAMES } from '../workspace/builtin-tools.ts';
import { type WorkspaceOptions, WorkspaceOptionsSchema, type WorkspaceSettings, workspaceSettings } from '../workspace/options.ts';

export interface DefineAgentOptions {
  /** How runs name it: letters, digits, `_`, `.` and `-`, at most 64, starting with a letter or digit. */
  name: string;
  /** The system prompt of every model call. */
  system: string;
  /**
   * The tools the model may call: `tool()` (zod) or `defineTool()` (JSON Schema). Default none, e.g.
   * for an agent whose tools all come from `mcpServers`.
   */
  tools?: readonly Tool[];
  /** The model its runs call when a run names none; default the runtime's DEFAULT_MODEL. */
  model?: string;
  /** `max_tokens` of each model call; default the runtime's MAX_TOKENS. */
  maxTokens?: number;
  /**
   * How the model is asked to answer: `thinking`, `temperature`, `topP`, `topK`, `stopSequences`,
   * `toolChoice`, `maxTokens` (over the agent's `maxTokens`). A run's own `modelOptions` go over these.
   */
  modelOptions?: ModelOptions;
  /**
   * When a long run has its older turns summarised: `{ atInputTokens, keepTurns, contextWindow }`
   * (default: at 80% of the model's context window, 160,000 tokens for a 200K model, keeping the last 2
   * turns; `contextWindow` for a model whose name does not tell it), or false.
   */
  compaction?: CompactionOption;
  /** A label for this definition of the agent, e.g. a release or a date. */
  version?: string;
  /**
   * The model client its runs call, e.g. `openAiCompatible({ apiKey, baseUrl, model })`; default the
   * runtime's (LLM_PROVIDER). Its `defaultModel` is the runs' model when neither they nor `model` name one.
   */
  llm?: LlmClient;
  /**
   * MCP servers whose tools the agent takes besides `tools`: `{ name, command, args? }` (stdio) or
   * `{ name, url, headers? }` (Streamable HTTP). Each worker connects to them when it starts.
   */
  mcpServers?: readonly McpServerOptions[];
  /**
   * A workspace per run: a directory its tools work in (`ctx.workspace`), saved with every step and
   * rebuilt on whichever worker drives the run next, with the built-in tools bash, read_file,
   * write_file, edit_file and list_files; commands run in a bubblewrap sandbox. `true` for the
   * defaults, or options (limits, `exclude`, `network`, `env`, `sandbox`).
   */
  workspace?: WorkspaceOptions;
}

export interface Agent {
  readonly name: string;
  readonly system: string;
  readonly tools: readonly Tool[];
  readonly model: string | null;
  readonly maxTokens: number | null;
  readonly modelOptions: ModelOptions | null;
  readonly compaction: CompactionOption | null;
  readonly version: string | null;
  readonly llm: LlmClient | null;
  readonly mcpServers: readonly McpServer[];
  readonly workspace: WorkspaceSettings | null;
}

const ToolShape = z.custom<Tool>(
  (t) => {
    const candidate = t as Partial<Tool> | null;
    return (
      typeof candidate === 'object' &&
      candidate !== null &&
      typeof candidate.name === 'string' &&
      TOOL_NAME.test(candidate.name) &&
      typeof candidate.description === 'string' &&
      typeof candidate.inputSchema === 'object' &&
      candidate.inputSchema !== null &&
      typeof candidate.execute === 'function'
    );
  },
  { message: 'must be a tool made with tool() or defineTool() (name of letters, digits, "_" or "-"; description; inputSchema; execute)' },
);

const AgentSchema = z
  .strictObject({
    name: z
      .string()
      .regex(/^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$/, 'use 1 to 64 letters, digits, "_", "." or "-", starting with a letter or digit'),
    system: z.string().refine((s) => s.trim().length > 0, 'must not be blank'),
    tools: z
      .array(ToolShape)
      .superRefine((tools, ctx) => {
        const seen = new Set<string>();
        for (const t of tools) {
          if (seen.has(t.name)) ctx.addIssue({ code: 'custom', message: `two tools are named "${t.name}"` });
          seen.add(t.name);
        }
      })
      .optional(),
    model: z.string().min(1).max(200).optional(),
    maxTokens: z.number().int().min(1).max(200_000).optional(),
    modelOptions: ModelOptionsSchema.optional(),
    compaction: z
      .union([
        z.literal(false),
        z.strictObject({
          atInputTokens: z.number().int().min(1_000).max(10_000_000).optional(),
          keepTurns: z.number().int().min(1).max(100).optional(),
          contextWindow: z.number().int().min(1_000).max(10_000_000).optional(),
        }),
      ])
      .optional(),
    version: z.string().min(1).max(200).optional(),
    llm: z
      .custom<LlmClient>(
        (c) =>
          typeof c === 'object' &&
          c !== null &&
          typeof (c as Partial<LlmClient>).send === 'function' &&
          typeof (c as Partial<LlmClient>).provider === 'string',
        'must be a model client, e.g. openAiCompatible({ apiKey, baseUrl, model }) or anthropic({ apiKey })',
      )
      .optional(),
    mcpServers: McpServersSchema.optional(),
    workspace: WorkspaceOptionsSchema.optional(),
  })
  .superRefine((a, ctx) => {
    const options = a.modelOptions;
    // Without a maxTokens here the runtime's MAX_TOKENS applies: the budget is checked against it at start.
    const problem = options && optionsProblem(options, options.maxTokens ?? a.maxTokens ?? Number.POSITIVE_INFINITY);
    if (problem) ctx.addIssue({ code: 'custom', path: problem.path.split('.'), message: problem.message });
    if (!a.workspace) return;
    const taken = (a.tools ?? []).find((t) => (BUILTIN_TOOL_NAMES as readonly string[]).includes(t.name));
    if (taken) ctx.addIssue({ code: 'custom', path: ['tools'], message: `"${taken.name}" is the name of a built-in workspace tool` });
  });

function invalid(what: string, error: z.ZodError): ConfigError {
  const first = error.issues[0]!;
  return new ConfigError(`${what}: ${first.path.length ? `${first.path.join('.')}: ` : ''}${first.message}`);
}

/** Checks an agent's definition; throws a ConfigError naming the first thing wrong with it. */
export function defineAgent(options: DefineAgentOptions): Agent {
  const name = typeof (options as Partial<DefineAgentOptions> | null)?.name === 'string' ? `agent "${options.name}"` : 'agent';
  const parsed = AgentSchema.safeParse(options);
  if (!parsed.success) throw invalid(`invalid ${name}`, parsed.error);
  const a = parsed.data;
  return Object.freeze({
    name: a.name,
    system: a.system,
    tools: Object.freeze([...(a.tools ?? [])]),
    model: a.model ?? null,
    maxTokens: a.maxTokens ?? null,
    modelOptions: a.modelOptions ? Object.freeze({ ...a.modelOptions }) : null,
    compaction: a.compaction === undefined ? null : a.compaction === false ? false : Object.freeze({ ...a.compaction }),
    version: a.version ?? null,
    llm: a.llm ?? null,
    mcpServers: freezeMcpServers(a.mcpServers ?? []),
    workspace: a.workspace ? workspaceSettings(a.workspace) : null,
  });
}

/**
 * The agents a runtime is given (from code, or the default export of a `--config` module): a
 * non-empty list of definitions with distinct names. Plain objects are checked as `defineAgent` would.
 */
export function checkAgents(value: unknown, where: string): Agent[] {
  if (!Array.isArray(value) || value.length === 0)
    throw new ConfigError(`${where}: agents must be a non-empty array of defineAgent(…) values`);
  const agents = value.map((a: unknown, i) => {
    if (typeof a !== 'object' || a === null) throw new ConfigError(`${where}: agents.${i} is not an agent definition`);
    const { name, system, tools, model, maxTokens, modelOptions, compaction, version, llm, mcpServers, workspace } = a as Record<
      string,
      unknown
    >;
    // defineAgent's result has nulls where its options had nothing; read it back as options.
    const options = Object.fromEntries(
      Object.entries({ name, system, tools, model, maxTokens, modelOptions, compaction, version, llm, mcpServers, workspace }).filter(
        ([, v]) => v != null,
      ),
    );
    try {
      return defineAgent(options as unknown as DefineAgentOptions);
    } catch (e) {
      throw e instanceof ConfigError ? new ConfigError(`${where}: ${e.message}`) : e;
    }
  });
  const names = agents.map((a) => a.name);
  const twice = names.find((n, i) => names.indexOf(n) !== i);
  if (twice) throw new ConfigError(`${where}: two agents are named "${twice}"`);
  return agents;
}
