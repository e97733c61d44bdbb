/**
 * Model options: how the model is asked to answer (thinking, sampling, tool choice, max tokens), per
 * agent and per run over the agent's. The schema checks each field; `optionsProblem` checks the
 * combinations a provider refuses, so a run that could never make a call is refused when it is made.
 * Pure: no I/O.
 */
import { z } from 'zod';
import { storableString } from '../core/text-problems.ts';
import type { CallOptions, ModelOptions } from './types.ts';

export const MODEL_OPTION_LIMITS = {
  maxTokens: 200_000,
  /** The Messages API's smallest thinking budget. */
  minThinkingBudget: 1_024,
  stopSequences: 16,
  stopSequenceChars: 200,
} as const;

const ToolChoiceSchema = z
  .union([z.enum(['auto', 'any', 'none']), z.strictObject({ name: storableString(64) })])
  .describe('Which tool the model must call: "auto" (its choice), "any" (one at least), "none", or { name } (that one).');

export const ModelOptionsSchema = z
  .strictObject({
    thinking: z
      .discriminatedUnion('type', [
        z.strictObject({
          type: z.literal('enabled'),
          budgetTokens: z.number().int().min(MODEL_OPTION_LIMITS.minThinkingBudget).max(MODEL_OPTION_LIMITS.maxTokens),
        }),
        z.strictObject({ type: z.literal('adaptive') }),
        z.strictObject({ type: z.literal('disabled') }),
      ])
      .optional()
      .describe(
        `Extended thinking: { type: "enabled", budgetTokens } (at least ${MODEL_OPTION_LIMITS.minThinkingBudget}, below maxTokens), { type: "adaptive" } where the model has it, or { type: "disabled" } (a run's way to turn its agent's off).`,
      ),
    temperature: z.number().min(0).max(2).optional().describe('Sampling temperature; Anthropic models take 0 to 1.'),
    topP: z.number().gt(0).max(1).optional().describe('Nucleus sampling: the probability mass to sample from.'),
    topK: z
      .number()
      .int()
      .min(1)
      .max(1_000)
      .optional()
      .describe('Sample from the K likeliest tokens only (not on OpenAI-compatible APIs).'),
    stopSequences: z
      .array(storableString(MODEL_OPTION_LIMITS.stopSequenceChars))
      .max(MODEL_OPTION_LIMITS.stopSequences)
      .optional()
      .describe('Texts that end the answer when the model writes them (stop_reason "stop_sequence").'),
    toolChoice: ToolChoiceSchema.optional(),
    maxTokens: z
      .number()
      .int()
      .min(1)
      .max(MODEL_OPTION_LIMITS.maxTokens)
      .optional()
      .describe("max_tokens of each call; the agent's when absent."),
  })
  .describe("How the model is asked to answer; over the agent's modelOptions, field by field.");

/** The run's options over the agent's, field by field; null when neither has any. */
export function mergeModelOptions(agent: ModelOptions | null, run: ModelOptions | null): ModelOptions | null {
  if (!agent && !run) return null;
  return { ...agent, ...run };
}

export interface OptionsProblem {
  /** The field, as the request names it (e.g. "modelOptions.toolChoice"). */
  path: string;
  message: string;
}

/**
 * The first combination in `options` the Messages API refuses (with `maxTokens` the call's max tokens),
 * named by field under `prefix`; null when there is none. Thinking allows only automatic tool choice
 * and the default sampling (temperature 1, topP from 0.95, no topK).
 */
export function optionsProblem(options: ModelOptions, maxTokens: number, prefix = 'modelOptions'): OptionsProblem | null {
  const at = (field: string, message: string) => ({ path: `${prefix}.${field}`, message });
  const { thinking, toolChoice } = options;
  if (!thinking || thinking.type === 'disabled') return null;
  if (toolChoice !== undefined && toolChoice !== 'auto' && toolChoice !== 'none') {
    return at('toolChoice', 'with thinking on, toolChoice may only be "auto" or "none"');
  }
  if (options.temperature !== undefined && options.temperature !== 1)
    return at('temperature', 'with thinking on, temperature may only be 1');
  if (options.topK !== undefined) return at('topK', 'cannot be set with thinking on');
  if (options.topP !== undefined && options.topP < 0.95) return at('topP', 'with thinking on, topP must be at least 0.95');
  if (thinking.type === 'enabled' && thinking.budgetTokens >= maxTokens) {
    return at('thinking.budgetTokens', `must be below maxTokens (${maxTokens})`);
  }
  return null;
}

/**
 * What one call sends: the options without maxTokens, and a thinking budget cut to fit the call's
 * max tokens (which a token or money budget near its end can lower). A budget that no longer fits the
 * API's minimum turns thinking off for that call rather than failing it.
 */
export function callOptions(options: ModelOptions | null, maxTokens: number): CallOptions | undefined {
  if (!options) return undefined;
  const { maxTokens: _max, thinking, ...rest } = options;
  if (!thinking || thinking.type === 'disabled') return rest;
  if (thinking.type !== 'enabled' || thinking.budgetTokens < maxTokens) return { ...rest, thinking };
  const budgetTokens = maxTokens - 1;
  return budgetTokens >= MODEL_OPTION_LIMITS.minThinkingBudget ? { ...rest, thinking: { type: 'enabled', budgetTokens } } : rest;
}
