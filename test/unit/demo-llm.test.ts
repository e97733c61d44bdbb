import { describe, expect, it } from 'vitest';
import { textOf, type Message, type ToolUseBlock } from '../../src/domain/types.ts';
import { LlmError } from '../../src/domain/errors.ts';
import { askedFor, DEMO_LABEL, DEMO_STREAM_CHUNKS, DemoLlmClient, pickTool, streamChunks, toolInput } from '../../src/demo/demo-llm.ts';
import type { LlmRequest, ToolDefinition } from '../../src/llm/types.ts';

const listTickets: ToolDefinition = {
  name: 'list_tickets',
  description: 'List support tickets, optionally only the overdue ones of one customer.',
  input_schema: { type: 'object', properties: { customer: { type: 'string' }, overdue: { type: 'boolean' } } },
};
const getTicket: ToolDefinition = {
  name: 'get_ticket',
  description: 'Get one ticket with its history.',
  input_schema: { type: 'object', properties: { ticket_id: { type: 'string' } }, required: ['ticket_id'] },
};
const tools = [getTicket, listTickets];
const question = 'Which acme tickets are overdue?';

function requestWith(messages: Message[]): LlmRequest {
  return { model: 'demo', maxTokens: 1024, system: 'You help a support team.', messages, tools };
}
const demo = new DemoLlmClient({ latencyMs: 0 });

describe('DemoLlmClient', () => {
  it('calls list_tickets for the overdue question, the same way every time, with a fresh tool_use id', async () => {
    const request = requestWith([{ role: 'user', content: question }]);
    const first = await demo.send(request);
    const again = await demo.send(request);
    expect(first.stopReason).toBe('tool_use');
    expect(first.content).toEqual([
      { type: 'tool_use', id: expect.stringMatching(/^toolu_demo_/), name: 'list_tickets', input: { customer: 'acme', overdue: true } },
    ]);
    expect({ ...again, id: null, content: [{ ...again.content[0], id: null }] }).toEqual({
      ...first,
      id: null,
      content: [{ ...first.content[0], id: null }],
    });
    expect((again.content[0] as ToolUseBlock).id).not.toBe((first.content[0] as ToolUseBlock).id);
    expect(first.usage.inputTokens).toBeGreaterThan(20);
    expect(first.usage.outputTokens).toBeGreaterThan(5);
    expect(first.usage.cacheReadInputTokens + first.usage.cacheCreationInputTokens).toBe(0);
    expect(first.attempts).toBe(1);
  });

  it('answers from the tool result with an end_turn text', async () => {
    const first = await demo.send(requestWith([{ role: 'user', content: question }]));
    const use = first.content[0] as ToolUseBlock;
    const result = JSON.stringify([
      { id: 'ACME-12', title: 'Login fails on Safari', due: '2025-01-03' },
      { id: 'ACME-15', title: 'Invoice shows wrong VAT', due: '2025-01-05' },
    ]);
    const second = await demo.send(
      requestWith([
        { role: 'user', content: question },
        { role: 'assistant', content: first.content },
        { role: 'user', content: [{ type: 'tool_result', tool_use_id: use.id, content: result }] },
      ]),
    );
    expect(second.stopReason).toBe('end_turn');
    const text = textOf(second.content);
    expect(text.startsWith(DEMO_LABEL)).toBe(true);
    expect(text).toContain('ACME-12 Login fails on Safari');
    expect(text).toContain('ACME-15');
  });

  it('quotes a result that is not JSON, and reports a tool error', async () => {
    const base: Message[] = [
      { role: 'user', content: question },
      { role: 'assistant', content: [{ type: 'tool_use', id: 't1', name: 'list_tickets', input: {} }] },
    ];
    const plain = await demo.send(
      requestWith([...base, { role: 'user', content: [{ type: 'tool_result', tool_use_id: 't1', content: 'no tickets today' }] }]),
    );
    expect(textOf(plain.content)).toContain('no tickets today');
    const failed = await demo.send(
      requestWith([...base, { role: 'user', content: [{ type: 'tool_result', tool_use_id: 't1', content: 'db down', is_error: true }] }]),
    );
    expect(textOf(failed.content)).toMatch(/error: db down/);
    // Results written as "error: …" (a denied call, a tool's own error) read "error:" once.
    const denied = await demo.send(
      requestWith([
        ...base,
        {
          role: 'user',
          content: [
            { type: 'tool_result', tool_use_id: 't1', content: 'error: not run: the user denied this call (reason: no)', is_error: true },
          ],
        },
      ]),
    );
    expect(textOf(denied.content)).toContain('The tool reported an error: not run: the user denied this call (reason: no)');
  });

  it('says it is the demo model when no tool fits', async () => {
    const response = await demo.send({ ...requestWith([{ role: 'user', content: 'Write me a poem about autumn' }]), tools: [] });
    expect(response.stopReason).toBe('end_turn');
    expect(textOf(response.content)).toMatch(/^\[demo model\] .*demo model/);
  });

  it('waits its latency, and an abort ends the wait as an LlmError', async () => {
    const slow = new DemoLlmClient({ latencyMs: 60_000 });
    const controller = new AbortController();
    const pending = slow.send(requestWith([{ role: 'user', content: question }]), { signal: controller.signal });
    controller.abort();
    const error = await pending.catch((e: unknown) => e);
    expect(error).toBeInstanceOf(LlmError);
    expect(error).toMatchObject({ status: -1 });
  });
});

describe('DemoLlmClient streaming', () => {
  function recorded(latencyMs: number) {
    const events: string[] = [];
    const client = new DemoLlmClient({ latencyMs, sleeper: { sleep: async (ms) => void events.push(`sleep ${ms}`) } });
    return { events, client };
  }

  it('streams its text in a few chunks spread over its latency, joining to the final text', async () => {
    const { events, client } = recorded(800);
    const texts: string[] = [];
    const response = await client.send(
      { ...requestWith([{ role: 'user', content: 'Write me a poem about autumn' }]), tools: [] },
      {
        onText: (text, attempt) => {
          expect(attempt).toBe(1);
          texts.push(text);
          events.push('text');
        },
      },
    );
    expect(texts).toHaveLength(DEMO_STREAM_CHUNKS);
    expect(texts.join('')).toBe(textOf(response.content));
    expect(events).toEqual(['sleep 200', 'text', 'sleep 200', 'text', 'sleep 200', 'text', 'sleep 200', 'text']);
  });

  it('streams no text for a tool call, which arrives whole after the latency', async () => {
    const { events, client } = recorded(800);
    const texts: string[] = [];
    const response = await client.send(requestWith([{ role: 'user', content: question }]), { onText: (t) => texts.push(t) });
    expect(response.stopReason).toBe('tool_use');
    expect(texts).toEqual([]);
    expect(events).toEqual(['sleep 800']);
  });

  it('stops streaming when aborted mid-answer', async () => {
    const controller = new AbortController();
    const texts: string[] = [];
    const slow = new DemoLlmClient({ latencyMs: 60_000 });
    const pending = slow.send(
      { ...requestWith([{ role: 'user', content: 'Write me a poem' }]), tools: [] },
      { signal: controller.signal, onText: (t) => texts.push(t) },
    );
    controller.abort();
    await expect(pending).rejects.toMatchObject({ status: -1, type: 'aborted' });
    expect(texts).toEqual([]);
  });

  it('cuts text at word boundaries into at most the asked number of pieces', () => {
    expect(streamChunks('one two three four five', 4)).toEqual(['one two ', 'three four ', 'five']);
    expect(streamChunks('  lead and trail  ', 2)).toEqual(['  lead and ', 'trail  ']);
    expect(streamChunks('single', 4)).toEqual(['single']);
    expect(streamChunks('   ', 4)).toEqual(['   ']);
  });
});

describe('pickTool', () => {
  it('matches words of the input against tool names, descriptions and inputs', () => {
    expect(pickTool(question, tools)?.name).toBe('list_tickets');
    expect(pickTool('show ticket ACME-12', tools)?.name).toBe('get_ticket');
    expect(pickTool('What is the weather?', tools)).toBeNull();
    expect(pickTool(question, [])).toBeNull();
  });

  it('comments when asked to comment, with the text the user quoted or said', () => {
    const comment: ToolDefinition = {
      name: 'add_ticket_comment',
      description: 'Adds a comment to a ticket. Use only when the user asks for it.',
      input_schema: { type: 'object', properties: { ticketId: { type: 'string' }, body: { type: 'string' } } },
    };
    const all = [getTicket, listTickets, comment];
    for (const [asked, body] of [
      ['Add a comment to ACME-101 saying the fix is deployed.', 'the fix is deployed'],
      ['Please comment on ACME-102: "customer called back"', 'customer called back'],
    ] as const) {
      expect(pickTool(asked, all)?.name).toBe('add_ticket_comment');
      expect(toolInput(asked, comment)).toEqual({ ticketId: asked.match(/ACME-\d+/)![0], body });
    }
    // Without words for the comment, none is invented (the tool then names the missing field).
    expect(toolInput('comment on ACME-7', comment)).toEqual({ ticketId: 'ACME-7' });
    expect(pickTool('show ticket ACME-12', all)?.name).toBe('get_ticket');
  });

  it('follows its system prompt: a tool it forbids is not used, and an answer it cannot give names its instructions', async () => {
    const said = [{ role: 'user' as const, content: question }];
    const forbidden = await demo.send({ ...requestWith(said), system: 'You are terse. Never use list_tickets.' });
    expect(forbidden.content).toEqual([expect.objectContaining({ type: 'tool_use', name: 'get_ticket' })]);
    const alone = await demo.send({ ...requestWith(said), tools: [listTickets], system: 'You are terse. Never use list_tickets.' });
    expect(alone.content.some((b) => b.type === 'tool_use')).toBe(false);
    expect(textOf(alone.content)).toMatch(/cannot really answer "Which acme tickets are overdue\?"\. My instructions: "You are terse\."$/);
    expect((await demo.send(requestWith(said))).content[0]).toMatchObject({ type: 'tool_use', name: 'list_tickets' });
  });

  it('fills only what the schema asks for and the text offers', () => {
    expect(toolInput('show ticket ACME-12', getTicket)).toEqual({ ticket_id: 'ACME-12' });
    expect(toolInput('list all tickets', listTickets)).toEqual({});
    expect(toolInput('list overdue tickets', listTickets)).toEqual({ overdue: true });
  });
});

describe('the demo model asked to close a ticket or to wait', () => {
  const close: ToolDefinition = {
    name: 'close_ticket',
    description: 'Closes a ticket with a resolution.',
    input_schema: { type: 'object', properties: { ticketId: { type: 'string' }, resolution: { type: 'string' } } },
  };
  const sleep: ToolDefinition = {
    name: 'sleep',
    description: 'Waits.',
    input_schema: { type: 'object', properties: { seconds: { type: 'integer' } } },
  };
  const all = [...tools, close, sleep];

  it('closes the named ticket with the reason given as the resolution', () => {
    expect(askedFor('Close ticket acme-104 because the webhook fix shipped', all)).toEqual({
      name: 'close_ticket',
      input: { ticketId: 'ACME-104', resolution: 'the webhook fix shipped' },
    });
    expect(askedFor('please close ACME-101', all)).toEqual({
      name: 'close_ticket',
      input: { ticketId: 'ACME-101', resolution: 'Closed at the request of the user.' },
    });
    expect(askedFor('close ACME-101', tools)).toBeNull(); // without the tool, nothing special
  });

  it('sleeps for the duration named, or 5 seconds, when asked to wait or check back later', () => {
    expect(askedFor('wait 3 seconds', all)).toEqual({ name: 'sleep', input: { seconds: 3 } });
    expect(askedFor('check back in 2 minutes', all)).toEqual({ name: 'sleep', input: { seconds: 120 } });
    expect(askedFor('Check back later on the acme tickets', all)).toEqual({ name: 'sleep', input: { seconds: 5 } });
    expect(askedFor(question, all)).toBeNull();
  });
});
