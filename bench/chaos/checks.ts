/**
 * What the chaos suite checks of every run once the chaos is over, from the database and from what
 * the model stand-in and the workers said. Pure: the suite reads, this judges.
 */
import { MODEL_TURNS } from './model.ts';

export interface StepFacts {
  seq: number;
  kind: 'MODEL' | 'TOOL';
  status: string;
  toolUseId: string | null;
  /** MODEL: the tool_use ids its reply asked for. */
  toolUses: string[];
  /** MODEL: input + cache write + output tokens (what the budget counts). */
  tokens: number;
}

export interface RunFacts {
  id: string;
  status: string;
  tokensUsed: number;
  steps: StepFacts[];
  /** Times a worker took the run up (the first claim included). */
  claims: number;
  /** Model requests made for the run, and the tokens they billed. */
  modelCalls: number;
  billedTokens: number;
  /** Executions of each tool call (by idempotency key), and keys whose effect was applied. */
  executions: Map<string, number>;
  effects: Map<string, number>;
}

export const CHECKS = [
  'terminal',
  'timeline whole',
  'tokens add up',
  'effects once per key',
  'tool runs <= claims',
  'repeated model calls <= interruptions',
] as const;
export type CheckName = (typeof CHECKS)[number];

const TERMINAL = new Set(['SUCCEEDED', 'FAILED', 'CANCELLED', 'TIMED_OUT']);

/** The checks a run fails (empty: it passed all), each with why. */
export function checkRun(r: RunFacts): { check: CheckName; why: string }[] {
  const failed: { check: CheckName; why: string }[] = [];
  const fail = (check: CheckName, why: string) => failed.push({ check, why });
  if (!TERMINAL.has(r.status)) fail('terminal', `status ${r.status}`);

  const seqs = r.steps.map((s) => s.seq);
  if (seqs.some((s, i) => s !== i + 1)) fail('timeline whole', `seqs ${seqs.join(',')}`);
  const asked = r.steps.flatMap((s) => s.toolUses);
  const tools = r.steps.filter((s) => s.kind === 'TOOL');
  const toolIds = tools.map((s) => s.toolUseId!);
  if (new Set(toolIds).size !== toolIds.length) fail('timeline whole', 'a tool call recorded twice');
  if (toolIds.some((id) => !asked.includes(id))) fail('timeline whole', 'a tool step no model step asked for');
  if (r.status === 'SUCCEEDED') {
    const models = r.steps.filter((s) => s.kind === 'MODEL').length;
    if (models !== MODEL_TURNS || asked.length !== toolIds.length)
      fail('timeline whole', `${models} model steps, ${toolIds.length}/${asked.length} tool steps`);
    if (tools.some((s) => s.status === 'STARTED')) fail('timeline whole', 'a tool call left STARTED');
  }

  const recorded = r.steps.reduce((n, s) => n + s.tokens, 0);
  // What was recorded is counted; nothing beyond what the model billed (a call paid for and recorded
  // in no step may be counted too: that is the budget being honest).
  if (r.tokensUsed < recorded || r.tokensUsed > r.billedTokens)
    fail('tokens add up', `steps ${recorded} <= used ${r.tokensUsed} <= billed ${r.billedTokens}`);

  for (const s of tools) {
    const applied = r.effects.get(s.toolUseId!) ?? 0;
    if (applied > 1 || (s.status === 'DONE' && applied !== 1))
      fail('effects once per key', `${s.toolUseId} applied ${applied} times (step ${s.status})`);
  }
  for (const [key, n] of r.executions) {
    if (!toolIds.includes(key)) fail('effects once per key', `${key} ran but is in no step`);
    // Each claim runs a tool call at most once: again only when a claim before it was interrupted.
    if (n > r.claims) fail('tool runs <= claims', `${key} ran ${n} times in ${r.claims} claims`);
  }

  const repeated = r.modelCalls - r.steps.filter((s) => s.kind === 'MODEL').length;
  if (repeated > r.claims - 1) fail('repeated model calls <= interruptions', `${repeated} repeated calls, ${r.claims - 1} interruptions`);
  return failed;
}
