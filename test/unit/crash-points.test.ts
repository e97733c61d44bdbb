import { afterEach, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config/environment.ts';
import type { RunId } from '../../src/domain/types.ts';
import { armCrashPoint, CrashPointError, crashPoint, disarmCrashPoints, parseCrashPlan } from '../../src/engine/crash-points.ts';
import { ConfigError, FatalError } from '../../src/domain/errors.ts';

const run = 'run-1' as RunId;
afterEach(() => disarmCrashPoints());

describe('crash points', () => {
  it('do nothing unless armed', () => {
    expect(() => crashPoint('after-checkpoint', run)).not.toThrow();
  });

  it('throw a FatalError at the n-th hit of the armed point only, then disarm', () => {
    armCrashPoint({ point: 'after-checkpoint', hit: 2 });
    expect(() => crashPoint('after-model-response', run)).not.toThrow();
    expect(() => crashPoint('after-checkpoint', run)).not.toThrow();
    let thrown: unknown;
    try {
      crashPoint('after-checkpoint', run);
    } catch (e) {
      thrown = e;
    }
    expect(thrown).toBeInstanceOf(CrashPointError);
    expect(thrown).toBeInstanceOf(FatalError);
    expect(thrown).toMatchObject({ point: 'after-checkpoint', runId: run });
    expect(() => crashPoint('after-checkpoint', run)).not.toThrow();
  });

  it('count only the hits of the run they were armed for', () => {
    armCrashPoint({ point: 'before-tool-start', runId: 'run-2' as RunId });
    expect(() => crashPoint('before-tool-start', run)).not.toThrow();
    expect(() => crashPoint('before-tool-start', 'run-2' as RunId)).toThrow(CrashPointError);
  });
});

describe('DURABLE_AGENT_CRASH_AT', () => {
  it('parses <name>[:<n>] into a plan that kills the process', () => {
    expect(parseCrashPlan('after-checkpoint')).toEqual({ point: 'after-checkpoint', hit: 1 });
    expect(parseCrashPlan('before-tool-finish:3')).toEqual({ point: 'before-tool-finish', hit: 3 });
    expect(loadConfig({ DURABLE_AGENT_CRASH_AT: 'after-tool-effect:2' }).crashAt).toEqual({
      point: 'after-tool-effect',
      hit: 2,
      action: 'kill',
    });
    expect(loadConfig({}).crashAt).toBeNull();
  });

  it('refuses an unknown point or a bad count in one readable line', () => {
    for (const bad of ['after-lunch', 'after-checkpoint:0', 'after-checkpoint:x', 'AFTER-CHECKPOINT']) {
      expect(() => loadConfig({ DURABLE_AGENT_CRASH_AT: bad })).toThrow(ConfigError);
    }
    expect(() => loadConfig({ DURABLE_AGENT_CRASH_AT: 'after-lunch' })).toThrow(
      /^invalid configuration: DURABLE_AGENT_CRASH_AT: expected <name>\[:<n>\] with a name among after-model-response, after-checkpoint, /,
    );
  });
});

describe('TOOL_RESULT_MAX_BYTES', () => {
  it('defaults to 1 MiB and takes a byte count', () => {
    expect(loadConfig({}).toolResultMaxBytes).toBe(1_048_576);
    expect(loadConfig({ TOOL_RESULT_MAX_BYTES: '4096' }).toolResultMaxBytes).toBe(4096);
    expect(() => loadConfig({ TOOL_RESULT_MAX_BYTES: '10' })).toThrow(/TOOL_RESULT_MAX_BYTES: must be at least 1024/);
  });
});
