/**
 * durable-agent as a library: define tools and an agent, start a runtime, create runs and wait for them.
 *
 *   import { z } from 'zod';
 *   import { createRuntime, defineAgent, tool } from 'durable-agent';
 *
 *   const weather = tool({ name: 'get_weather', description: 'Current weather in a city.',
 *     input: z.object({ city: z.string() }), execute: async ({ city }) => lookUp(city) });
 *   const helper = defineAgent({ name: 'helper', system: 'You answer briefly.', tools: [weather] });
 *   const rt = await createRuntime({ agents: [helper] });
 *   const run = await rt.runs.create({ input: 'Do I need an umbrella in Paris?' });
 *   const done = await rt.runs.wait(run.id);        // SUCCEEDED, with done.output
 *   await rt.close();
 *
 * This entry is the public path, and what it exports changes only by adding. A front end takes
 * `durable-agent/client` (browser-safe); the parts the runtime is wired from are in
 * `durable-agent/internals`, without that promise.
 */
export { createRuntime, type AgentRuntime, type CreateRuntimeOptions, type RuntimeEvent } from './runtime/create-runtime.ts';
export { defineAgent, type Agent, type DefineAgentOptions } from './agents/define-agent.ts';
export { defineSchedule, type ScheduleDefinition } from './runtime/declared-schedules.ts';
export type { Backfilled, CreateScheduleInput, SchedulesApi, UpdateScheduleInput } from './runs/schedules.ts';
export { tool, type JsonSchemaToolOptions, type ToolOptions, type ZodTool } from './tools/zod-tool.ts';
export { defineTool, type NeedsApproval, type Tool, type ToolContext } from './tools/types.ts';
export { sleepTool, SLEEP_TOOL_NAME } from './tools/sleep-tool.ts';
export { anthropic, openAiCompatible, type AnthropicOptions, type OpenAiCompatibleOptions } from './llm/factories.ts';
export { aiSdk, type AiSdkLanguageModel, type AiSdkOptions } from './llm/ai-sdk.ts';
export type { CreateRunInput, ForkRunInput, ListRunsInput, RunPage, Runs, WaitOptions } from './runs/runs.ts';
export type { Decided } from './store/decisions.ts';
export type { McpHttpServer, McpServer, McpServerOptions, McpStdioServer, McpToolOverride } from './tools/mcp-config.ts';
export type { LlmClient, LlmCallOptions, LlmRequest, LlmResponse, ToolDefinition } from './llm/types.ts';
export type { Logger } from './observability/logger.ts';
export type { AuthenticateHook, AuthRequest } from './api/auth.ts';
export type {
  Run,
  RunId,
  RunStatus,
  TerminalStatus,
  Step,
  StepKind,
  StepStatus,
  Message,
  ContentBlock,
  Usage,
  ForkPoint,
  BudgetKind,
} from './domain/types.ts';
export type { Decision, PendingToolCall, Schedule, ScheduledRun, Waiting, WaitingKind } from './domain/types.ts';
export {
  ConfigError,
  ConflictError,
  DatabaseUnavailableError,
  DurableAgentError,
  EncryptionError,
  FatalError,
  InputError,
  LeaseLostError,
  LlmError,
  NotFoundError,
  ToolError,
  UnauthorizedError,
  WaitTimeoutError,
} from './domain/errors.ts';
export * from './events/public.ts';
