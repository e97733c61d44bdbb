/**
 * The Messages API's rules for the `messages` of a request, checked the way the API checks them, so a
 * test can prove that what the engine would send is a request the API accepts:
 *
 * - the list is not empty and starts with a user message; roles alternate
 * - no message has empty content (an assistant message with no blocks is refused), and no text block is empty
 * - every tool_use of an assistant message is answered exactly once, by a tool_result in the user
 *   message right after it; those tool_result blocks come first in that message, in tool_use order
 * - a tool_result answers a tool_use of the assistant message right before it, and nothing else
 * - tool_use ids are unique in the conversation
 * - the last message may be an assistant message (a paused turn sent back to continue), but not one
 *   whose tool_use blocks are still unanswered
 */
import type { ContentBlock, Message } from '../../src/domain/types.ts';

const blocks = (m: Message): ContentBlock[] => (typeof m.content === 'string' ? [] : m.content);
const toolUseIds = (m: Message) =>
  blocks(m)
    .filter((b) => b.type === 'tool_use')
    .map((b) => String(b.id));
const toolResultIds = (m: Message) =>
  blocks(m)
    .filter((b) => b.type === 'tool_result')
    .map((b) => String(b.tool_use_id));

/** Every rule the list breaks, in words; empty when the API would accept it. */
export function messagesApiViolations(messages: readonly Message[]): string[] {
  const problems: string[] = [];
  if (messages.length === 0) return ['no messages'];
  if (messages[0]!.role !== 'user') problems.push('the first message is not from the user');
  const seen = new Set<string>();
  messages.forEach((m, i) => {
    const at = `message ${i} (${m.role})`;
    if (i > 0 && messages[i - 1]!.role === m.role) problems.push(`${at} follows another ${m.role} message`);
    if (m.content.length === 0) problems.push(`${at} has empty content`);
    if (blocks(m).some((b) => b.type === 'text' && b.text === '')) problems.push(`${at} holds an empty text block`);
    const results = toolResultIds(m);
    if (m.role === 'assistant' && results.length > 0) problems.push(`${at} holds tool_result blocks`);
    if (m.role === 'user' && results.length > 0) {
      const asked = i > 0 ? toolUseIds(messages[i - 1]!) : [];
      const leading = blocks(m)
        .slice(0, results.length)
        .every((b) => b.type === 'tool_result');
      if (!leading) problems.push(`${at}: tool_result blocks do not come first`);
      if (results.join() !== asked.join()) {
        problems.push(
          `${at}: tool_result ids [${results.join(', ')}] do not answer the tool_use ids [${asked.join(', ')}] one for one, in order`,
        );
      }
    }
    if (m.role === 'assistant') {
      for (const id of toolUseIds(m)) {
        if (seen.has(id)) problems.push(`${at}: tool_use id ${id} used before`);
        seen.add(id);
      }
      const next = messages[i + 1];
      if (toolUseIds(m).length > 0 && (!next || toolResultIds(next).length === 0))
        problems.push(`${at}: its tool_use blocks are not answered`);
    }
  });
  return problems;
}

/** Throws with every broken rule when the API would refuse `messages`. */
export function expectValidMessages(messages: readonly Message[], context = 'messages'): void {
  const problems = messagesApiViolations(messages);
  if (problems.length > 0) throw new Error(`${context} break the Messages API's rules:\n- ${problems.join('\n- ')}`);
}
