import * as ai6 from 'ai';
import * as ai7 from 'ai-7';
import type { UIMessage, UIMessageChunk } from 'ai';
import { describe, expect, it } from 'vitest';
import { EventFold, foldEvents } from '../../src/events/fold.ts';
import { UiStreamMapper } from '../../src/events/ui-stream.ts';

let id = 0;
const e = (type: string, data: Record<string, unknown>) => ({ id: ++id, type, data });
const delta = (seq: number, attempt: number, text: string) => e('text.delta', { seq, attempt, text });

describe('foldEvents', () => {
  it('keeps, per model step, the text of its latest attempt that was not abandoned', () => {
    const events = [
      e('run.started', { worker: 'a', attempt: 1 }),
      e('step.started', { seq: 1, kind: 'MODEL', attempt: 1 }),
      delta(1, 1, 'Let me '),
      delta(1, 1, 'look.'),
      e('step.finished', { seq: 1, kind: 'MODEL', status: 'DONE', latencyMs: 5 }),
      e('step.started', { seq: 3, kind: 'MODEL', attempt: 1 }),
      delta(3, 1, 'Overdue are ACME-9'),
      e('attempt.abandoned', { seq: 3, attempt: 1, reason: 'retry' }),
      delta(3, 1, ' late chunk of the void attempt'),
      delta(3, 2, 'The answer '),
      delta(3, 2, 'is ACME-101.'),
      e('run.finished', { status: 'SUCCEEDED', output: 'The answer is ACME-101.', error: null, stopReason: 'end_turn' }),
    ];
    const fold = foldEvents(events);
    expect(fold.steps).toEqual([
      { seq: 1, attempt: 1, text: 'Let me look.' },
      { seq: 3, attempt: 2, text: 'The answer is ACME-101.' },
    ]);
    expect(fold.text).toBe('The answer is ACME-101.');
    expect(fold.finished?.status).toBe('SUCCEEDED');
    expect(fold.lastId).toBe(events.at(-1)!.id);
  });

  it('an abandoned attempt leaves its step empty until the next one streams; replayed ids change nothing; the latest model step is the text', () => {
    const fold = new EventFold();
    const a = delta(1, 1, 'void');
    fold.add(a).add(e('attempt.abandoned', { seq: 1, attempt: 1, reason: 'takeover' }));
    expect(fold.result.text).toBe('');
    fold.add(a);
    expect(fold.result.text).toBe('');
    fold.add(delta(1, 2, 'kept'));
    expect(fold.result.text).toBe('kept');
    fold.add(e('step.started', { seq: 3, kind: 'MODEL', attempt: 1 }));
    expect(fold.result.text).toBe('');
  });
});

describe('the UI message stream mapping', () => {
  it('skips the deltas of an attempt it already knows to be abandoned, and starts the message over when it learns it late', () => {
    const replay = new UiStreamMapper('run-1').map([
      e('step.started', { seq: 1, kind: 'MODEL', attempt: 1 }),
      delta(1, 1, 'void'),
      e('attempt.abandoned', { seq: 1, attempt: 1, reason: 'retry' }),
      delta(1, 2, 'kept'),
    ]);
    expect(JSON.stringify(replay)).not.toContain('void');
    expect(replay.filter((c) => c.type === 'text-delta').map((c) => c.delta)).toEqual(['kept']);

    const live = new UiStreamMapper('run-2');
    live.map([e('step.started', { seq: 1, kind: 'MODEL', attempt: 1 }), delta(1, 1, 'void')]);
    const after = live.map([e('attempt.abandoned', { seq: 1, attempt: 1, reason: 'takeover' })]);
    expect(after).toEqual([{ type: 'start', messageId: 'run-2-1' }, { type: 'start-step' }]);
  });

  it("maps thinking to reasoning parts before the text, drops an abandoned attempt's, and leaves it out of the folded text", () => {
    const thinking = (seq: number, attempt: number, text: string) => e('thinking.delta', { seq, attempt, text });
    const events = [
      e('step.started', { seq: 1, kind: 'MODEL', attempt: 1 }),
      thinking(1, 1, 'void thought'),
      e('attempt.abandoned', { seq: 1, attempt: 1, reason: 'retry' }),
      thinking(1, 2, 'Look it '),
      thinking(1, 2, 'up.'),
      delta(1, 2, 'It is a bird.'),
    ];
    const chunks = new UiStreamMapper('r').map(events);
    expect(JSON.stringify(chunks)).not.toContain('void');
    expect(chunks.filter((c) => c.type.startsWith('reasoning') || c.type.startsWith('text'))).toEqual([
      { type: 'reasoning-start', id: 'r1.2' },
      { type: 'reasoning-delta', id: 'r1.2', delta: 'Look it ' },
      { type: 'reasoning-delta', id: 'r1.2', delta: 'up.' },
      { type: 'reasoning-end', id: 'r1.2' },
      { type: 'text-start', id: 't1.2' },
      { type: 'text-delta', id: 't1.2', delta: 'It is a bird.' },
    ]);
    expect(foldEvents(events).text).toBe('It is a bird.');
  });

  it('maps tools and a failed run', () => {
    const chunks = new UiStreamMapper('r').map([
      e('step.started', { seq: 1, kind: 'MODEL', attempt: 1 }),
      e('tool.started', { seq: 2, toolUseId: 'toolu_1', toolName: 'lookup', input: { id: 7 } }),
      e('tool.finished', { seq: 2, toolUseId: 'toolu_1', isError: true, output: 'no such id' }),
      e('run.finished', { status: 'FAILED', output: null, error: 'budget exhausted', stopReason: null }),
    ]);
    expect(chunks.map((c) => c.type)).toEqual([
      'start',
      'start-step',
      'tool-input-available',
      'tool-output-error',
      'finish-step',
      'error',
      'finish',
    ]);
    expect(chunks[2]).toMatchObject({ toolCallId: 'toolu_1', toolName: 'lookup', input: { id: 7 }, dynamic: true });
    expect(chunks.at(-2)).toEqual({ type: 'error', errorText: 'budget exhausted' });
  });

  // The AI SDK's current major (7) and the one before (6): their readers of the UI message stream.
  it.each([
    ['6', ai6.readUIMessageStream],
    ['7', ai7.readUIMessageStream as unknown as typeof ai6.readUIMessageStream],
  ])('shows calls waiting for a person as tool approval requests that the AI SDK %s reads as such', async (_, readUIMessageStream) => {
    const call = { toolUseId: 'toolu_9', toolName: 'close_ticket', input: { ticketId: 'ACME-101', resolution: 'fixed' } };
    const chunks = new UiStreamMapper('r').map([
      e('step.started', { seq: 1, kind: 'MODEL', attempt: 1 }),
      delta(1, 1, 'Closing it.'),
      e('step.finished', { seq: 1, kind: 'MODEL', status: 'DONE', latencyMs: 5 }),
      e('run.waiting', { kind: 'approval', toolCalls: [call], wakeAt: null, expiresAt: null }),
      e('run.resumed', { kind: 'approval', toolCalls: [call] }),
      e('tool.started', { seq: 2, ...call }),
      e('tool.finished', { seq: 2, toolUseId: 'toolu_9', isError: false, output: 'closed' }),
    ]);
    expect(chunks.filter((c) => c.toolCallId === 'toolu_9').map((c) => c.type)).toEqual([
      'tool-input-available',
      'tool-approval-request',
      'tool-output-available',
    ]);

    // Read by the AI SDK up to the wait: the call is a part awaiting approval, under the id the decision route takes.
    const upToWait = chunks.slice(0, chunks.findIndex((c) => c.type === 'tool-approval-request') + 1);
    let last: UIMessage | undefined;
    const stream = new ReadableStream<UIMessageChunk>({
      start(controller) {
        for (const c of upToWait) controller.enqueue(c as unknown as UIMessageChunk);
        controller.close();
      },
    });
    for await (const message of readUIMessageStream({ stream, terminateOnError: true })) last = message;
    const part = last!.parts.find((p) => p.type === 'dynamic-tool') as { state: string; toolCallId: string; approval?: { id: string } };
    expect(part).toMatchObject({ state: 'approval-requested', toolCallId: 'toolu_9', approval: { id: 'toolu_9' } });
  });
});
