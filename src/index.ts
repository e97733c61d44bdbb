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
 * The parts (`startRuntime` with a Config, `RunStore`, `Worker`) stay available for custom wiring.
 */
export { createRuntime, type AgentRuntime, type CreateRuntimeOptions, type RuntimeEvent } from './runtime/create-runtime.ts';
export { defineAgent, type Agent, type DefineAgentOptions } from './agents/define-agent.ts';
export { tool, type ToolOptions, type ZodTool } from './tools/zod-tool.ts';
export type { CreateRunInput, ForkRunInput, ListRunsInput, RunPage, Runs, WaitOptions } from './runs/runs.ts';
export { loadConfig, type Config } from './config/environment.ts';
export { startRuntime, type Runtime, type RuntimeOptions, type AgentOptions } from './runtime/start-runtime.ts';
export { defineTool, type NeedsApproval, type Tool, type ToolContext } from './tools/types.ts';
export type { McpHttpServer, McpServerOptions, McpStdioServer, McpToolOverride } from './tools/mcp-config.ts';
export type { EngineEvents } from './ports/engine-events.ts';
export type { LlmClient, LlmCallOptions, LlmRequest, LlmResponse, ToolDefinition } from './llm/types.ts';
export { anthropic, openAiCompatible, type AnthropicOptions, type OpenAiCompatibleOptions } from './llm/factories.ts';
export type { Logger } from './observability/logger.ts';
export type { AuthenticateHook, AuthRequest } from './api/auth.ts';
export type { Run, RunId, RunStatus, TerminalStatus, Step, StepKind, StepStatus, Message, ContentBlock, Usage, ForkPoint, BudgetKind } from './domain/types.ts';
export type { Decision, PendingToolCall, Waiting, WaitingKind } from './domain/types.ts';
export type { Decided } from './store/decisions.ts';
export { sleepTool, SLEEP_TOOL_NAME } from './tools/sleep-tool.ts';
export {
  ConfigError,
  ConflictError,
  DurableAgentError,
  EncryptionError,
  FatalError,
  InputError,
  LeaseLostError,
  LlmError,
  NotFoundError,
  ToolError,
  WaitTimeoutError,
} from './domain/errors.ts';
export { RunStore } from './store/run-store.ts';
export { Worker } from './engine/worker.ts';
export { foldEvents, EventFold, type RunFold, type StepText } from './events/fold.ts';
export { followRun, FollowRunError, type FollowRunOptions } from './events/follow.ts';
export {
  RUN_EVENT_TYPES,
  type AbandonReason,
  type RunEvent,
  type RunEventData,
  type RunEventType,
  type UnknownRunEvent,
} from './events/protocol.ts';
export { livenessSession, leaseOnlyLiveness, type LivenessSessionOptions } from './leases/liveness-session.ts';
