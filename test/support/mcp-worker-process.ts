/**
 * A real worker process whose agent takes its tools from the stdio MCP test server (which it starts
 * as its own child), for crash tests. The model asks for MODEL_TOOL with MODEL_TOOL_INPUT (JSON) once
 * per run, then answers. Configured by environment: DATABASE_URL, WORKER_NAME, LEASE_SECONDS, and the
 * MCP_TEST_* variables of the server (passed on to it).
 */
import { fileURLToPath } from 'node:url';
import { defineAgent } from '../../src/agents/define-agent.ts';
import { createRuntime } from '../../src/runtime/create-runtime.ts';
import { createLogger } from '../../src/observability/logger.ts';
import { toolThenTextLlm } from './scripted-llm.ts';

const env = Object.fromEntries(Object.entries(process.env).filter(([k, v]) => k.startsWith('MCP_TEST_') && v !== undefined)) as Record<
  string,
  string
>;
const agent = defineAgent({
  name: 'desk',
  system: 'You run the order desk.',
  tools: [],
  mcpServers: [
    {
      name: 'orders',
      command: process.execPath,
      args: [fileURLToPath(new URL('./mcp-order-server.mjs', import.meta.url))],
      env,
      connectTimeoutMs: 60_000,
    },
  ],
});
const rt = await createRuntime({
  agents: [agent],
  api: false,
  llm: toolThenTextLlm(process.env.MODEL_TOOL!, JSON.parse(process.env.MODEL_TOOL_INPUT ?? '{}')),
  logger: createLogger({ level: 'warn' }),
});
console.log(JSON.stringify({ event: 'ready' }));
process.on('SIGTERM', () => void rt.close().then(() => process.exit(0)));
