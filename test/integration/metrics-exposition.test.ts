/**
 * GET /metrics of a running runtime, after runs that make every family the engine feeds show a
 * series, is text Prometheus accepts without a lint warning: `promtool check metrics` (the Debian
 * package `prometheus`; CI installs it), and a parser of the same rules here, so a missing promtool
 * still leaves one check that runs everywhere.
 */
import { spawnSync } from 'node:child_process';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { defineAgent } from '../../src/agents/define-agent.ts';
import { type AgentRuntime, createRuntime } from '../../src/runtime/create-runtime.ts';
import { tool } from '../../src/tools/zod-tool.ts';
import { testDatabase, type TestDatabase } from '../support/db.ts';
import { fake, useFakeAnthropic } from '../support/fake-anthropic.ts';

const API_KEY = 'sk-ant-test-metrics-0123456789';
const server = useFakeAnthropic(API_KEY);

const ENV = {
  LLM_PROVIDER: 'anthropic',
  ANTHROPIC_API_KEY: API_KEY,
  ANTHROPIC_BASE_URL: '',
  AUTH: 'off',
  RETRY_BASE_MS: '1',
  RETRY_CAP_MS: '5',
};

let db: TestDatabase;
let rt: AgentRuntime;
let exposition: string;
const saved = new Map<string, string | undefined>();

beforeAll(async () => {
  db = await testDatabase();
  for (const [k, v] of Object.entries({ ...ENV, ANTHROPIC_BASE_URL: server.url })) {
    saved.set(k, process.env[k]);
    process.env[k] = v;
  }
  const lookup = tool({
    name: 'lookup',
    description: 'Looks a key up.',
    input: z.object({ key: z.string() }),
    execute: async ({ key }) => `value of ${key}`,
  });
  rt = await createRuntime({
    agents: [defineAgent({ name: 'helper', system: 'Be brief.', tools: [lookup], model: 'claude-sonnet-4-6' })],
    api: { port: 0, host: '127.0.0.1' },
    databaseUrl: db.url,
    logger: pino({ level: 'silent' }),
  });
  // A run with a retried model call, a tool step and an answer, and a run stopped by its token budget:
  // tokens, cost, latency of both kinds, retries, claims, finishes by status, stops by budget, runs by
  // status (every status, 0 when none) and the queue depth all have series.
  server.enqueue(
    fake.error(429, 'rate_limit_error', 'slow down'),
    fake.toolUse('toolu_1', 'lookup', { key: 'a' }),
    fake.text('done'),
    fake.toolUse('toolu_2', 'lookup', { key: 'b' }, { input_tokens: 500, output_tokens: 50 }),
  );
  const ok = await rt.runs.create({ input: 'look a up' });
  expect(await rt.runs.wait(ok.id, { timeoutMs: 30_000 })).toMatchObject({ status: 'SUCCEEDED' });
  const over = await rt.runs.create({ input: 'look b up', tokenBudget: 100 });
  expect(await rt.runs.wait(over.id, { timeoutMs: 30_000 })).toMatchObject({ status: 'FAILED' });
  const res = await fetch(`${rt.url}/metrics`);
  expect(res.status).toBe(200);
  exposition = await res.text();
}, 120_000);

afterAll(async () => {
  await rt?.close();
  await db?.close();
  for (const [k, v] of saved) {
    if (v === undefined) delete process.env[k];
    else process.env[k] = v;
  }
});

interface Family {
  help: boolean;
  type: string | null;
  series: string[];
}

/**
 * The problems `promtool check metrics` reports (its lint rules), found by parsing the text: a family
 * without HELP or TYPE, a counter not ending in _total, anything else ending in it, a unit that is not
 * the base unit or is abbreviated, camelCase names, a series (name and labels) given twice.
 */
function lint(text: string): string[] {
  const families = new Map<string, Family>();
  const family = (name: string) => families.get(name) ?? families.set(name, { help: false, type: null, series: [] }).get(name)!;
  const problems: string[] = [];
  for (const line of text.split('\n')) {
    if (line === '') continue;
    const meta = /^# (HELP|TYPE) ([a-zA-Z_:][\w:]*) ?(.*)$/.exec(line);
    if (meta) {
      const f = family(meta[2]!);
      if (meta[1] === 'HELP') f.help = meta[3] !== '';
      else if (f.type !== null) problems.push(`${meta[2]}: TYPE given twice`);
      else f.type = meta[3]!;
      continue;
    }
    const sample = /^([a-zA-Z_:][\w:]*)(\{[^}]*\})? \S+$/.exec(line);
    if (!sample) {
      problems.push(`unreadable line: ${line}`);
      continue;
    }
    const name = sample[1]!;
    // A histogram's samples belong to the family named without their suffix.
    const base = name.replace(/_(bucket|sum|count)$/, '');
    const owner = families.get(base)?.type === 'histogram' ? base : name;
    const labels = (sample[2] ?? '')
      .replace(/^\{|\}$/g, '')
      .split(/,(?=\w+=")/)
      .filter(Boolean)
      .sort()
      .join(',');
    family(owner).series.push(`${name}{${labels}}`);
  }
  for (const [name, f] of families) {
    if (!f.help) problems.push(`${name}: no HELP`);
    if (f.type === null) problems.push(`${name}: no TYPE`);
    if (f.type === 'counter' && !name.endsWith('_total')) problems.push(`${name}: a counter must end in _total`);
    if (f.type !== 'counter' && name.endsWith('_total')) problems.push(`${name}: a ${f.type} must not end in _total`);
    if (/[a-z][A-Z]/.test(name)) problems.push(`${name}: camelCase`);
    if (
      /_(milliseconds|microseconds|nanoseconds|minutes|hours|days|weeks|kilobytes|megabytes|gigabytes|kibibytes|mebibytes|gibibytes|percent)(_|$)/.test(
        name,
      )
    ) {
      problems.push(`${name}: use the base unit`);
    }
    if (/_(ms|us|ns|sec|secs|mb|kb|gb|pct)(_|$)/.test(name)) problems.push(`${name}: abbreviated unit`);
    const seen = new Set<string>();
    for (const s of f.series) {
      if (seen.has(s)) problems.push(`${s}: series given twice`);
      seen.add(s);
    }
  }
  return problems;
}

describe('GET /metrics', () => {
  it('shows the families the runs fed', () => {
    for (const name of [
      'agent_tokens_total',
      'agent_cost_usd_total',
      'agent_step_latency_seconds_bucket',
      'agent_llm_retries_total',
      'agent_runs_claimed_total',
      'agent_runs_finished_total',
      'agent_runs_stopped_by_budget_total',
      'agent_runs',
      'agent_queue_depth',
      'nodejs_active_handles',
      'process_cpu_user_seconds_total',
    ]) {
      expect(exposition, name).toMatch(new RegExp(`^${name}(\\{| )`, 'm'));
    }
    expect(exposition).toMatch(/^agent_step_latency_seconds_count\{kind="TOOL",outcome="ok"\} 1$/m);
    expect(exposition).toMatch(/^agent_step_latency_seconds_count\{kind="MODEL",outcome="retried"\} 1$/m);
    expect(exposition).toMatch(/^agent_runs_stopped_by_budget_total\{budget="tokens"\} 1$/m);
  });

  it('breaks none of the rules promtool lints, by a parser of them', () => {
    expect(lint(exposition)).toEqual([]);
  });

  it('passes promtool check metrics', () => {
    const probe = spawnSync('promtool', ['--version'], { encoding: 'utf8' });
    if (probe.error) {
      throw new Error(
        `promtool is not installed (${probe.error.message}): install the Debian package prometheus (apt-get install -y prometheus), as .ci/run does`,
      );
    }
    const check = spawnSync('promtool', ['check', 'metrics'], { input: exposition, encoding: 'utf8' });
    expect({ status: check.status, output: (check.stdout + check.stderr).trim() }).toEqual({ status: 0, output: '' });
  });
});
