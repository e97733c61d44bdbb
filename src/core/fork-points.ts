/**
 * Where a run can be forked: after a whole turn, so the fork's conversation is one the model can be
 * asked to continue. That is after a model step that asked for no tools, or after the last result of
 * a turn's tool calls (all of them finished). Pure.
 */
import type { StepKind, StepStatus } from '../domain/types.ts';

export interface TurnRow {
  seq: number;
  kind: StepKind;
  status: StepStatus;
  /** For a MODEL step, how many tool calls its reply asked for. */
  toolUses: number | null;
}

/** The seqs among `rows` (a log, or a part of one starting at a MODEL step, in seq order) after which a fork can start. */
export function wholeTurnEnds(rows: readonly TurnRow[]): number[] {
  const ends: number[] = [];
  let asked = 0;
  let finished = 0;
  let open = false;
  for (const r of rows) {
    if (r.kind === 'MODEL') {
      asked = r.toolUses ?? 0;
      finished = 0;
      open = false;
      if (asked === 0) ends.push(r.seq);
      continue;
    }
    if (r.status === 'STARTED') open = true;
    else finished++;
    if (!open && finished === asked) ends.push(r.seq);
  }
  return ends;
}

/** `seqs` for a message: all of them when few, else the first and last few. */
export function describeSeqs(seqs: readonly number[], max = 20): string {
  if (seqs.length === 0) return 'none yet';
  if (seqs.length <= max) return seqs.join(', ');
  const half = Math.floor(max / 2);
  return `${seqs.slice(0, half).join(', ')}, … (${seqs.length - 2 * half} more), ${seqs.slice(-half).join(', ')}`;
}
