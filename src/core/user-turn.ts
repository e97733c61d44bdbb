/** The user's next turn added to a conversation. Pure: no I/O. */
import type { ContentBlock, Message } from '../domain/types.ts';

/** A run's input: text, or content blocks (text, images, documents). */
export type RunInput = string | readonly ContentBlock[];

/**
 * `history` followed by the user's `input`. A history that ends on a user turn (tool results the
 * model never answered) takes the input into that turn: the Messages API wants the roles to alternate.
 */
export function withUserInput(history: readonly Message[], input: RunInput): Message[] {
  const content: string | ContentBlock[] = typeof input === 'string' ? input : [...input];
  const last = history.at(-1);
  if (last?.role !== 'user') return [...history, { role: 'user', content }];
  const blocks: ContentBlock[] = typeof last.content === 'string' ? [{ type: 'text', text: last.content }] : last.content;
  const added: ContentBlock[] = typeof content === 'string' ? [{ type: 'text', text: content }] : content;
  return [...history.slice(0, -1), { role: 'user', content: [...blocks, ...added] }];
}
