/**
 * Prometheus metrics, fed by engine events rather than calls sprinkled through the loop.
 *
 * Counters and the latency histogram count what THIS process did (Prometheus sums them across
 * processes). The two gauges describe the whole system, so they are read from the database at scrape
 * time: every process reports the same truth, however many workers share the database.
 *
 * Labels are bounded on purpose: model (the known models, else "other"), direction, kind, outcome,
 * status, reason, agent (names of agents in code, which runs can only name when a runtime knows them). Run ids belong in logs and traces, never in labels, where each one would be a new
 * time series.
 */
import client from 'prom-client';
import { RUN_STATUSES } from '../domain/types.ts';
import type { EngineEvents } from '../ports/engine-events.ts';

/** Where the gauges are read from; called as methods, so an object such as the store's RunStats is a source. */
export interface MetricsSources {
  /** Runs per status, from the database. */
  countRunsByStatus: () => Promise<Record<string, number>>;
  /** Runs a worker could claim right now, per agent, from the database. */
  queueDepth: () => Promise<Record<string, number>>;
  /**
   * @unit milliseconds — how long a scrape waits for one database read before it keeps the last
   * values; a scrape must not hang on a slow database. Default 2000.
   */
  readTimeoutMs?: number;
}

export interface MetricLabels {
  /**
   * The model names that get a label of their own: those of the prices file and DEFAULT_MODEL. A run
   * may name any model, and each name would be a new time series; every other name counts as "other".
   */
  models: Iterable<string>;
  /** The agents this process serves: their queue depth is reported, 0 when none wait. */
  agents?: Iterable<string>;
}

export interface Metrics {
  registry: client.Registry;
  events: EngineEvents;
  /** Give it to the retry decorator: `onRetry: (e) => metrics.onLlmRetry(retryReason(e))`. */
  onLlmRetry(reason: string): void;
  render(): Promise<{ contentType: string; body: string }>;
}

/** @unit seconds — from a fast tool (10 ms) to a long model call (2 min). */
const LATENCY_BUCKETS = [0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 20, 30, 60, 120];

/**
 * Node's default gauges whose names end in _total, which the exposition format keeps for counters
 * (`promtool check metrics` rejects them). Each is the sum of a gauge of the same name without the
 * suffix, by `type`, which stays: `sum(nodejs_active_handles)` gives the same number.
 */
const MISNAMED_DEFAULTS = ['nodejs_active_handles_total', 'nodejs_active_requests_total', 'nodejs_active_resources_total'];

/** Runs `read`, failing when it throws, rejects, or takes longer than `ms`. */
function readWithin<T>(read: () => Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`database read took longer than ${ms} ms`)), ms);
  });
  return Promise.race([Promise.resolve().then(read), timeout]).finally(() => clearTimeout(timer));
}

export function createMetrics(sources: MetricsSources, labels: MetricLabels): Metrics {
  const registry = new client.Registry();
  client.collectDefaultMetrics({ register: registry });
  for (const name of MISNAMED_DEFAULTS) registry.removeSingleMetric(name);
  const readTimeoutMs = sources.readTimeoutMs ?? 2000;
  const servedAgents = [...(labels.agents ?? [])];
  const registers = [registry];

  const tokens = new client.Counter({
    name: 'agent_tokens_total',
    help: 'Tokens of model calls, by model and direction (input, output, cache_write, cache_read)',
    labelNames: ['model', 'direction'] as const,
    registers,
  });
  const cost = new client.Counter({
    name: 'agent_cost_usd_total',
    help: 'Cost of model calls in USD, priced from the prices file',
    labelNames: ['model'] as const,
    registers,
  });
  const latency = new client.Histogram({
    name: 'agent_step_latency_seconds',
    help: 'Duration of steps; outcome is ok, error, or retried (a model step that took more than one call)',
    labelNames: ['kind', 'outcome'] as const,
    buckets: LATENCY_BUCKETS,
    registers,
  });
  const retries = new client.Counter({
    name: 'agent_llm_retries_total',
    help: 'Model calls retried, by reason (429, 529, 5xx, timeout, network)',
    labelNames: ['reason'] as const,
    registers,
  });
  const leaseLost = new client.Counter({
    name: 'agent_lease_lost_total',
    help: 'Attempts stopped because another worker took the run over (the lease had lapsed)',
    registers,
  });
  const claimed = new client.Counter({ name: 'agent_runs_claimed_total', help: 'Runs claimed by this process', registers });
  const finished = new client.Counter({
    name: 'agent_runs_finished_total',
    help: 'Runs finished by this process, by terminal status',
    labelNames: ['status'] as const,
    registers,
  });
  const stoppedByBudget = new client.Counter({
    name: 'agent_runs_stopped_by_budget_total',
    help: 'Runs this process ended because a limit was reached, by the kind of limit (tokens, cost, steps, time)',
    labelNames: ['budget'] as const,
    registers,
  });
  const attemptsEnded = new client.Counter({
    name: 'agent_attempts_ended_total',
    help: 'Attempts that ended without finishing their run (crash, database, handed-back); another worker resumes it',
    labelNames: ['reason'] as const,
    registers,
  });
  // The gauges are read from the database once per scrape: the first collect() starts the reads and
  // the others share them, so the failure counter below reports a failure in the same scrape.
  const runs = new client.Gauge({
    name: 'agent_runs',
    help: 'Runs by status, read from the database at scrape time',
    labelNames: ['status'] as const,
    registers,
    collect: () => refresh(),
  });
  const depth = new client.Gauge({
    name: 'agent_queue_depth',
    help: 'Runs claimable now, by agent: QUEUED and due, or RUNNING with a lapsed lease; read from the database',
    labelNames: ['agent'] as const,
    registers,
    collect: () => refresh(),
  });
  const readFailures = new client.Counter({
    name: 'agent_metrics_read_failures_total',
    help: 'Database reads for the gauges that failed or timed out at scrape time; the gauges then kept their last values',
    labelNames: ['gauge'] as const,
    registers,
    collect: () => refresh(),
  });

  // A failed or slow read keeps the previous values (the gauge holds them) instead of failing the
  // whole scrape: losing every metric because the database blinked would hide the very incident.
  let inFlight: Promise<void> | null = null;
  function refresh(): Promise<void> {
    inFlight ??= Promise.allSettled([
      readWithin(() => sources.countRunsByStatus(), readTimeoutMs).then(
        (counts) => {
          // Every known status is present, 0 when none, so dashboards and alerts never see a gap;
          // a status added by a later migration shows up before this list learns of it.
          for (const status of RUN_STATUSES) runs.set({ status }, counts[status] ?? 0);
          for (const [status, n] of Object.entries(counts)) runs.set({ status }, n);
        },
        () => readFailures.inc({ gauge: 'agent_runs' }),
      ),
      readWithin(() => sources.queueDepth(), readTimeoutMs).then(
        (byAgent) => {
          // An agent's runs leave the queue, so its series drops to 0 rather than keeping its last value.
          depth.reset();
          for (const agent of servedAgents) depth.set({ agent }, 0);
          for (const [agent, n] of Object.entries(byAgent)) depth.set({ agent }, n);
        },
        () => readFailures.inc({ gauge: 'agent_queue_depth' }),
      ),
    ]).then(() => {
      inFlight = null;
    });
    return inFlight;
  }

  const models = new Set(labels.models);
  const modelLabel = (model: string): string => (models.has(model) ? model : 'other');

  const events: EngineEvents = {
    runClaimed() {
      claimed.inc();
    },
    modelStep({ run, response, latencyMs, costUsd }) {
      // The model the run asked for, as the price table priced the call; a name it does not list is
      // "other" (the demo model accepts any name a client sends, and the provider's accepted names
      // include every dated id).
      const model = modelLabel(run.model);
      const u = response.usage;
      tokens.inc({ model, direction: 'input' }, u.inputTokens);
      tokens.inc({ model, direction: 'output' }, u.outputTokens);
      tokens.inc({ model, direction: 'cache_write' }, u.cacheCreationInputTokens);
      tokens.inc({ model, direction: 'cache_read' }, u.cacheReadInputTokens);
      // Incremented even by 0 so the series exists from the first call (rate() works at once).
      cost.inc({ model }, Math.max(0, costUsd));
      latency.observe({ kind: 'MODEL', outcome: response.attempts > 1 ? 'retried' : 'ok' }, latencyMs / 1000);
    },
    modelFailed({ latencyMs }) {
      latency.observe({ kind: 'MODEL', outcome: 'error' }, latencyMs / 1000);
    },
    toolStep({ status, latencyMs }) {
      latency.observe({ kind: 'TOOL', outcome: status === 'ERROR' ? 'error' : 'ok' }, latencyMs / 1000);
    },
    runFinished({ status, budget }) {
      finished.inc({ status });
      if (budget) stoppedByBudget.inc({ budget });
    },
    leaseLost() {
      leaseLost.inc();
    },
    attemptEnded({ reason }) {
      attemptsEnded.inc({ reason });
    },
  };

  return {
    registry,
    events,
    onLlmRetry(reason) {
      retries.inc({ reason });
    },
    async render() {
      return { contentType: registry.contentType, body: await registry.metrics() };
    },
  };
}
