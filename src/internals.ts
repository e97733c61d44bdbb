/**
 * `durable-agent/internals`: the parts the runtime is wired from, for programs that wire their own
 * (a custom process layout, a store of their own around the engine, tests).
 *
 * No stability promise: anything here may change or go in any release, minor and patch included.
 * Use `durable-agent` (createRuntime, defineAgent, tool) where it can do the job.
 */
export { startRuntime, DEMO_AGENT, type AgentOptions, type Runtime, type RuntimeOptions } from './runtime/start-runtime.ts';
export { loadConfig, loadClientConfig, type ClientConfig, type Config, type Env } from './config/environment.ts';
export { createPool, type Database } from './db/pool.ts';
export { migrate, MIGRATIONS_DIR, type MigrateOptions } from './db/migrate.ts';
export { RunStore, type RunStoreOptions } from './store/run-store.ts';
export { RunRecords, type NewRun } from './store/run-records.ts';
export { Worker, type AgentDefinition, type WorkerDeps, type WorkerNotifications, type WorkerOptions } from './engine/worker.ts';
export { ToolExecutor, type ToolExecutorOptions } from './tools/executor.ts';
export type { ToolSource } from './tools/tool-source.ts';
export { livenessSession, leaseOnlyLiveness, type LivenessSessionOptions } from './leases/liveness-session.ts';
export type {
  ClaimedRun,
  DrivenRun,
  EngineStore,
  LeaseKeeperFactory,
  OwnerLiveness,
  OwnerLivenessFactory,
  OwnerLivenessListener,
} from './ports/engine-store.ts';
export { claimedRun, publicRun } from './ports/claimed-run.ts';
export { combineEvents, type EngineEvents, type StepWarning } from './ports/engine-events.ts';
export type { Metrics } from './observability/metrics.ts';
export { InconsistentLogError, PermanentDatabaseError, StepNotStartedError } from './domain/errors.ts';
