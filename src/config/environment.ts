import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { z } from 'zod';
import { type CrashPlan, parseCrashPlan } from '../engine/crash-points.ts';
import { ConfigError } from '../domain/errors.ts';
import { OTLP_PROTOCOLS, type OtelExportConfig, otelExportConfig } from '../observability/otel-config.ts';
import { parseRedactSetting, type RedactPattern } from '../core/redact.ts';
import { type EncryptionKey, parseEncryptionKeys } from './encryption-keys.ts';

/** The root of the installed project (where package.json and prices.json live). */
export const PROJECT_ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');

const number = () => z.coerce.number({ error: 'must be a number' });
const int = (min: number, max: number) =>
  number().int('must be a whole number').min(min, `must be at least ${min}`).max(max, `must be at most ${max}`);
/** "localhost:11434/v1" parses as a URL of scheme "localhost:"; an endpoint needs its http:// written out. */
const httpUrl = () => z.url({ protocol: /^https?$/, error: 'must be an http:// or https:// URL' });

/**
 * Every environment variable the project reads, with its meaning and default (docs/configuration.md is
 * generated from it). Made where it is read, not kept: a runtime or a command reads its whole
 * environment once, and the schemas of its 58 variables held ~0.8 MB for as long as the process lived.
 */
export const envSchema = () => {
  const positive = number().positive('must be greater than 0');
  return z.object({
    DATABASE_URL: z
      .string()
      .min(1)
      .optional()
      .describe(
        'PostgreSQL to use (14 or newer; 14 to 18 are tested). Unset: an embedded PostgreSQL under `DATA_DIR`, shared by every process of the project on the machine',
      ),
    DATABASE_DIRECT_URL: z
      .string()
      .min(1)
      .optional()
      .describe(
        'A direct (session) connection to the database of `DATABASE_URL`, for what a transaction pooler cannot carry: LISTEN/NOTIFY wake-ups and live events, and the liveness lock; when set, those always use it, and start fails unless it reaches the same database. Unset behind a transaction pooler: those are polled every second and a dead worker is noticed when its leases lapse. Not used with the embedded PostgreSQL',
      ),
    DATABASE_POOLER: z
      .enum(['auto', 'transaction', 'none'], { error: 'must be auto, transaction or none' })
      .default('auto')
      .describe(
        '`transaction`: `DATABASE_URL` goes through a pooler in transaction mode (PgBouncer, Supavisor, RDS Proxy …), so no statement is prepared by name and sessions use `DATABASE_DIRECT_URL`; `none`: a direct connection or a session pooler; `auto`: found out at start (a pooler that hands out its servers in turn can pass for a direct connection: say `transaction` in production)',
      ),
    DATABASE_POOL_SIZE: int(1, 1000)
      .optional()
      .describe(
        "Connections of a process's pool through `DATABASE_URL`. Unset: 4, plus the smaller of `WORKER_CONCURRENCY` and 20 with a worker, plus 6 with the API. A worker opens 4 connections more for its step writes (none behind a transaction pooler)",
      ),
    /** Where the embedded PostgreSQL keeps its data when DATABASE_URL is unset. */
    DATA_DIR: z.string().min(1).default('.data').describe('Where the embedded PostgreSQL keeps its data (when `DATABASE_URL` is unset)'),
    /** The PostgreSQL schema of the project's tables. */
    DATABASE_SCHEMA: z
      .string()
      .regex(/^[a-z_][a-z0-9_]{0,62}$/, 'must be a lower-case identifier (letters, digits, _; at most 63)')
      .default('durable_agent')
      .describe('The PostgreSQL schema that holds every table of the project (your `public` is never touched)'),
    PORT: int(0, 65535).default(8080).describe('The port the API listens on (`--port` overrides it)'),
    HOST: z.string().min(1).default('127.0.0.1').describe('The address the API listens on (`--host` overrides it)'),
    WORKER_NAME: z
      .string()
      .min(1)
      .max(200)
      .optional()
      .describe("Lease owner name, in `locked_by` and the timeline's `worker`. Unset: `<hostname>-<pid>`"),
    WORKER_CONCURRENCY: int(1, 10_000).default(32).describe('Runs one worker process drives at once'),
    LEASE_SECONDS: positive
      .default(30)
      .describe(
        "Lease length, the safety net: a stalled worker's runs are taken over this long after its last renewal (renewed every third of it)",
      ),
    /** `session`: a session lock tells at once that a worker died; `lease`: the lease alone (also what a transaction pooler without a direct URL gets). */
    WORKER_LIVENESS: z
      .enum(['session', 'lease'], { error: 'must be session or lease' })
      .default('session')
      .describe(
        "`session`: a dead worker's runs are taken over within a second (its session lock vanished; about 0.7 s); `lease`: when its leases lapse (used behind a transaction pooler when `DATABASE_DIRECT_URL` is unset)",
      ),
    /** Claims a run may take without finishing before it is failed as abandoned (a poison run). */
    MAX_RUN_ATTEMPTS: int(1, 1000)
      .default(5)
      .describe(
        'Claims a run may take without finishing before it is failed as abandoned (hand-backs, model outages and leases lost by a live worker do not count)',
      ),
    /** Fallback poll when no notification arrives; LISTEN/NOTIFY wakes workers sooner. */
    POLL_INTERVAL_MS: int(10, 3_600_000).default(2000).describe('Fallback poll; workers are woken by LISTEN/NOTIFY'),
    LLM_PROVIDER: z
      .enum(['anthropic', 'openai', 'demo'])
      .optional()
      .describe(
        "`anthropic`, `openai` (any server speaking OpenAI's Chat Completions API) or `demo`. Unset: `anthropic` when `ANTHROPIC_API_KEY` is set, else `demo` (with a warning)",
      ),
    ANTHROPIC_API_KEY: z.string().min(1).optional().describe("The Anthropic provider's API key"),
    ANTHROPIC_BASE_URL: z.string().url().optional().describe("The Anthropic provider's endpoint. Unset: `https://api.anthropic.com`"),
    /** Beta features for every call of the Anthropic provider, sent as its `anthropic-beta` header. */
    ANTHROPIC_BETAS: z
      .string()
      .optional()
      .transform((value) =>
        (value ?? '')
          .split(',')
          .map((beta) => beta.trim())
          .filter((beta) => beta !== ''),
      )
      .refine((betas) => betas.every((beta) => /^[\x21-\x2b\x2d-\x7e]+$/.test(beta)), 'must be beta names separated by commas')
      .describe(
        'Beta features the Anthropic provider asks for on every call, comma-separated (e.g. `context-1m-2025-08-07`): sent as its `anthropic-beta` header. Unset: none',
      ),
    OPENAI_API_KEY: z
      .string()
      .min(1)
      .optional()
      .describe("The OpenAI-compatible provider's key (required with `LLM_PROVIDER=openai`; any value for a server that checks none)"),
    /** Any server speaking the Chat Completions API: OpenAI, vLLM, Ollama, LM Studio … (up to /v1). */
    OPENAI_BASE_URL: httpUrl()
      .optional()
      .describe(
        "The OpenAI-compatible provider's endpoint, up to `/v1` (OpenAI, vLLM, Ollama, LM Studio, a gateway). Unset: `https://api.openai.com/v1`",
      ),
    DEFAULT_MODEL: z
      .string()
      .min(1)
      .optional()
      .describe(
        'The model used when a run names none. Unset: `claude-sonnet-4-6`; `gpt-5.4-mini` with `LLM_PROVIDER=openai`; `demo` for the demo model',
      ),
    /** Ask the model for its answer as a stream of events, so text is seen as it is written. */
    LLM_STREAMING: z
      .stringbool({ error: 'must be true or false' })
      .default(true)
      .describe('Ask the model for its answer as a stream of events (`true`/`false`); the step stores the same message either way'),
    MAX_TOKENS: int(1, 200_000).default(4096).describe('`max_tokens` of each model call'),
    STEP_TIMEOUT_SECONDS: positive.default(120).describe('Limit for one model attempt (the HTTP request is aborted)'),
    MAX_ATTEMPTS: int(1, 100).default(5).describe('Attempts a model call makes at most (full jitter, honouring `retry-after`)'),
    RETRY_BASE_MS: int(0, 3_600_000).default(500).describe("The base of the model call retries' backoff"),
    RETRY_CAP_MS: int(0, 3_600_000)
      .default(30_000)
      .describe(
        'The longest a worker waits between model call attempts; a server that asks for longer sends the run back to the queue until then',
      ),
    MAX_STEPS: int(1, 1000).default(50).describe('Step cap per run (a run may set a lower one)'),
    DEFAULT_TOKEN_BUDGET: int(1, 10_000_000).default(100_000).describe("A run's token budget when its request names none"),
    DEFAULT_TIMEOUT_SECONDS: int(1, 86_400).default(600).describe("A run's deadline in seconds when its request names none"),
    TOOL_TIMEOUT_SECONDS: positive.default(60).describe('Limit for one tool call'),
    /** USD a run may spend when its request names no budget; unset: no money limit. */
    DEFAULT_COST_BUDGET_USD: positive
      .max(10_000, 'must be at most 10000')
      .optional()
      .describe(
        'USD a run may spend on model calls when its request names no `costBudgetUsd` (more than 0, at most 10000). Unset: no money limit',
      ),
    /** Idempotent tool calls of one model turn run at once, at most this many. */
    TOOL_CONCURRENCY: int(1, 256).default(4).describe('Idempotent tool calls of one model turn run at once, at most this many'),
    /** The most of a tool's result that is stored (and sent to the model); the rest is cut, with a note. */
    TOOL_RESULT_MAX_BYTES: int(1024, 100 * 1024 * 1024)
      .default(1024 * 1024)
      .describe('The most of a tool result that is stored and sent to the model (UTF-8 bytes); the rest is cut, with a note'),
    WORKSPACE_ROOT: z
      .string()
      .min(1)
      .optional()
      .describe(
        'Where a worker keeps the workspaces of the runs it drives (agents with a `workspace`); nothing there needs to outlive the worker. Unset: `workspaces` under `DATA_DIR`',
      ),
    /** A named crash point that kills the process with SIGKILL when reached (fault-injection tests). */
    DURABLE_AGENT_CRASH_AT: z
      .string()
      .min(1)
      .optional()
      .describe(
        'Fault injection for crash tests: `<point>[:<n>]` makes a worker kill itself with SIGKILL the n-th time it reaches that crash point',
      ),
    PRICES_FILE: z
      .string()
      .min(1)
      .default(path.join(PROJECT_ROOT, 'prices.json'))
      .describe('USD per million tokens per model: `input`, `output`, `cacheWrite`, `cacheRead`'),
    /** How long a stopping worker lets in-flight steps finish before handing their runs back. */
    SHUTDOWN_GRACE_SECONDS: number()
      .nonnegative('must not be negative')
      .default(20)
      .describe('How long a stopping worker lets in-flight steps finish before handing runs back'),
    /** After the grace period, how long steps told to stop may take before their runs are handed back without them. */
    SHUTDOWN_FORCE_SECONDS: number()
      .nonnegative('must not be negative')
      .default(10)
      .describe(
        'Then how long steps told to stop may take before their runs are handed back without them (a non-idempotent tool is always let finish)',
      ),
    DEMO_LATENCY_MS: int(0, 600_000)
      .default(800)
      .describe('How long the demo model takes per call (it streams its text in a few pieces over that time)'),
    METRICS_PORT: int(0, 65535).optional().describe('A worker-only process serves `/metrics` on this port. Unset: none'),
    LOG_FORMAT: z.enum(['json', 'pretty']).default('json').describe('`json` (one object a line) or `pretty`'),
    LOG_LEVEL: z
      .enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'])
      .default('info')
      .describe('The least level that is logged'),
    // The standard OpenTelemetry variables the CLI honours (see observability/otel-config.ts).
    OTEL_SDK_DISABLED: z
      .stringbool({ error: 'must be true or false' })
      .optional()
      .describe('`true`: no trace export, even with an endpoint set'),
    OTEL_TRACES_EXPORTER: z
      .enum(['otlp', 'none'], { error: 'must be otlp or none' })
      .optional()
      .describe('`none`: no trace export, even with an endpoint set'),
    OTEL_EXPORTER_OTLP_ENDPOINT: httpUrl()
      .optional()
      .describe('The CLI exports its traces over OTLP/HTTP to this collector (`/v1/traces` is added). Unset: no export, no SDK loaded'),
    OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: httpUrl().optional().describe('The same for traces alone, used as it is (nothing added)'),
    OTEL_EXPORTER_OTLP_HEADERS: z
      .string()
      .optional()
      .describe('`key=value,…` sent with every export (percent-encoded values; never logged)'),
    OTEL_EXPORTER_OTLP_TRACES_HEADERS: z.string().optional().describe('The same for trace exports alone'),
    OTEL_EXPORTER_OTLP_PROTOCOL: z
      .enum(OTLP_PROTOCOLS, { error: 'must be http/protobuf, http/json or grpc' })
      .optional()
      .describe('`http/protobuf` or `http/json` (`grpc` is refused). Unset: `http/protobuf`'),
    OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: z
      .enum(OTLP_PROTOCOLS, { error: 'must be http/protobuf, http/json or grpc' })
      .optional()
      .describe('The same for trace exports alone'),
    OTEL_SERVICE_NAME: z.string().min(1).optional().describe('The service name the spans are exported under. Unset: `durable-agent`'),
    OTEL_RESOURCE_ATTRIBUTES: z
      .string()
      .optional()
      .describe('More attributes of the exported resource, `key=value,…` (`service.instance.id` is `WORKER_NAME`)'),
    /** API keys: unset → required once a key exists or off loopback; `on` → always; `off` → never (loudly). */
    AUTH: z
      .enum(['on', 'off'], { error: 'must be on or off (unset: keys are required once one exists, or when HOST is not loopback)' })
      .optional()
      .describe(
        '`on`: API keys required even on loopback before the first key exists; `off`: no authentication at all (a loud warning at start). Unset: keys required once one exists, or whenever `HOST` is not loopback',
      ),
    /** Finished runs older than this many days are deleted by workers; unset keeps them for ever. */
    RETENTION_DAYS: positive
      .max(36_500, 'must be at most 36500')
      .optional()
      .describe(
        'Workers delete the runs that finished longer ago than this many days (fractions allowed), at start and every 15 minutes. Unset: kept until deleted',
      ),
    /** Patterns of secrets to redact from run input and tool results, besides the defaults; `off` for none. */
    REDACT: z
      .string()
      .optional()
      .describe(
        'Patterns of secrets to replace with `[redacted]` in what comes into a run from outside the model (input, metadata, tool results, decisions, error texts) before it is stored, and in log lines, besides the defaults: a JSON array of regular expressions, or one per line; `off` for none. Unset: the default list',
      ),
    /** A 32-byte key (base64) that encrypts what runs store; ENCRYPTION_KEYS (`id:key,…`, the first encrypting) to rotate. */
    ENCRYPTION_KEY: z
      .string()
      .optional()
      .describe('A 32-byte key in base64: run payloads are stored encrypted with it. Unset: stored plain'),
    ENCRYPTION_KEYS: z
      .string()
      .optional()
      .describe('`id1:key1,id2:key2`, for rotation: the first encrypts new values, all decrypt; instead of `ENCRYPTION_KEY`'),
  });
};

export type Env = z.infer<ReturnType<typeof envSchema>>;

/** What the commands that talk to a running server (`durable-agent runs …`) read (made where read, as envSchema). */
export const clientEnvSchema = () =>
  z.object({
    DURABLE_AGENT_URL: z
      .url({ protocol: /^https?$/, error: 'must be an http:// or https:// URL' })
      .optional()
      .describe('Where `durable-agent runs …` finds the API. Unset: `http://127.0.0.1:8080`'),
    DURABLE_AGENT_KEY: z.string().min(1).optional().describe('The API key `durable-agent runs …` sends. Unset: none'),
  });

/** The names of every environment variable the project reads. */
export const envVariables = (): string[] => [...Object.keys(envSchema().shape), ...Object.keys(clientEnvSchema().shape)];

export interface ClientConfig {
  /** The API's base URL, without a trailing slash. */
  url: string;
  /** The API key sent as `Authorization: Bearer`; null sends none. */
  key: string | null;
}

/** A client's settings: flags first, then DURABLE_AGENT_URL / DURABLE_AGENT_KEY, then the local server. */
export function loadClientConfig(
  env: Record<string, string | undefined> = process.env,
  flags: { url?: string | undefined } = {},
): Readonly<ClientConfig> {
  const schema = clientEnvSchema();
  const cleaned = Object.fromEntries(Object.entries(env).filter(([k, v]) => k in schema.shape && v !== undefined && v !== ''));
  if (flags.url !== undefined) cleaned.DURABLE_AGENT_URL = flags.url;
  const parsed = schema.safeParse(cleaned);
  if (!parsed.success) {
    const first = parsed.error.issues[0]!;
    const name = flags.url !== undefined && first.path[0] === 'DURABLE_AGENT_URL' ? '--url' : first.path.join('.');
    throw new ConfigError(`invalid configuration: ${name}: ${first.message}`);
  }
  return Object.freeze({
    url: (parsed.data.DURABLE_AGENT_URL ?? 'http://127.0.0.1:8080').replace(/\/+$/, ''),
    key: parsed.data.DURABLE_AGENT_KEY ?? null,
  });
}

export interface Config {
  databaseUrl: string | null;
  /** A direct session connection to the database of `databaseUrl`, for LISTEN and the liveness lock. */
  databaseDirectUrl: string | null;
  /** Whether `databaseUrl` goes through a transaction pooler; `auto`: found out at start. */
  databasePooler: 'auto' | 'transaction' | 'none';
  /** The pool's size; null: from the process's roles (poolSizeFor). */
  databasePoolSize: number | null;
  dataDir: string;
  databaseSchema: string;
  port: number;
  host: string;
  workerName: string;
  workerConcurrency: number;
  leaseMs: number;
  /** How a dead worker is noticed: its session lock vanishing (`session`), or its leases lapsing (`lease`). */
  workerLiveness: 'session' | 'lease';
  maxRunAttempts: number;
  pollIntervalMs: number;
  llmProvider: 'anthropic' | 'openai' | 'demo';
  /** True when the provider was chosen because no key was set, so the banner can warn. */
  llmProviderDefaulted: boolean;
  anthropicApiKey: string | null;
  anthropicBaseUrl: string | null;
  /** ANTHROPIC_BETAS: the Anthropic provider's `anthropic-beta` names; empty: none. */
  anthropicBetas: readonly string[];
  openaiApiKey: string | null;
  openaiBaseUrl: string | null;
  llmStreaming: boolean;
  defaultModel: string;
  maxTokens: number;
  stepTimeoutMs: number;
  maxAttempts: number;
  retryBaseMs: number;
  retryCapMs: number;
  maxSteps: number;
  defaultTokenBudget: number;
  defaultTimeoutSeconds: number;
  /** USD a run may spend when its request names no budget; null: no money limit. */
  defaultCostBudgetUsd: number | null;
  toolTimeoutMs: number;
  /** Idempotent tool calls of one model turn run at once, at most this many. */
  toolConcurrency: number;
  toolResultMaxBytes: number;
  /** Where a worker keeps the workspaces of the runs it drives. */
  workspaceRoot: string;
  /** Armed at start: the process kills itself at this crash point. Null in normal operation. */
  crashAt: CrashPlan | null;
  pricesFile: string;
  shutdownGraceMs: number;
  shutdownForceMs: number;
  demoLatencyMs: number;
  metricsPort: number | null;
  logFormat: 'json' | 'pretty';
  logLevel: Env['LOG_LEVEL'];
  /** Where the CLI exports its spans over OTLP; null: no export, and the OpenTelemetry SDK is not loaded. */
  otel: OtelExportConfig | null;
  /** `on`/`off` when set; null decides by keys and HOST (see api/auth.ts). */
  auth: 'on' | 'off' | null;
  /** @unit milliseconds — finished runs older than this are deleted by workers; null keeps them. */
  retentionMs: number | null;
  /** What is redacted from stored text; null when REDACT=off. */
  redact: readonly RedactPattern[] | null;
  /** The keys that encrypt stored payloads, the first for new values; null stores them plain. */
  encryptionKeys: readonly EncryptionKey[] | null;
}

export const DEFAULT_ANTHROPIC_MODEL = 'claude-sonnet-4-6';
export const DEFAULT_OPENAI_MODEL = 'gpt-5.4-mini';
export const DEMO_MODEL = 'demo';
const DEFAULT_MODELS = { anthropic: DEFAULT_ANTHROPIC_MODEL, openai: DEFAULT_OPENAI_MODEL, demo: DEMO_MODEL } as const;

/** Reads the environment (and flag overrides) once into a frozen Config; the only reader of process.env. */
export function loadConfig(env: Record<string, string | undefined> = process.env, overrides: Partial<Env> = {}): Readonly<Config> {
  // An empty variable means "unset", as in most shells' `VAR= command`.
  const cleaned = Object.fromEntries(Object.entries({ ...env, ...overrides }).filter(([, v]) => v !== undefined && v !== ''));
  const parsed = envSchema().safeParse(cleaned);
  if (!parsed.success) {
    const first = parsed.error.issues[0]!;
    throw new ConfigError(`invalid configuration: ${first.path.join('.')}: ${first.message}`);
  }
  const e = parsed.data;
  const llmProvider = e.LLM_PROVIDER ?? (e.ANTHROPIC_API_KEY ? 'anthropic' : 'demo');
  if (llmProvider === 'anthropic' && !e.ANTHROPIC_API_KEY) {
    throw new ConfigError('invalid configuration: LLM_PROVIDER=anthropic needs ANTHROPIC_API_KEY');
  }
  if (llmProvider === 'openai' && !e.OPENAI_API_KEY) {
    // Local servers ignore the key, but the protocol has one: any non-empty value will do for them.
    throw new ConfigError(
      'invalid configuration: LLM_PROVIDER=openai needs OPENAI_API_KEY (any value for a local server that checks none)',
    );
  }
  let crashAt: CrashPlan | null = null;
  if (e.DURABLE_AGENT_CRASH_AT) {
    try {
      crashAt = { ...parseCrashPlan(e.DURABLE_AGENT_CRASH_AT), action: 'kill' };
    } catch (err) {
      throw new ConfigError(`invalid configuration: DURABLE_AGENT_CRASH_AT: ${(err as Error).message}`);
    }
  }
  let redact: RedactPattern[] | null;
  try {
    redact = parseRedactSetting(e.REDACT);
  } catch (err) {
    throw new ConfigError(`invalid configuration: REDACT: ${(err as Error).message}`);
  }
  let encryptionKeys: EncryptionKey[] | null;
  try {
    encryptionKeys = parseEncryptionKeys(e.ENCRYPTION_KEY, e.ENCRYPTION_KEYS);
  } catch (err) {
    throw new ConfigError(`invalid configuration: ${(err as Error).message}`);
  }
  if (e.RETRY_CAP_MS < e.RETRY_BASE_MS) {
    throw new ConfigError('invalid configuration: RETRY_CAP_MS must be at least RETRY_BASE_MS');
  }
  return Object.freeze({
    databaseUrl: e.DATABASE_URL ?? null,
    databaseDirectUrl: e.DATABASE_DIRECT_URL ?? null,
    databasePooler: e.DATABASE_POOLER,
    databasePoolSize: e.DATABASE_POOL_SIZE ?? null,
    dataDir: path.resolve(e.DATA_DIR),
    databaseSchema: e.DATABASE_SCHEMA,
    port: e.PORT,
    host: e.HOST,
    workerName: e.WORKER_NAME ?? `${os.hostname()}-${process.pid}`,
    workerConcurrency: e.WORKER_CONCURRENCY,
    leaseMs: Math.round(e.LEASE_SECONDS * 1000),
    workerLiveness: e.WORKER_LIVENESS,
    maxRunAttempts: e.MAX_RUN_ATTEMPTS,
    pollIntervalMs: e.POLL_INTERVAL_MS,
    llmProvider,
    llmProviderDefaulted: e.LLM_PROVIDER === undefined && llmProvider === 'demo',
    anthropicApiKey: e.ANTHROPIC_API_KEY ?? null,
    anthropicBaseUrl: e.ANTHROPIC_BASE_URL ?? null,
    anthropicBetas: e.ANTHROPIC_BETAS,
    openaiApiKey: e.OPENAI_API_KEY ?? null,
    openaiBaseUrl: e.OPENAI_BASE_URL ?? null,
    llmStreaming: e.LLM_STREAMING,
    defaultModel: e.DEFAULT_MODEL ?? DEFAULT_MODELS[llmProvider],
    maxTokens: e.MAX_TOKENS,
    stepTimeoutMs: Math.round(e.STEP_TIMEOUT_SECONDS * 1000),
    maxAttempts: e.MAX_ATTEMPTS,
    retryBaseMs: e.RETRY_BASE_MS,
    retryCapMs: e.RETRY_CAP_MS,
    maxSteps: e.MAX_STEPS,
    defaultTokenBudget: e.DEFAULT_TOKEN_BUDGET,
    defaultTimeoutSeconds: e.DEFAULT_TIMEOUT_SECONDS,
    defaultCostBudgetUsd: e.DEFAULT_COST_BUDGET_USD ?? null,
    toolTimeoutMs: Math.round(e.TOOL_TIMEOUT_SECONDS * 1000),
    toolConcurrency: e.TOOL_CONCURRENCY,
    toolResultMaxBytes: e.TOOL_RESULT_MAX_BYTES,
    workspaceRoot: path.resolve(e.WORKSPACE_ROOT ?? path.join(e.DATA_DIR, 'workspaces')),
    crashAt,
    pricesFile: path.resolve(e.PRICES_FILE),
    shutdownGraceMs: Math.round(e.SHUTDOWN_GRACE_SECONDS * 1000),
    shutdownForceMs: Math.round(e.SHUTDOWN_FORCE_SECONDS * 1000),
    demoLatencyMs: e.DEMO_LATENCY_MS,
    metricsPort: e.METRICS_PORT ?? null,
    logFormat: e.LOG_FORMAT,
    logLevel: e.LOG_LEVEL,
    otel: otelExportConfig(e),
    auth: e.AUTH ?? null,
    retentionMs: e.RETENTION_DAYS === undefined ? null : Math.round(e.RETENTION_DAYS * 86_400_000),
    redact,
    encryptionKeys,
  });
}

/** What one model call may take and how it is retried: a runtime's settings, for model clients made in code. */
export type ModelCallSettings = Pick<Config, 'stepTimeoutMs' | 'maxAttempts' | 'retryBaseMs' | 'retryCapMs' | 'llmStreaming'>;

/**
 * Read at every model client made in code (a process may make one per tenant): kept once made, five
 * fields of the environment's schema (building the whole one again, and compiling it, took ~20 ms).
 */
let modelCall: ReturnType<typeof pickModelCall> | undefined;
const pickModelCall = () =>
  envSchema().pick({
    STEP_TIMEOUT_SECONDS: true,
    MAX_ATTEMPTS: true,
    RETRY_BASE_MS: true,
    RETRY_CAP_MS: true,
    LLM_STREAMING: true,
  });
const modelCallSchema = () => (modelCall ??= pickModelCall());

/**
 * The model call settings alone (STEP_TIMEOUT_SECONDS, MAX_ATTEMPTS, RETRY_BASE_MS, RETRY_CAP_MS,
 * LLM_STREAMING), with the runtime's defaults: what a model client defined next to an agent is given,
 * so it retries and times out as the runtime's own does. The rest of the environment is not looked at.
 */
export function loadModelCallSettings(env: Record<string, string | undefined> = process.env): Readonly<ModelCallSettings> {
  const cleaned = Object.fromEntries(Object.entries(env).filter(([, v]) => v !== undefined && v !== ''));
  const parsed = modelCallSchema().safeParse(cleaned);
  if (!parsed.success) {
    const first = parsed.error.issues[0]!;
    throw new ConfigError(`invalid configuration: ${first.path.join('.')}: ${first.message}`);
  }
  const e = parsed.data;
  if (e.RETRY_CAP_MS < e.RETRY_BASE_MS) throw new ConfigError('invalid configuration: RETRY_CAP_MS must be at least RETRY_BASE_MS');
  return Object.freeze({
    stepTimeoutMs: Math.round(e.STEP_TIMEOUT_SECONDS * 1000),
    maxAttempts: e.MAX_ATTEMPTS,
    retryBaseMs: e.RETRY_BASE_MS,
    retryCapMs: e.RETRY_CAP_MS,
    llmStreaming: e.LLM_STREAMING,
  });
}
