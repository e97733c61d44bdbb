/**
 * A staged model for the dashboard's screenshots: a few scripted agent conversations over the demo
 * ticket tools (a text preamble with a tool call, parallel tool calls, a final answer built from the
 * tool results), with the latencies and the token usage of a real model (a cached prompt prefix that
 * grows turn by turn). Chosen by the run's input; anything else gets a one-line answer.
 */
import type { ContentBlock, Message, ToolResultBlock } from '../src/domain/types.ts';
import type { LlmCallOptions, LlmClient, LlmRequest, LlmResponse } from '../src/llm/types.ts';

type Turn = (results: unknown[]) => ContentBlock[];

interface Scenario {
  /** Matches the run's input. */
  match: RegExp;
  /** @unit milliseconds — each model call's latency, turn by turn (the last value repeats). */
  latencyMs: number[];
  turns: Turn[];
}

let ids = 0;
const toolUse = (name: string, input: Record<string, unknown>): ContentBlock => ({
  type: 'tool_use',
  id: `toolu_01${(++ids).toString(36).padStart(4, '0')}${Math.random().toString(36).slice(2, 12)}`,
  name,
  input,
});
const text = (t: string): ContentBlock => ({ type: 'text', text: t });

interface Ticket {
  id: string;
  title: string;
  dueDate?: string;
  priority?: string;
}

const tickets = (results: unknown[]): Ticket[] =>
  results.flatMap((r) => (Array.isArray(r) ? (r as Ticket[]) : r && typeof r === 'object' && 'id' in r ? [r as Ticket] : []));
const due = (t: Ticket) => (t.dueDate ? new Date(t.dueDate).toLocaleDateString('en-GB', { day: 'numeric', month: 'short' }) : 'no date');

const SCENARIOS: Scenario[] = [
  {
    match: /overdue/i,
    latencyMs: [1400, 2100, 3300],
    turns: [
      () => [text("I'll look up acme's overdue tickets first."), toolUse('list_tickets', { customer: 'acme', overdue: true })],
      (r) => [
        text('Three are overdue. Let me read the two most urgent in full.'),
        ...tickets(r)
          .slice(0, 2)
          .map((t) => toolUse('get_ticket', { id: t.id })),
      ],
      (r) => {
        const list = tickets(r);
        return [
          text(
            `The most urgent of acme's three overdue tickets:\n\n${list.map((t) => `• ${t.id} — ${t.title} (${t.priority ?? 'normal'}, due ${due(t)})`).join('\n')}\n\nNeither has a comment yet; ACME-102 is urgent and blocks sign-in for their whole team.`,
          ),
        ];
      },
    ],
  },
  {
    match: /comment/i,
    latencyMs: [1100, 1700, 1300],
    turns: [
      () => [toolUse('get_ticket', { id: 'ACME-102' })],
      () => [
        text('The ticket is open and urgent; adding the comment now.'),
        toolUse('add_ticket_comment', { ticketId: 'ACME-102', body: 'The SSO fix ships on Friday; we will confirm once it is live.' }),
      ],
      () => [text('Done: ACME-102 now says the SSO fix ships on Friday.')],
    ],
  },
  {
    match: /weekly/i,
    latencyMs: [2600, 4200, 60_000],
    turns: [
      () => [text('Collecting every open ticket for the report.'), toolUse('list_tickets', { status: 'open' })],
      (r) => [
        text('Reading the high-priority ones in detail.'),
        ...tickets(r)
          .filter((t) => t.priority === 'high')
          .slice(0, 3)
          .map((t) => toolUse('get_ticket', { id: t.id })),
      ],
      () => [text('Weekly report: 8 open tickets, 5 overdue, 2 urgent.')],
    ],
  },
];

const results = (messages: readonly Message[]): unknown[] => {
  const last = messages.at(-1);
  if (!last || typeof last.content === 'string') return [];
  return last.content
    .filter((b): b is ToolResultBlock => b.type === 'tool_result')
    .map((b) => {
      try {
        return JSON.parse(typeof b.content === 'string' ? b.content : '') as unknown;
      } catch {
        return null;
      }
    });
};

const sleep = (ms: number, signal?: AbortSignal) =>
  new Promise<void>((resolve, reject) => {
    const t = setTimeout(resolve, ms);
    signal?.addEventListener('abort', () => (clearTimeout(t), reject(signal.reason)), { once: true });
  });

export function stagedModel(): LlmClient {
  return {
    provider: 'staged',
    async send(req: LlmRequest, options: LlmCallOptions = {}): Promise<LlmResponse> {
      const input = typeof req.messages[0]?.content === 'string' ? req.messages[0].content : '';
      const turn = req.messages.filter((m) => m.role === 'assistant').length;
      const scenario = SCENARIOS.find((s) => s.match.test(input));
      const latency = scenario ? scenario.latencyMs[Math.min(turn, scenario.latencyMs.length - 1)]! : 900;
      await sleep(latency * (0.85 + Math.random() * 0.3), options.signal);
      const content = scenario?.turns[turn]?.(results(req.messages)) ?? [text('Nothing in the tickets answers that.')];
      const prefix = 1650 + turn * 420;
      return {
        id: `msg_${Math.random().toString(36).slice(2, 14)}`,
        model: req.model,
        content,
        stopReason: content.some((b) => b.type === 'tool_use') ? 'tool_use' : 'end_turn',
        usage: {
          inputTokens: 120 + Math.round(Math.random() * 90),
          outputTokens: Math.ceil(JSON.stringify(content).length / 3.6),
          cacheCreationInputTokens: turn === 0 ? prefix : 380 + Math.round(Math.random() * 120),
          cacheReadInputTokens: turn === 0 ? 0 : prefix - 420,
        },
        requestId: null,
        attempts: turn === 1 && /overdue/i.test(input) ? 2 : 1,
      };
    },
  };
}
