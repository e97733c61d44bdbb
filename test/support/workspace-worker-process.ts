/**
 * A real worker process serving an agent with a workspace, wired as a program embedding durable-agent
 * wires it (createRuntime): the plan model (plan-llm.ts), no API, WORKSPACE_ROOT and the worker's name
 * from the environment. Prints {"event":"ready"} once it claims.
 */
import { defineAgent } from '../../src/agents/define-agent.ts';
import { createRuntime } from '../../src/runtime/create-runtime.ts';
import { silentLogger } from './engine.ts';
import { planLlm } from './plan-llm.ts';

const rt = await createRuntime({
  agents: [defineAgent({ name: 'coder', system: 'You write code.', workspace: true })],
  llm: planLlm(),
  api: false,
  databaseUrl: process.env.DATABASE_URL!,
  workspaceRoot: process.env.WORKSPACE_ROOT!,
  logger: silentLogger,
});
console.log(JSON.stringify({ event: 'ready' }));
process.on('SIGTERM', () => void rt.close().then(() => process.exit(0)));
