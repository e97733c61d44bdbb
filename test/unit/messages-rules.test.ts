import { describe, expect, it } from 'vitest';
import type { Message } from '../../src/domain/types.ts';
import { messagesApiViolations } from '../support/messages-rules.ts';

const user = (content: Message['content']): Message => ({ role: 'user', content });
const assistant = (content: Message['content']): Message => ({ role: 'assistant', content });
const use = (id: string) => ({ type: 'tool_use', id, name: 't', input: {} });
const result = (id: string) => ({ type: 'tool_result', tool_use_id: id, content: 'r' });
const text = (t: string) => ({ type: 'text', text: t });

describe('messagesApiViolations', () => {
  it('accepts a valid conversation, including a paused assistant turn sent back last', () => {
    expect(
      messagesApiViolations([
        user('q'),
        assistant([use('a'), use('b')]),
        user([result('a'), result('b'), text('also')]),
        assistant([text('part')]),
      ]),
    ).toEqual([]);
  });

  it.each([
    ['an empty list', [], /no messages/],
    ['an assistant first', [assistant([text('x')])], /first message is not from the user/],
    ['two user messages in a row', [user('a'), user('b')], /follows another user message/],
    ['empty assistant content', [user('q'), assistant([]), user('x')], /has empty content/],
    ['an empty text block', [user('q'), assistant([text('')])], /empty text block/],
    ['an unanswered tool_use', [user('q'), assistant([use('a')])], /not answered/],
    [
      'results out of tool_use order',
      [user('q'), assistant([use('a'), use('b')]), user([result('b'), result('a')])],
      /do not answer .* in order/,
    ],
    ['a missing result', [user('q'), assistant([use('a'), use('b')]), user([result('a')])], /do not answer/],
    ['a result answered twice', [user('q'), assistant([use('a')]), user([result('a'), result('a')])], /do not answer/],
    ['text before the results', [user('q'), assistant([use('a')]), user([text('hi'), result('a')])], /do not come first|do not answer/],
    ['a result for no tool_use', [user('q'), assistant([text('x')]), user([result('z')])], /do not answer/],
    ['a reused id', [user('q'), assistant([use('a')]), user([result('a')]), assistant([use('a')]), user([result('a')])], /used before/],
  ] as [string, Message[], RegExp][])('refuses %s', (_what, messages, problem) => {
    expect(messagesApiViolations(messages).join('\n')).toMatch(problem);
  });
});
