/**
 * `npm run screenshots`: the dashboard's pictures in docs/, taken in headless Chromium from a real
 * server. A scratch database (on DATABASE_URL's server, or a throwaway embedded PostgreSQL) gets a
 * week of seeded history; then a worker drives live runs with the staged model and the demo ticket
 * tools, and the pages are photographed while one run is still working. The database is dropped after.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import type { Page } from 'playwright-core';
import { seedRuns } from '../bench/seed-runs.ts';
import { loadConfig } from '../src/config/environment.ts';
import { ensureEmbeddedPostgres, stopEmbeddedPostgres } from '../src/db/embedded.ts';
import { createPool } from '../src/db/pool.ts';
import { startRuntime } from '../src/runtime/start-runtime.ts';
import { TicketStore } from '../src/demo/tickets-store.ts';
import { demoTools } from '../src/demo/demo-tools.ts';
import type { Tool } from '../src/tools/types.ts';
import { launchChromium } from '../test/support/chromium.ts';
import { buildDashboard } from './build.ts';
import { stagedModel } from './staged-model.ts';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const DOCS = path.join(ROOT, 'docs');
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** The demo tools, taking the time real ones would. */
function slowed(tools: Tool[]): Tool[] {
  const ms: Record<string, [number, number]> = { list_tickets: [280, 520], get_ticket: [150, 650], add_ticket_comment: [380, 460] };
  return tools.map((t) => ({
    ...t,
    async execute(input, ctx) {
      const [lo, hi] = ms[t.name] ?? [100, 200];
      await sleep(lo + Math.random() * (hi - lo));
      return t.execute(input, ctx);
    },
  }));
}

async function until<T>(what: string, f: () => Promise<T | null | undefined | false>, ms = 120_000): Promise<T> {
  const end = Date.now() + ms;
  for (;;) {
    const v = await f();
    if (v) return v;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await sleep(200);
  }
}

async function main(): Promise<void> {
  buildDashboard();
  let dataDir: string | null = null;
  let adminUrl = process.env.DATABASE_URL;
  if (!adminUrl) {
    dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'durable-agent-screens-'));
    fs.chmodSync(dataDir, 0o755);
    adminUrl = (await ensureEmbeddedPostgres(dataDir)).adminUrl;
  }
  const admin = new pg.Client({ connectionString: adminUrl });
  await admin.connect();
  const scratch = `durable_agent_screens_${process.pid}`;
  await admin.query(`CREATE DATABASE ${pg.escapeIdentifier(scratch)}`);
  const url = new URL(adminUrl);
  url.pathname = `/${scratch}`;
  const pool = createPool(url.toString(), 4);
  const runtime = await startRuntime(
    loadConfig({
      DATABASE_URL: url.toString(),
      PORT: '0',
      LOG_LEVEL: 'silent',
      WORKER_NAME: 'worker-a',
      LLM_PROVIDER: 'demo',
      DEFAULT_MODEL: 'claude-sonnet-4-6',
    }),
    { api: true, worker: true, llm: stagedModel(), agent: { tools: slowed(demoTools(new TicketStore(pool))) } },
  );
  const chromium = await launchChromium({ viewport: { width: 1360, height: 860 } });
  try {
    await seedRuns(pool, { runs: 4000, steps: 11, varied: true, spanMs: 7 * 86_400_000 });
    const base = runtime.url!;
    const post = async (body: object) => {
      const res = await fetch(`${base}/api/runs`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify(body),
      });
      return ((await res.json()) as { id: string }).id;
    };
    const status = async (id: string) => ((await (await fetch(`${base}/api/runs/${id}`)).json()) as { status: string }).status;

    const budget = await post({ input: 'Find every overdue ticket, then draft a reply to each customer.', tokenBudget: 1500 });
    const queued = await post({ input: 'Is initech waiting on us for anything?' });
    await fetch(`${base}/api/runs/${queued}/cancel`, { method: 'POST' });
    const comment = await post({ input: 'Add a comment to ACME-102 saying the SSO fix ships on Friday.' });
    const overdue = await post({ input: 'Which acme tickets are overdue, and what is the latest on each?' });
    await until('the runs to finish', async () =>
      (await Promise.all([budget, comment, overdue].map(status))).every((s) => s !== 'RUNNING' && s !== 'QUEUED'),
    );
    const weekly = await post({ input: 'Put together the weekly report of open tickets.' });
    // Two model calls and the tool calls done; the third model call takes a minute: the run is mid-flight.
    await until('the weekly run to reach its last model call', async () => {
      const steps = (await (await fetch(`${base}/api/runs/${weekly}/timeline`)).json()) as { status: string }[];
      return steps.length >= 5 && steps.every((s) => s.status !== 'STARTED');
    });
    await sleep(2500);

    fs.mkdirSync(DOCS, { recursive: true });
    const page = await chromium.context.newPage();
    const shot = async (p: Page, name: string, opts: { fullPage?: boolean; live?: boolean } = {}) => {
      // A page following a run's events keeps its stream open: the network is never idle there.
      if (!opts.live) await p.waitForLoadState('networkidle');
      await p.evaluate(async () => {
        await document.fonts.ready;
        // A full-page picture starts at the top, where the sticky header belongs.
        window.scrollTo(0, 0);
      });
      await p.screenshot({ path: path.join(DOCS, name), fullPage: opts.fullPage ?? false, animations: 'disabled' });
      process.stdout.write(`docs/${name}\n`);
    };

    await page.goto(base);
    await page.waitForSelector('table.runs tbody tr');
    await shot(page, 'dashboard-runs.png');

    await page.goto(`${base}/runs/${overdue}?step=6`);
    await page.waitForSelector('.step-detail .msgs');
    await shot(page, 'dashboard-run.png', { fullPage: true });

    await page.goto(`${base}/overview`);
    await page.waitForSelector('.latency-card');
    await shot(page, 'dashboard-overview.png', { fullPage: true });

    await page.emulateMedia({ colorScheme: 'dark' });
    await page.goto(`${base}/runs/${weekly}`);
    await page.waitForSelector('.wf-bar.in-flight');
    await shot(page, 'dashboard-run-dark.png', { live: true });

    await page.setViewportSize({ width: 390, height: 844 });
    await page.goto(base);
    await page.waitForSelector('table.runs tbody tr');
    await shot(page, 'dashboard-mobile-dark.png');
  } finally {
    await chromium.close();
    await runtime.close();
    await pool.end();
    await admin.query(`DROP DATABASE IF EXISTS ${pg.escapeIdentifier(scratch)} WITH (FORCE)`);
    await admin.end();
    if (dataDir) {
      await stopEmbeddedPostgres(dataDir);
      fs.rmSync(dataDir, { recursive: true, force: true });
    }
  }
}

main().catch((e: unknown) => {
  process.stderr.write(`screenshots failed: ${e instanceof Error ? (e.stack ?? e.message) : String(e)}\n`);
  process.exit(1);
});
