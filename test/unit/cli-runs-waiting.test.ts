import { describe, expect, it } from 'vitest';
import { waitingActions } from '../../src/cli/runs-waiting.ts';

const RUN = '6f1c0a52-9d0e-4c55-8f0f-1c2b3a4d5e6f';
const now = new Date('2026-01-01T12:00:00.000Z');

describe('runs show of a WAITING run: what a person can do', () => {
  it('approval: approve or deny each call, and when undecided calls are denied', () => {
    const text = waitingActions(
      RUN,
      {
        kind: 'approval',
        since: '2026-01-01T11:59:00.000Z',
        toolCalls: [
          { toolUseId: 'toolu_a', toolName: 'close_ticket', input: { ticketId: 'ACME-105' } },
          { toolUseId: 'toolu_b', toolName: 'refund', input: {} },
        ],
        expiresAt: '2026-01-01T14:00:00.000Z',
      },
      now,
    );
    expect(text).toBe(
      [
        '',
        'what you can do:',
        '  close_ticket (toolu_a) waits to be approved:',
        `    durable-agent runs approve ${RUN} toolu_a                # run it`,
        `    durable-agent runs deny ${RUN} toolu_a --reason '<why>'  # do not run it; the model is told why`,
        '  refund (toolu_b) waits to be approved:',
        `    durable-agent runs approve ${RUN} toolu_b                # run it`,
        `    durable-agent runs deny ${RUN} toolu_b --reason '<why>'  # do not run it; the model is told why`,
        '  undecided calls are denied ("approval timed out") at 2026-01-01T14:00:00.000Z (in 2h)',
        '',
      ].join('\n'),
    );
  });

  it('decision: complete, approve or deny, each saying what it means', () => {
    const text = waitingActions(
      RUN,
      {
        kind: 'decision',
        since: '2026-01-01T11:59:00.000Z',
        toolCalls: [{ toolUseId: 'toolu_c', toolName: 'charge', input: { amount: 5 } }],
      },
      now,
    );
    expect(text).toContain('  charge (toolu_c) was cut off when its worker stopped, and it is not safe to run twice: did it happen?\n');
    expect(text).toContain(
      `    durable-agent runs complete ${RUN} toolu_c --result '<its result>'  # it did: the model gets this as its result\n`,
    );
    expect(text).toContain(`    durable-agent runs approve ${RUN} toolu_c                           # it did not: run it again\n`);
    expect(text).toContain(
      `    durable-agent runs deny ${RUN} toolu_c --reason '<why>'             # do not run it; the model is told it may or may not have happened, and why\n`,
    );
  });

  it('timer: nothing to do but wait, or cancel; commands keep the --url they were given, quoted for the shell', () => {
    const text = waitingActions(
      RUN,
      {
        kind: 'timer',
        since: '2026-01-01T11:59:00.000Z',
        toolCalls: [{ toolUseId: 'toolu_d', toolName: 'sleep', input: { seconds: 300 } }],
        wakeAt: '2026-01-01T12:03:00.000Z',
      },
      now,
      'http://127.0.0.1:9090',
    );
    expect(text).toBe(
      [
        '',
        'what you can do:',
        '  nothing: it sleeps (sleep toolu_d) until 2026-01-01T12:03:00.000Z (in 3m) and then continues by itself',
        `    durable-agent runs cancel ${RUN} --url http://127.0.0.1:9090  # or stop it now`,
        '',
      ].join('\n'),
    );
    const odd = waitingActions(
      RUN,
      { kind: 'decision', since: now.toISOString(), toolCalls: [{ toolUseId: "it's odd", toolName: 't', input: null }] },
      now,
    );
    expect(odd).toContain(`durable-agent runs approve ${RUN} 'it'\\''s odd'`);
  });
});
