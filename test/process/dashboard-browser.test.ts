/**
 * The dashboard in a real headless Chromium (Debian's `chromium`, driven by playwright-core) against
 * a real runtime: API and worker on a real PostgreSQL, a scripted model, real tools. What a person
 * would check: the list shows the database's runs, the filter and the paging work, a run's steps are
 * in the waterfall, a step opens to its request and response, the agent filter narrows the list, a
 * run shows the live text of its model call while it streams, Cancel stops a running run, the
 * overview's figures are the database's, and the browser logs no error on the way.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import type { ConsoleMessage, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { seedRuns } from '../../bench/seed-runs.ts';
import { dashboardStaleness } from '../../dashboard/build.ts';
import { formatClock, formatCost, formatCount, formatDuration } from '../../dashboard/src/format.ts';
import { loadConfig } from '../../src/config/environment.ts';
import type { RunId } from '../../src/domain/types.ts';
import { ToolError } from '../../src/domain/errors.ts';
import { type Runtime, startRuntime } from '../../src/runtime/start-runtime.ts';
import { ApiKeys } from '../../src/store/api-keys.ts';
import { sleepTool } from '../../src/tools/sleep-tool.ts';
import { defineTool } from '../../src/tools/types.ts';
import { workspaceSettings } from '../../src/workspace/options.ts';
import { launchChromium, type LaunchedChromium } from '../support/chromium.ts';
import { testDatabase, type TestDatabase } from '../support/db.ts';
import { waitFor } from '../support/engine.ts';
import { until } from '../support/cli-process.ts';
import { response, ScriptedLlm, usage } from '../support/scripted-llm.ts';

const UI_TIMEOUT = 20_000;
const workspaceRoot = fs.mkdtempSync(path.join(os.tmpdir(), 'da-dash-ws-'));

let db: TestDatabase;
let runtime: Runtime;
let chromium: LaunchedChromium;
let page: Page;
let base: string;
const consoleErrors: string[] = [];
let releaseHeld: () => void = () => {};
const held = new Promise<void>((resolve) => (releaseHeld = resolve));
/** A model call that streams its first pieces, then waits for the test before it streams the rest. */
const STREAMED = ['The printer ', 'is on fire; ', 'call the fire brigade.'] as const;
let releaseStream: () => void = () => {};
const streamGate = new Promise<void>((resolve) => (releaseStream = resolve));

const closed: string[] = [];
const tools = [
  defineTool<{ ticketId: string }>({
    name: 'close_ticket',
    description: 'Closes a ticket; a person approves each close',
    inputSchema: { type: 'object', properties: { ticketId: { type: 'string' } } },
    needsApproval: true,
    execute: async (input) => {
      closed.push(input.ticketId);
      return `closed ${input.ticketId}`;
    },
  }),
  defineTool({
    name: 'lookup',
    description: 'Finds tickets',
    inputSchema: { type: 'object' },
    execute: async () => ({ tickets: [{ id: 'T-1', title: 'Printer on fire' }] }),
  }),
  defineTool({
    name: 'broken',
    description: 'Always fails',
    inputSchema: { type: 'object' },
    execute: async () => {
      throw new ToolError('the ticket system is down');
    },
  }),
  sleepTool(),
];

/** The model's side of each run, chosen by the run's input and how far the conversation is. */
const llm = new ScriptedLlm(async (req, options) => {
  const input = String(req.messages[0]!.content);
  const turn = req.messages.filter((m) => m.role === 'assistant').length;
  if (input.startsWith('stream')) {
    options?.onText?.(STREAMED[0], 1);
    options?.onText?.(STREAMED[1], 1);
    await streamGate;
    options?.onText?.(STREAMED[2], 1);
    return response([{ type: 'text', text: STREAMED.join('') }], 'end_turn', usage(300, 20));
  }
  if (input.startsWith('hold')) {
    await held;
    return response([{ type: 'tool_use', id: `toolu_hold_${turn}`, name: 'lookup', input: {} }], 'tool_use', usage(500, 30));
  }
  if (input.startsWith('sleep')) {
    return response([{ type: 'tool_use', id: 'toolu_sleep_1', name: 'sleep', input: { seconds: 3600 } }], 'tool_use', usage(200, 10));
  }
  if (input.startsWith('close')) {
    if (turn === 0) {
      return response(
        [
          { type: 'tool_use', id: 'toolu_close_1', name: 'close_ticket', input: { ticketId: 'T-1', resolution: 'fixed' } },
          { type: 'tool_use', id: 'toolu_close_2', name: 'close_ticket', input: { ticketId: 'T-2', resolution: 'duplicate' } },
        ],
        'tool_use',
        usage(300, 40),
      );
    }
    return response([{ type: 'text', text: 'Closed T-1; T-2 stays open.' }], 'end_turn', usage(350, 10));
  }
  if (input.startsWith('files')) {
    const calls = [
      { name: 'write_file', input: { path: 'src/main.py', content: 'print("<b>not markup</b>")\n' } },
      { name: 'bash', input: { command: 'echo data > notes.txt' } },
    ];
    const call = calls[turn];
    if (call) return response([{ type: 'tool_use', id: `toolu_files_${turn}`, ...call }], 'tool_use', usage(200, 20));
    return response([{ type: 'text', text: 'Wrote the files.' }], 'end_turn', usage(250, 10));
  }
  if (input.startsWith('tickets')) {
    if (turn === 0)
      return response(
        [
          { type: 'text', text: 'Looking.' },
          { type: 'tool_use', id: 'toolu_look_1', name: 'lookup', input: { q: 'fire' } },
        ],
        'tool_use',
        usage(400, 40, 0, 1200),
      );
    if (turn === 1)
      return response([{ type: 'tool_use', id: 'toolu_broken_1', name: 'broken', input: {} }], 'tool_use', usage(450, 20, 1200, 60));
    return response(
      [{ type: 'text', text: 'T-1 (Printer on fire) is the only ticket; the ticket system is down for the rest.' }],
      'end_turn',
      usage(500, 35, 1260, 90),
    );
  }
  return response([{ type: 'text', text: `answer to ${input}` }], 'end_turn', usage(300, 20));
});

async function sql<T extends pg.QueryResultRow>(text: string, values: unknown[] = []): Promise<T[]> {
  return (await db.pool.query<T>(text, values)).rows;
}

const post = async (body: object): Promise<RunId> => {
  const res = await fetch(`${base}/api/runs`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  expect(res.status).toBe(201);
  return ((await res.json()) as { id: RunId }).id;
};

const statusOf = async (id: RunId) =>
  (await sql<{ status: string }>('SELECT status FROM durable_agent.run WHERE id = $1', [id]))[0]!.status;

let ticketsRun: RunId;
let failedRun: RunId;

beforeAll(async () => {
  // The files `npm ci` built (prepare), as installed. Rebuilding them here would pull them from under the
  // servers other test files start at the same time.
  const stale = dashboardStaleness();
  if (stale) throw new Error(stale);
  db = await testDatabase();
  runtime = await startRuntime(
    loadConfig({
      DATABASE_URL: db.url,
      PORT: '0',
      LOG_LEVEL: 'silent',
      WORKER_NAME: 'worker-t',
      LLM_PROVIDER: 'demo',
      DEFAULT_MODEL: 'claude-sonnet-4-6',
      WORKSPACE_ROOT: workspaceRoot,
    }),
    {
      api: true,
      worker: true,
      llm,
      agents: [
        { system: 'You are a test agent.', tools },
        { name: 'coder', system: 'You write code.', tools: [], workspace: workspaceSettings(true) },
      ],
    },
  );
  base = runtime.url!;
  // History: 60 finished runs over the last week, so there is more than one page of runs.
  await seedRuns(db.pool, { runs: 60, steps: 5, varied: true, spanMs: 7 * 86_400_000 });
  ticketsRun = await post({ input: 'tickets on fire?' });
  failedRun = await post({ input: 'tickets again', tokenBudget: 1000 });
  const other = await post({ input: 'hello' });
  await waitFor('the runs to finish', async () =>
    (await Promise.all([ticketsRun, failedRun, other].map(statusOf))).every((s) => s !== 'QUEUED' && s !== 'RUNNING'),
  );
  // A run due in an hour stays QUEUED: the list shows one of each kind.
  const queued = await post({ input: 'later' });
  await db.pool.query(`UPDATE durable_agent.run SET run_at = now() + interval '1 hour' WHERE id = $1 AND status = 'QUEUED'`, [queued]);

  chromium = await launchChromium();
  page = await chromium.context.newPage();
  page.setDefaultTimeout(UI_TIMEOUT);
  page.on('console', (m: ConsoleMessage) => {
    if (m.type() === 'error' || m.type() === 'warning') consoleErrors.push(`${m.type()}: ${m.text()}`);
  });
  page.on('pageerror', (e) => consoleErrors.push(`pageerror: ${e.message}`));
}, 120_000);

afterAll(async () => {
  releaseHeld();
  releaseStream();
  await chromium?.close();
  await runtime?.close();
  await db?.close();
  fs.rmSync(workspaceRoot, { recursive: true, force: true });
});

async function visibleRuns(p: Page): Promise<{ id: string; status: string; steps: string }[]> {
  return p.$$eval('table.runs tbody tr', (rows) =>
    rows.map((r) => ({
      id: r.getAttribute('data-run-id')!,
      status: r.getAttribute('data-status')!,
      steps: r.querySelector('.c-steps')!.textContent!,
    })),
  );
}

describe('the dashboard in Chromium', () => {
  it('lists the newest runs of the database with their status and step count', async () => {
    await page.goto(base);
    await page.waitForSelector('table.runs tbody tr');
    const shown = await visibleRuns(page);
    const expected = await sql<{ id: string; status: string; steps: number }>(
      `SELECT id, status, (SELECT count(*)::int FROM durable_agent.run_step s WHERE s.run_id = run.id) AS steps
       FROM durable_agent.run ORDER BY created_at DESC, id DESC LIMIT 50`,
    );
    expect(shown).toEqual(expected.map((r) => ({ id: r.id, status: r.status, steps: String(r.steps) })));
    expect(shown.find((r) => r.id === ticketsRun)).toEqual({ id: ticketsRun, status: 'SUCCEEDED', steps: '5' });
    expect(await page.textContent(`tr[data-run-id="${failedRun}"] .pill`)).toBe('Failed');
    // The status chips count the database's runs.
    const total = (await sql<{ n: number }>('SELECT count(*)::int AS n FROM durable_agent.run'))[0]!.n;
    await page.waitForSelector('.chip[data-filter="ALL"] .chip-count');
    expect(await page.textContent('.chip[data-filter="ALL"] .chip-count')).toBe(formatCount(total));
  });

  it('filters by status, and pages with the cursor without losing or repeating a run', async () => {
    await page.click('.chip[data-filter="SUCCEEDED"]');
    await page.waitForURL(/\?status=SUCCEEDED$/);
    await page.waitForFunction(() =>
      [...document.querySelectorAll('table.runs tbody tr')].every((r) => r.getAttribute('data-status') === 'SUCCEEDED'),
    );
    const succeeded = await sql<{ id: string }>(
      `SELECT id FROM durable_agent.run WHERE status = 'SUCCEEDED' ORDER BY created_at DESC, id DESC`,
    );
    expect(succeeded.length).toBeGreaterThan(50);
    expect(await page.textContent('.chip[data-filter="SUCCEEDED"] .chip-count')).toBe(formatCount(succeeded.length));

    const seen: string[] = (await visibleRuns(page)).map((r) => r.id);
    expect(seen.length).toBe(50);
    await page.click('a[rel="next"]');
    await page.waitForURL(/cursor=/);
    await page.waitForFunction(
      (first) => !document.querySelector(`tr[data-run-id="${first}"]`) && document.querySelectorAll('table.runs tbody tr').length > 0,
      seen[0],
    );
    seen.push(...(await visibleRuns(page)).map((r) => r.id));
    expect(seen).toEqual(succeeded.map((r) => r.id));
    expect(await page.textContent('.pager')).toContain('End of the list');
  });

  it('opens a run and shows its steps in the waterfall, in order, coloured by kind and outcome', async () => {
    await page.goto(base);
    await page.click(`tr[data-run-id="${ticketsRun}"] td.c-status`);
    await page.waitForURL(new RegExp(`/runs/${ticketsRun}$`));
    await page.waitForSelector('.wf-row[data-seq="5"]');
    const rows = await page.$$eval('.wf-row[data-seq]', (els) =>
      els.map((e) => {
        const bar = e.querySelector('.wf-bar') as HTMLElement;
        return {
          seq: Number(e.getAttribute('data-seq')),
          kind: e.getAttribute('data-kind'),
          status: e.getAttribute('data-status'),
          bar: bar.className,
          left: parseFloat(bar.style.left),
        };
      }),
    );
    const timeline = (await (await fetch(`${base}/api/runs/${ticketsRun}/timeline`)).json()) as {
      seq: number;
      kind: string;
      status: string;
    }[];
    expect(rows.map(({ seq, kind, status }) => ({ seq, kind, status }))).toEqual(
      timeline.map(({ seq, kind, status }) => ({ seq, kind, status })),
    );
    expect(rows.map((r) => r.status)).toEqual(['DONE', 'DONE', 'DONE', 'ERROR', 'DONE']);
    expect(rows[0]!.bar).toContain('model');
    expect(rows[1]!.bar).toContain('tool');
    expect(rows[3]!.bar).toContain('error');
    // One time axis: each step starts no earlier than the one before it.
    for (let i = 1; i < rows.length; i++) expect(rows[i]!.left).toBeGreaterThanOrEqual(rows[i - 1]!.left);
    expect(await page.textContent('.io.output .prose')).toBe(
      'T-1 (Printer on fire) is the only ticket; the ticket system is down for the rest.',
    );
    expect(await page.textContent('.io.input .prose')).toBe('tickets on fire?');
    const run = (
      await sql<{ tokens_used: number; token_budget: number }>('SELECT tokens_used, token_budget FROM durable_agent.run WHERE id = $1', [
        ticketsRun,
      ])
    )[0]!;
    expect(await page.textContent('[data-meter="tokens"] .meter-value')).toBe(
      `${formatCount(run.tokens_used)} / ${formatCount(run.token_budget)}`,
    );
    expect(await page.textContent('[data-meter="steps"] .meter-value')).toBe('5 / 50');
  });

  it('opens a step to its request and response', async () => {
    await page.click('.wf-row[data-seq="5"]');
    await page.waitForURL(/\?step=5$/);
    const detail = page.locator('.step-detail[data-seq="5"]');
    await detail.waitFor();
    // The request is the conversation as sent: the tool calls and their results, the failing one marked.
    await detail.getByRole('button', { name: /Show 1 earlier message/ }).click();
    const request = detail.locator('.step-pane').first();
    expect(await request.locator('.blk.tool-use .tool-name').allTextContents()).toEqual(['lookup', 'broken']);
    expect(await request.locator('.blk.tool-result.error').textContent()).toContain('error: the ticket system is down');
    expect(await request.locator('.blk.tool-result:not(.error)').textContent()).toContain('Printer on fire');
    expect(await detail.locator('.step-pane').nth(1).textContent()).toContain('T-1 (Printer on fire) is the only ticket');

    // A tool step: its input and its result.
    await page.click('.wf-row[data-seq="2"]');
    const tool = page.locator('.step-detail[data-seq="2"]');
    await tool.waitFor();
    expect(await tool.locator('h2').textContent()).toContain('lookup');
    expect(await tool.locator('.step-pane').first().textContent()).toContain('fire');
    expect(await tool.locator('.step-pane').nth(1).textContent()).toContain('Printer on fire');
  });

  it("filters by agent: the list narrows to that agent's runs, and paging and the status chips keep the filter", async () => {
    // More runs of one agent than a page holds, so the filter has to survive paging.
    // Not the runs later tests drive further (a fork needs its source's agent to be one the runtime serves).
    await db.pool.query(
      `UPDATE durable_agent.run SET agent = 'triage'
       WHERE id IN (SELECT id FROM durable_agent.run WHERE id <> ALL ($1::uuid[]) ORDER BY created_at DESC, id DESC OFFSET 2 LIMIT 55)`,
      [[ticketsRun]],
    );
    const triage = (
      await sql<{ id: string }>(`SELECT id FROM durable_agent.run WHERE agent = 'triage' ORDER BY created_at DESC, id DESC`)
    ).map((r) => r.id);
    expect(triage.length).toBe(55);
    await page.goto(`${base}/`);
    await page.waitForSelector('select[data-filter="agent"] option[value="triage"]', { state: 'attached' });
    const agents = await page.$$eval('select[data-filter="agent"] option', (os) => os.map((o) => (o as HTMLOptionElement).value));
    // "All", then the agents of the runs listed, each an agent the database knows.
    const known = (await sql<{ agent: string }>('SELECT DISTINCT agent FROM durable_agent.run')).map((r) => r.agent);
    expect(agents[0]).toBe('');
    expect(agents).toContain('triage');
    expect(agents.slice(1).every((a) => known.includes(a))).toBe(true);

    await page.selectOption('select[data-filter="agent"]', 'triage');
    await page.waitForURL(/\?agent=triage$/);
    await page.waitForFunction((first) => document.querySelector('table.runs tbody tr')?.getAttribute('data-run-id') === first, triage[0]);
    const seen = (await visibleRuns(page)).map((r) => r.id);
    expect(seen.length).toBe(50);
    expect(await page.$$eval('table.runs tbody .c-agent', (cells) => [...new Set(cells.map((c) => c.textContent))])).toEqual(['triage']);
    await page.click('a[rel="next"]');
    await page.waitForURL(/agent=triage&cursor=/);
    await page.waitForFunction(
      (first) => !document.querySelector(`tr[data-run-id="${first}"]`) && document.querySelectorAll('table.runs tbody tr').length > 0,
      seen[0],
    );
    seen.push(...(await visibleRuns(page)).map((r) => r.id));
    expect(seen).toEqual(triage);
    expect(await page.inputValue('select[data-filter="agent"]')).toBe('triage');

    // A status chip keeps the agent filter.
    await page.click('.chip[data-filter="SUCCEEDED"]');
    await page.waitForURL(/\?status=SUCCEEDED&agent=triage$/);
    const succeeded = (
      await sql<{ id: string }>(
        `SELECT id FROM durable_agent.run WHERE agent = 'triage' AND status = 'SUCCEEDED' ORDER BY created_at DESC, id DESC LIMIT 50`,
      )
    ).map((r) => r.id);
    await page.waitForFunction(
      (n) =>
        document.querySelectorAll('table.runs tbody tr').length === n &&
        [...document.querySelectorAll('table.runs tbody tr')].every((r) => r.getAttribute('data-status') === 'SUCCEEDED'),
      succeeded.length,
    );
    expect((await visibleRuns(page)).map((r) => r.id)).toEqual(succeeded);
  });

  it('shows the live text of the model call in flight before the run ends, and that text is the output at the end', async () => {
    const id = await post({ input: 'stream the answer' });
    await page.goto(`${base}/runs/${id}`);
    await page.waitForFunction((want) => document.querySelector('.live-text .live-body')?.textContent === want, STREAMED[0] + STREAMED[1]);
    expect(await page.isVisible('.live-text')).toBe(true);
    // Seen while the model is still writing: the run has not finished, nor has its model step.
    expect(await statusOf(id)).toBe('RUNNING');
    expect(await page.textContent('.live-text h2')).toContain('Live text');
    releaseStream();
    await page.waitForSelector('.run-head .pill[data-status="SUCCEEDED"]');
    const output = (await sql<{ output: string }>('SELECT output FROM durable_agent.run WHERE id = $1', [id]))[0]!.output;
    expect(output).toBe(STREAMED.join(''));
    await page.waitForFunction(() => document.querySelector('.live-text h2')?.textContent?.startsWith('Streamed text'));
    expect(await page.textContent('.live-text .live-body')).toBe(output);
    expect(await page.textContent('.io.output .prose')).toBe(output);
    // The steps came with the events: the model step is in the waterfall without a reload.
    await page.waitForFunction(() => document.querySelectorAll('.waterfall-box [data-seq]').length >= 1);
  });

  it('cancels a running run with a click, and shows it end CANCELLED', async () => {
    const id = await post({ input: 'hold this one' });
    await waitFor('the run to be claimed', async () => (await statusOf(id)) === 'RUNNING');
    await page.goto(`${base}/runs/${id}`);
    await page.waitForSelector('.run-head .pill[data-status="RUNNING"]');
    await page.click('button[data-action="cancel"]');
    await page.waitForSelector('.notice.ok');
    expect(await page.textContent('.notice')).toBe('Cancel requested: the run stops before its next step.');
    expect(
      (await sql<{ cancel_requested: boolean }>('SELECT cancel_requested FROM durable_agent.run WHERE id = $1', [id]))[0]!.cancel_requested,
    ).toBe(true);
    releaseHeld();
    // The page follows the run on its own until it has ended.
    await page.waitForSelector('.run-head .pill[data-status="CANCELLED"]');
    expect(await statusOf(id)).toBe('CANCELLED');
    expect(await page.$('button[data-action="cancel"]')).toBeNull();
  });

  it('shows overview figures that are the figures of the database', async () => {
    await page.goto(`${base}/overview`);
    await page.waitForSelector('.latency-card');
    const at = await page.getAttribute('[data-at]', 'data-at');
    const figure = (name: string) => page.textContent(`[data-figure="${name}"]`);
    for (const r of await sql<{ status: string; n: number }>('SELECT status, count(*)::int AS n FROM durable_agent.run GROUP BY status')) {
      expect(await figure(`status-${r.status}`), r.status).toBe(formatCount(r.n));
    }
    for (const [name, hours] of [
      ['hour', 1],
      ['day', 24],
    ] as const) {
      const [w] = await sql<{ steps: number; tokens: number; cost: number; runs: number }>(
        `SELECT count(*)::int AS steps, coalesce(sum(input_tokens + cache_creation_input_tokens + output_tokens), 0)::int AS tokens,
                coalesce(sum(cost_usd), 0)::float8 AS cost,
                (SELECT count(*)::int FROM durable_agent.run WHERE created_at >= $1::timestamptz - $2 * interval '1 hour' AND created_at < $1) AS runs
         FROM durable_agent.run_step WHERE started_at >= $1::timestamptz - $2 * interval '1 hour' AND started_at < $1`,
        [at, hours],
      );
      expect(await figure(`${name}-steps`)).toBe(formatCount(w!.steps));
      expect(await page.getAttribute(`[data-figure="${name}-tokens"]`, 'title')).toBe(formatCount(w!.tokens));
      expect(await figure(`${name}-cost`)).toBe(formatCost(w!.cost));
      expect(await figure(`${name}-runs`)).toBe(formatCount(w!.runs));
    }
    const [p] = await sql<{ p50: number; p95: number }>(
      `SELECT percentile_disc(0.5) WITHIN GROUP (ORDER BY latency_ms) AS p50, percentile_disc(0.95) WITHIN GROUP (ORDER BY latency_ms) AS p95
       FROM durable_agent.run_step WHERE kind = 'MODEL' AND latency_ms IS NOT NULL AND started_at >= $1::timestamptz - interval '1 day' AND started_at < $1`,
      [at],
    );
    expect(await figure('day-MODEL-p50')).toBe(formatDuration(p!.p50));
    expect(await figure('day-MODEL-p95')).toBe(formatDuration(p!.p95));
  });

  it('forks a run from a step with "Fork from here", and opens the fork with its inherited steps marked', async () => {
    await page.goto(`${base}/runs/${ticketsRun}?step=2`);
    const detail = page.locator('.step-detail[data-seq="2"]');
    await detail.waitFor();
    await detail.locator('input.fork-model').fill('claude-haiku-4-5');
    await detail.locator('button[data-action="fork"]').click();
    await page.waitForURL((url) => /\/runs\/[0-9a-f-]{36}$/.test(url.pathname) && !url.pathname.endsWith(ticketsRun));
    const forkId = new URL(page.url()).pathname.split('/').pop()!;
    const row = (
      await sql<{ forked_from_run_id: string; forked_after_seq: number; model: string }>(
        'SELECT forked_from_run_id, forked_after_seq, model FROM durable_agent.run WHERE id = $1',
        [forkId],
      )
    )[0]!;
    expect(row).toEqual({ forked_from_run_id: ticketsRun, forked_after_seq: 2, model: 'claude-haiku-4-5' });
    await waitFor('the fork to finish', async () => (await statusOf(forkId as RunId)) === 'SUCCEEDED');
    await page.waitForSelector('.wf-row[data-seq="5"]');
    expect(await page.$$eval('.wf-row.inherited', (els) => els.map((e) => e.getAttribute('data-seq')))).toEqual(['1', '2']);
  });

  it("shows a run's files as of the step selected, what that step changed, and a file's content as text", async () => {
    const id = await post({ input: 'files please', agent: 'coder' });
    await waitFor('the run to finish', async () => (await statusOf(id)) === 'SUCCEEDED');
    await page.goto(`${base}/runs/${id}`);
    const card = page.locator('section.card.files');
    await card.waitFor();
    const paths = () => card.locator('.file-tree li[data-path]').evaluateAll((els) => els.map((e) => e.getAttribute('data-path')));
    await waitFor('the tree', async () => (await paths()).length === 3);
    expect(await paths()).toEqual(['notes.txt', 'src', 'src/main.py']);
    await card.locator('li[data-path="src/main.py"] button').click();
    // Shown as text: the markup in it stays characters.
    expect(await card.locator('pre.file-text').textContent()).toBe('print("<b>not markup</b>")\n');
    expect(await card.locator('pre.file-text b').count()).toBe(0);

    // Step 2 wrote src/main.py: as of it there is no notes.txt yet, and the step's changes are listed.
    await page.click('.wf-row[data-seq="2"]');
    await waitFor('the tree as of step 2', async () => (await paths()).length === 2);
    expect(await paths()).toEqual(['src', 'src/main.py']);
    expect(await card.locator('.tag.change').allTextContents()).toEqual(['+ src', '+ src/main.py']);
    expect(await card.locator('.card-head .muted').textContent()).toBe('as of step 2');
  });

  it('lists the schedules with their next slot and last runs; Pause and Run now act on one', async () => {
    const res = await fetch(`${base}/api/schedules`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ name: 'nightly-report', cron: '0 3 * * *', timezone: 'Europe/Berlin', input: 'the night report' }),
    });
    const schedule = (await res.json()) as { id: string };
    await page.goto(`${base}/schedules`);
    const row = page.locator('tr[data-schedule="nightly-report"]');
    await row.waitFor();
    expect(await row.locator('.c-cron').textContent()).toBe('0 3 * * *Europe/Berlin');
    expect(await row.locator('.c-next').textContent()).toMatch(/^in \d+/);
    expect(await row.locator('.c-last').textContent()).toBe('none yet');
    await row.locator('button[data-action="trigger"]').click();
    await row.locator('.c-last .pill').first().waitFor();
    const runs = (await (await fetch(`${base}/api/runs?scheduleId=${schedule.id}`)).json()) as { runs: { id: string }[] };
    expect(runs.runs).toHaveLength(1);
    expect(await row.locator('.c-last a').first().getAttribute('href')).toBe(`/runs/${runs.runs[0]!.id}`);
    await row.locator('button[data-action="pause"]').click();
    await row.locator('.c-next .tag').waitFor();
    expect(((await (await fetch(`${base}/api/schedules/${schedule.id}`)).json()) as { paused: boolean }).paused).toBe(true);
    await fetch(`${base}/api/schedules/${schedule.id}`, { method: 'DELETE' });
  });

  it('logged no error or warning in the browser console on the way', () => {
    expect(consoleErrors).toEqual([]);
  });
});

describe('approvals', () => {
  it('shows the pending tool calls of a WAITING run; Approve and Deny (with its reason) let the run go on', async () => {
    const id = await post({ input: 'close T-1 and T-2' });
    await waitFor('the run to wait for approval', async () => (await statusOf(id)) === 'WAITING', UI_TIMEOUT);
    const p = await chromium.context.newPage();
    p.setDefaultTimeout(UI_TIMEOUT);
    await p.goto(`${base}/runs/${id}`);
    await p.waitForSelector('.approvals .approval[data-tool-use-id="toolu_close_2"]');
    expect(await p.locator('.approvals .approval').count()).toBe(2);
    // The header says what the run waits for and since when, not how long it has been running.
    const since = ((await (await fetch(`${base}/api/runs/${id}`)).json()) as { waiting: { since: string } }).waiting.since;
    const state = p.locator('.run-head .run-state');
    expect(await state.getAttribute('data-state')).toBe('waiting');
    expect(await state.textContent()).toMatch(
      new RegExp(`^waiting for approval of 2 tool calls since ${formatClock(new Date(since), new Date())} \\(`),
    );
    expect(await p.textContent('.run-head .sub')).not.toContain('running for');
    // The model wrote no text before its tool calls: once the page has read the run's events, no
    // live-text box stands empty.
    await p.waitForSelector('.live-text[data-seq]', { state: 'attached' });
    expect(await p.isVisible('.live-text')).toBe(false);
    await p.locator('.approval[data-tool-use-id="toolu_close_1"]').getByRole('button', { name: 'Approve' }).click();
    await p.waitForFunction(
      () => document.querySelector('.approval[data-tool-use-id="toolu_close_1"] .decision-result')?.textContent === 'Approved.',
    );
    expect(await statusOf(id)).toBe('WAITING'); // one call is still undecided
    const second = p.locator('.approval[data-tool-use-id="toolu_close_2"]');
    await second.locator('input.reason').fill('T-2 is not a duplicate');
    await second.getByRole('button', { name: 'Deny' }).click();
    await waitFor('the run to finish', async () => (await statusOf(id)) === 'SUCCEEDED', UI_TIMEOUT);
    expect(closed).toEqual(['T-1']);
    const decisions = await sql<{ tool_use_id: string; decision: string; reason: string | null }>(
      'SELECT tool_use_id, decision, reason FROM durable_agent.tool_decision WHERE run_id = $1 ORDER BY tool_use_id',
      [id],
    );
    expect(decisions).toEqual([
      { tool_use_id: 'toolu_close_1', decision: 'approve', reason: null },
      { tool_use_id: 'toolu_close_2', decision: 'deny', reason: 'T-2 is not a duplicate' },
    ]);
    await p.waitForSelector('.approvals', { state: 'detached' }); // the page follows the run: nothing waits any more
    await p.close();
  });

  it('shows a sleeping run as sleeping until its wake-up time, with no empty live-text box', async () => {
    const id = await post({ input: 'sleep for an hour' });
    await waitFor('the run to sleep', async () => (await statusOf(id)) === 'WAITING', UI_TIMEOUT);
    const { waiting } = (await (await fetch(`${base}/api/runs/${id}`)).json()) as {
      waiting: { kind: string; since: string; wakeAt: string };
    };
    expect(waiting.kind).toBe('timer');
    const p = await chromium.context.newPage();
    p.setDefaultTimeout(UI_TIMEOUT);
    await p.goto(`${base}/runs/${id}`);
    const state = p.locator('.run-head .run-state[data-state="waiting"]');
    await state.waitFor();
    const clock = (iso: string) => formatClock(new Date(iso), new Date());
    expect(await state.textContent()).toMatch(
      new RegExp(`^sleeping until ${clock(waiting.wakeAt)} \\(in (59m \\d\\ds|1h 00m)\\) · since ${clock(waiting.since)} \\(`),
    );
    expect(await p.textContent('.run-head .sub')).not.toContain('running for');
    await p.waitForSelector('.live-text[data-seq]', { state: 'attached' });
    expect(await p.isVisible('.live-text')).toBe(false);
    await p.close();
  });
});

describe('against real API keys (last: once a key exists, every request needs one)', () => {
  it("asks for a key on the 401, refuses a wrong one, then shows the list of that key's tenant only; the key stays in the tab", async () => {
    const keys = new ApiKeys(db.pool);
    const mine = await keys.create('default', 'browser');
    const theirs = await keys.create('globex');
    await until('the server to require a key', async () => (await fetch(`${base}/api/runs`)).status === 401, 10_000);
    const res = await fetch(`${base}/api/runs`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${theirs.key}` },
      body: JSON.stringify({ input: 'a run of another tenant' }),
    });
    expect(res.status).toBe(201);
    const othersRun = ((await res.json()) as { id: string }).id;

    const keyPage = await chromium.context.newPage();
    keyPage.setDefaultTimeout(UI_TIMEOUT);
    const sent: (string | null)[] = [];
    keyPage.on('request', (r) => {
      if (new URL(r.url()).pathname.startsWith('/api/')) sent.push(r.headers().authorization ?? null);
    });
    await keyPage.goto(base);
    const dialog = keyPage.locator('dialog.key-dialog');
    await dialog.waitFor();
    expect(await dialog.locator('h2').textContent()).toBe('An API key is needed');
    const wrong = `dak_${'x'.repeat(43)}`;
    await dialog.locator('input[name="api-key"]').fill(wrong);
    await dialog.locator('button[type="submit"]').click();
    // The server refuses it; the form asks again, saying why.
    await keyPage.waitForFunction(() => document.querySelector('dialog.key-dialog h2')?.textContent === 'That key was not accepted');
    expect(await keyPage.locator('dialog.key-dialog p.muted').textContent()).toContain('the API key is not valid');
    await keyPage.locator('dialog.key-dialog input[name="api-key"]').fill(mine.key);
    await keyPage.locator('dialog.key-dialog button[type="submit"]').click();
    await keyPage.waitForSelector('table.runs tbody tr');
    const listed = await visibleRuns(keyPage);
    expect(listed.length).toBeGreaterThan(0);
    expect(listed.map((r) => r.id)).toContain(ticketsRun);
    expect(listed.map((r) => r.id)).not.toContain(othersRun);
    expect(sent[0]).toBeNull();
    expect(sent).toContain(`Bearer ${wrong}`);
    expect(sent.at(-1)).toBe(`Bearer ${mine.key}`);
    expect(await keyPage.evaluate(() => sessionStorage.getItem('durable-agent.api-key'))).toBe(mine.key);
    expect(await keyPage.evaluate(() => localStorage.length)).toBe(0);
    await keyPage.getByRole('button', { name: 'Forget key' }).click();
    expect(await keyPage.evaluate(() => sessionStorage.getItem('durable-agent.api-key'))).toBeNull();
    await keyPage.close();
  });

  it('a browser whose requests already carry the key (a proxy adding it) never sees the form', async () => {
    const key = await new ApiKeys(db.pool).create('globex', 'proxy');
    const p = await chromium.context.newPage();
    p.setDefaultTimeout(UI_TIMEOUT);
    await p.setExtraHTTPHeaders({ authorization: `Bearer ${key.key}` });
    await p.goto(base);
    await p.waitForSelector('table.runs tbody tr');
    // Its tenant has the one run made in the test above.
    expect(await visibleRuns(p)).toHaveLength(1);
    expect(await p.locator('dialog.key-dialog[open]').count()).toBe(0);
    await p.close();
  });
});
