/**
 * durable-agent as a library: start a runtime with your own tools and prompt, or use the parts.
 *
 *   import { loadConfig, startRuntime, defineTool } from 'durable-agent';
 *   const runtime = await startRuntime(loadConfig(), { api: true, worker: true, agent: { system, tools } });
 */
export { loadConfig, type Config } from './config.ts';
export { startRuntime, type Runtime, type RuntimeOptions, type AgentOptions } from './runtime.ts';
export { defineTool, type Tool, type ToolContext } from './tools/types.ts';
export type { LlmClient, LlmRequest, LlmResponse, ToolDefinition } from './llm/types.ts';
export type { Run, RunId, RunStatus, Step, StepKind, StepStatus, Message, ContentBlock, Usage } from './domain.ts';
export { LeaseLostError, LlmError, ToolError, FatalError, InputError, DurableAgentError } from './errors.ts';
export { RunStore } from './store/run-store.ts';
export { Worker } from './engine/worker.ts';
