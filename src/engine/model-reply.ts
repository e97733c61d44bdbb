/**
 * A model reply as the engine keeps it. Pure. The text is made storable (see store/storable.ts), the
 * counts are clamped, and the usage of the call's failed attempts (billed, without a result) is added
 * to the reply's own, so the step's tokens and cost are what the call was billed, not a lower bound.
 */
import type { LlmResponse } from '../llm/types.ts';
import { addUsage } from '../domain/types.ts';
import { sameUsage, storableContent, storableCount, storableText, storableUsage } from '../core/storable.ts';
import type { StepWarning } from '../ports/engine-events.ts';
import { withFields } from '../util/with-fields.ts';
import { exact } from '../core/exact-array.ts';

export interface AcceptedReply {
  response: LlmResponse;
  warnings: { warning: StepWarning; detail: string }[];
}

export function acceptReply(reply: LlmResponse): AcceptedReply {
  // What the provider layer already repaired in the wire answer (counts out of range, missing content).
  const warnings: AcceptedReply['warnings'] = (reply.warnings ?? []).map((detail) => ({
    warning: 'provider-value-repaired' as const,
    detail,
  }));
  const content = storableContent(reply.content);
  const stopReason = storableText(reply.stopReason);
  if (content !== reply.content || stopReason !== reply.stopReason) {
    warnings.push({
      warning: 'unstorable-text-replaced',
      detail: 'the model reply held U+0000, a lone surrogate or a malformed block: stored with U+FFFD, or without the block',
    });
  }
  const own = storableUsage(reply.usage);
  const failed = reply.failedAttemptsUsage ? storableUsage(reply.failedAttemptsUsage) : null;
  if (!sameUsage(own, reply.usage) || (failed && !sameUsage(failed, reply.failedAttemptsUsage!))) {
    warnings.push({
      warning: 'usage-out-of-range',
      detail: `the provider reported token counts out of range (${JSON.stringify(reply.usage)}): clamped`,
    });
  }
  const usage = storableUsage(addUsage(own, failed));
  // The conversation keeps the blocks for the rest of the run: in an array of their size, whichever
  // provider's parser made it (their pushes and filters leave room for 16 more).
  return {
    response: withFields(reply, { content: exact(content), stopReason, usage, attempts: Math.max(1, storableCount(reply.attempts)) }),
    warnings,
  };
}
