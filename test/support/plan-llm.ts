/**
 * A model that follows the plan written in its run's input: `{"plan": [{"name", "input"}, …]}` asks for
 * those tool calls one turn each, in order, then answers with the JSON array of the results it got (as
 * `{isError, content}`). Each run carries its own plan, so one model serves many runs, workers and
 * forks alike; a follow-up run's plan is its own input's (the turns after the latest user text).
 */
import type { ContentBlock, Message } from '../../src/domain/types.ts';
import { response, ScriptedLlm, usage } from './scripted-llm.ts';

export interface PlannedCall {
  name: string;
  input: Record<string, unknown>;
}

export const plan = (calls: PlannedCall[]) => JSON.stringify({ plan: calls });

/** The tool results of the current input's turns, in order. */
function resultsSince(messages: readonly Message[], from: number) {
  return messages
    .slice(from)
    .filter((m) => m.role === 'user' && Array.isArray(m.content))
    .flatMap((m) => (m.content as ContentBlock[]).filter((b) => b.type === 'tool_result'))
    .map((b) => ({ isError: b.is_error === true, content: b.content as string }));
}

export function planLlm(): ScriptedLlm {
  return new ScriptedLlm((req) => {
    let start = req.messages.length - 1;
    while (start > 0 && !(req.messages[start]!.role === 'user' && typeof req.messages[start]!.content === 'string')) start--;
    const { plan: calls } = JSON.parse(req.messages[start]!.content as string) as { plan: PlannedCall[] };
    const results = resultsSince(req.messages, start + 1);
    const next = calls[results.length];
    if (!next) return response([{ type: 'text', text: JSON.stringify(results) }], 'end_turn', usage(150, 5));
    const id = `toolu_${results.length}_${Math.random().toString(36).slice(2, 10)}`;
    return response([{ type: 'tool_use', id, name: next.name, input: next.input }], 'tool_use', usage(100, 20));
  });
}
