import { describe, expect, it } from 'vitest';
import type { DecisionRecord, Waiting } from '../../src/domain/types.ts';
import { APPROVAL_TIMED_OUT, type ToolCallFacts, judgeToolCall } from '../../src/engine/tool-call-verdict.ts';
import type { PendingTool } from '../../src/core/replay.ts';

const now = new Date('2026-01-01T12:00:00Z');
const call = (startedSeq: number | null = null, name = 'close'): PendingTool => ({
  use: { type: 'tool_use', id: 'a', name, input: {} },
  startedSeq,
});
const ctx = (g: Partial<ToolCallFacts> = {}): ToolCallFacts => ({
  idempotent: true,
  timer: null,
  approval: undefined,
  crash: undefined,
  waiting: null,
  now,
  ...g,
});
const record = (
  kind: DecisionRecord['kind'],
  decision: DecisionRecord['decision'],
  extra: Partial<DecisionRecord> = {},
): DecisionRecord => ({
  toolUseId: 'a',
  kind,
  decision,
  reason: null,
  result: null,
  expiresAt: null,
  ...extra,
});

describe('judgeToolCall', () => {
  it('runs a call that needs nothing', () => {
    expect(judgeToolCall(call(), ctx())).toEqual({ type: 'run', consumeDecision: false });
    expect(judgeToolCall(call(2), ctx())).toEqual({ type: 'run', consumeDecision: false }); // idempotent: run again
  });

  it('holds a call waiting for approval until it is decided, and denies it at its timeout', () => {
    expect(judgeToolCall(call(), ctx({ approval: record('approval', null) }))).toEqual({ type: 'wait', kind: 'approval' });
    expect(judgeToolCall(call(), ctx({ approval: record('approval', 'approve') }))).toEqual({ type: 'run', consumeDecision: false });
    const denied = judgeToolCall(call(), ctx({ approval: record('approval', 'deny', { reason: 'not today' }) }));
    expect(denied).toMatchObject({ type: 'resolve', status: 'ERROR', result: expect.stringContaining('not today') });
    const expired = judgeToolCall(call(), ctx({ approval: record('approval', null, { expiresAt: new Date(now.getTime() - 1) }) }));
    expect(expired).toMatchObject({ type: 'resolve', status: 'ERROR', result: expect.stringContaining(APPROVAL_TIMED_OUT) });
  });

  it('asks a person about a non-idempotent call found started, and does what they decided', () => {
    const g = (crash?: DecisionRecord) => judgeToolCall(call(3), ctx({ idempotent: false, crash }));
    expect(g()).toEqual({ type: 'wait', kind: 'decision' });
    expect(g(record('decision', null))).toEqual({ type: 'wait', kind: 'decision' });
    expect(g(record('decision', 'approve'))).toEqual({ type: 'run', consumeDecision: true });
    expect(g(record('decision', 'deny', { reason: 'refunded' }))).toMatchObject({
      type: 'resolve',
      status: 'ERROR',
      result: expect.stringMatching(/may or may not have happened.*refunded/),
    });
    expect(g(record('decision', 'complete', { result: '{"ok":true}' }))).toEqual({
      type: 'resolve',
      status: 'DONE',
      result: '{"ok":true}',
    });
    // An approval made before the crash does not answer for the crash.
    expect(judgeToolCall(call(3), ctx({ idempotent: false, approval: record('approval', 'approve') }))).toEqual({
      type: 'wait',
      kind: 'decision',
    });
  });

  it('starts a timer, sleeps again when claimed early, and is done once the time has come', () => {
    expect(judgeToolCall(call(null, 'sleep'), ctx({ timer: 60 }))).toEqual({ type: 'sleep', wakeAt: new Date(now.getTime() + 60_000) });
    expect(judgeToolCall(call(null, 'sleep'), ctx({ timer: 'invalid input for sleep: seconds: too small' }))).toMatchObject({
      type: 'resolve',
      status: 'ERROR',
    });
    const waiting = (wakeAt: Date): Waiting => ({
      kind: 'timer',
      since: now,
      toolCalls: [{ toolUseId: 'a', toolName: 'sleep', input: { seconds: 60 } }],
      wakeAt,
      expiresAt: null,
    });
    const later = new Date(now.getTime() + 5_000);
    expect(judgeToolCall(call(2, 'sleep'), ctx({ timer: 60, waiting: waiting(later) }))).toEqual({ type: 'sleep-again', wakeAt: later });
    expect(judgeToolCall(call(2, 'sleep'), ctx({ timer: 60, waiting: waiting(now) }))).toEqual({
      type: 'resolve',
      status: 'DONE',
      result: 'slept 60 seconds',
    });
  });
});

describe('judgeToolCall after a crash in the middle of recording a denial', () => {
  it('never runs a denied call, even when its STARTED row is there', () => {
    const denied = record('approval', 'deny', { reason: 'no' });
    expect(judgeToolCall(call(2), ctx({ approval: denied }))).toMatchObject({ type: 'resolve', status: 'ERROR' });
    expect(judgeToolCall(call(2), ctx({ idempotent: false, approval: denied }))).toMatchObject({ type: 'resolve', status: 'ERROR' });
  });
});
