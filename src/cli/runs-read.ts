/** `runs list | show | steps | cancel | delete`: one API call each, printed for people or as JSON. */
import type { CancelledRun, RunJson, RunListItemJson, TimelineItem } from '../api/schemas.ts';
import type { z } from 'zod';
import { ago, type Column, cost, count, duration, oneLine, table } from './format.ts';
import { type RunsContext, type RunsSubcommand, runIdArgument, statusOption } from './runs-context.ts';
import { waitingActions } from './runs-waiting.ts';

/** A listed run; a server of an earlier release lists runs without their `agent`. */
type ListedRun = RunListItemJson & { agent?: string };
type RunPage = { runs: ListedRun[]; nextCursor: string | null };

const json = (value: unknown) => `${JSON.stringify(value, null, 2)}\n`;
const since = (iso: string, now: Date) => ago(new Date(iso), now);

export const listCommand: RunsSubcommand = {
  name: 'list',
  args: '',
  summary: 'runs, newest first',
  positionals: 0,
  options: {
    status: { type: 'string', help: `only runs in this status (QUEUED, RUNNING, SUCCEEDED, …)` },
    agent: { type: 'string', help: 'only runs of this agent' },
    limit: { type: 'string', help: 'runs per page, 1 to 100 (default 20)' },
    cursor: { type: 'string', help: 'the page after the one that printed this cursor' },
  },
  async run(ctx) {
    const status = statusOption(ctx);
    const limit = ctx.options.limit as string | undefined;
    if (limit !== undefined && !/^([1-9]\d?|100)$/.test(limit)) throw ctx.usage('--limit must be a whole number from 1 to 100');
    const query = new URLSearchParams();
    if (status) query.set('status', status);
    for (const k of ['agent', 'limit', 'cursor'] as const) if (ctx.options[k] !== undefined) query.set(k, String(ctx.options[k]));
    const page = await ctx.api().get<RunPage>(`/api/runs${query.size ? `?${query}` : ''}`);
    if (ctx.json) return (ctx.out(json(page)), 0);
    if (page.runs.length === 0) return (ctx.out('no runs\n'), 0);
    const hasAgent = page.runs.some((r) => r.agent !== undefined);
    const columns: Column<ListedRun>[] = [
      { title: 'ID', value: (r) => r.id },
      { title: 'STATUS', value: (r) => r.status },
      ...(hasAgent ? [{ title: 'AGENT', value: (r: ListedRun) => r.agent ?? '' }] : []),
      { title: 'AGE', value: (r) => since(r.createdAt, ctx.now) },
      { title: 'DURATION', value: (r) => (r.durationMs === null ? '' : duration(r.durationMs)), align: 'right' },
      { title: 'STEPS', value: (r) => count(r.stepCount), align: 'right' },
      { title: 'TOKENS', value: (r) => count(r.tokensUsed), align: 'right' },
      { title: 'COST', value: (r) => cost(r.costUsd), align: 'right' },
      { title: 'INPUT', value: (r) => oneLine(r.input, 40) },
    ];
    ctx.out(table(page.runs, columns));
    if (page.nextCursor) {
      // The next page is the same query further on: the hint keeps the filters and the page size.
      const kept = [
        status && `--status ${status}`,
        ...(['agent', 'limit'] as const).map((k) => ctx.options[k] !== undefined && `--${k} ${String(ctx.options[k])}`),
      ];
      ctx.out(`more: durable-agent runs list ${[...kept.filter(Boolean), `--cursor ${page.nextCursor}`].join(' ')}\n`);
    }
    return 0;
  },
};

function runDetails(r: RunJson & { agent?: string }, now: Date, url: string | undefined): string {
  const rows: [string, string][] = [
    ['id', r.id],
    ['status', r.cancelRequested && r.status === 'RUNNING' ? 'RUNNING (cancel requested)' : r.status],
    ...(r.agent !== undefined ? [['agent', r.agent] as [string, string]] : []),
    ['model', r.model],
    ['tenant', r.tenant],
    ['created', `${r.createdAt} (${since(r.createdAt, now)})`],
    [
      'finished',
      r.finishedAt
        ? `${r.finishedAt} (${since(r.finishedAt, now)}, took ${duration(Date.parse(r.finishedAt) - Date.parse(r.createdAt))})`
        : '-',
    ],
    ['tokens', `${count(r.tokensUsed)} of ${count(r.tokenBudget)}`],
    ['cost', cost(r.costUsd)],
    ['attempts', String(r.attempts)],
    ['deadline', r.deadlineAt],
  ];
  if (r.nextAttemptAt) rows.push(['next attempt', `${r.nextAttemptAt} (${since(r.nextAttemptAt, now)})`]);
  if (r.waiting) {
    const w = r.waiting;
    rows.push([
      'waiting',
      `${w.kind} since ${w.since}${w.wakeAt ? `, wakes ${w.wakeAt}` : ''}${w.expiresAt ? `, expires ${w.expiresAt}` : ''}`,
    ]);
    for (const c of w.toolCalls) rows.push(['  tool call', `${c.toolUseId} ${c.toolName} ${oneLine(JSON.stringify(c.input) ?? '', 160)}`]);
  }
  if (r.lastError)
    rows.push(['last error', `${oneLine(r.lastError.message, 200)} (attempt ${r.lastError.attempt}, ${since(r.lastError.at, now)})`]);
  const width = Math.max(...rows.map(([k]) => k.length));
  const block = (title: string, text: string | null) => (text === null ? '' : `\n${title}:\n${text.replace(/^/gm, '  ')}\n`);
  const actions = r.status === 'WAITING' && r.waiting ? waitingActions(r.id, r.waiting, now, url) : '';
  return (
    rows.map(([k, v]) => `${k.padEnd(width)}  ${v}`).join('\n') +
    '\n' +
    actions +
    block('input', r.input) +
    block('output', r.output) +
    block('error', r.error)
  );
}

export const showCommand: RunsSubcommand = {
  name: 'show',
  args: '<id>',
  summary: 'one run: status, budgets used, input, output or error; for a WAITING run, how to act',
  positionals: 1,
  async run(ctx) {
    const run = await ctx.api().get<RunJson>(`/api/runs/${runIdArgument(ctx)}`);
    ctx.out(ctx.json ? json(run) : runDetails(run, ctx.now, ctx.options.url as string | undefined));
    return 0;
  },
};

const stepName = (s: TimelineItem) => (s.kind === 'TOOL' ? (s.toolName ?? '') : '');

export const stepsCommand: RunsSubcommand = {
  name: 'steps',
  args: '<id>',
  summary: "a run's steps: kind, outcome, latency, tokens, cost, worker",
  positionals: 1,
  async run(ctx) {
    const steps = await ctx.api().get<TimelineItem[]>(`/api/runs/${runIdArgument(ctx)}/timeline`);
    if (ctx.json) return (ctx.out(json(steps)), 0);
    if (steps.length === 0) return (ctx.out('no steps yet\n'), 0);
    ctx.out(
      table(steps, [
        { title: 'SEQ', value: (s) => String(s.seq), align: 'right' },
        { title: 'KIND', value: (s) => s.kind },
        { title: 'STATUS', value: (s) => s.status },
        { title: 'TOOL', value: stepName },
        { title: 'STOP', value: (s) => s.stopReason ?? '' },
        { title: 'LATENCY', value: (s) => (s.latencyMs === null ? '' : duration(s.latencyMs)), align: 'right' },
        {
          title: 'IN',
          value: (s) => (s.kind === 'MODEL' ? count(s.inputTokens + s.cacheCreationInputTokens + s.cacheReadInputTokens) : ''),
          align: 'right',
        },
        { title: 'OUT', value: (s) => (s.kind === 'MODEL' ? count(s.outputTokens) : ''), align: 'right' },
        { title: 'COST', value: (s) => (s.kind === 'MODEL' ? cost(s.costUsd) : ''), align: 'right' },
        { title: 'WORKER', value: (s) => s.worker ?? '' },
        { title: 'STARTED', value: (s) => since(s.startedAt, ctx.now) },
      ]),
    );
    return 0;
  },
};

export const cancelCommand: RunsSubcommand = {
  name: 'cancel',
  args: '<id>',
  summary: 'cancel a run (a queued one at once, a running one within moments)',
  positionals: 1,
  async run(ctx) {
    const id = runIdArgument(ctx);
    const r = await ctx.api().post<z.infer<typeof CancelledRun>>(`/api/runs/${id}/cancel`);
    if (ctx.json) return (ctx.out(json(r)), 0);
    ctx.out(
      r.status === 'CANCELLED'
        ? `run ${id} CANCELLED\n`
        : `cancel requested: run ${id} is ${r.status}; its step in flight is stopped and it ends CANCELLED\n`,
    );
    return 0;
  },
};

export const deleteCommand: RunsSubcommand = {
  name: 'delete',
  args: '<id>',
  summary: 'delete a finished run with its steps and events (cancel an active one first)',
  positionals: 1,
  async run(ctx: RunsContext) {
    const id = runIdArgument(ctx);
    await ctx.api().delete(`/api/runs/${id}`);
    ctx.out(ctx.json ? json({ id, deleted: true }) : `deleted run ${id}\n`);
    return 0;
  },
};
