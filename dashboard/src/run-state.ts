/**
 * Where a run stands, in words for its page's header: how long it took once finished, how long it has
 * been running, what a waiting run waits for and since when, when a queued run is tried again, and why
 * its last attempt ended. Pure: the same run and clock always read the same.
 */
import { formatAge, formatClock, formatDuration } from './format.ts';
import type { Run, Waiting } from './types.ts';

/** Which of the phrases below a run's header shows (a data attribute the page's tests and styles read). */
export type RunState = 'finished' | 'running' | 'queued' | 'retry' | 'waiting';

const at = (iso: string, now: Date) => formatClock(new Date(iso), now);

/** "close_ticket", or "2 tool calls". */
function calls(w: Waiting): string {
  const list = w.toolCalls ?? [];
  return list.length === 1 ? list[0]!.toolName : `${list.length} tool calls`;
}

/** What a WAITING run waits for, since when and until when. */
export function waitingPhrase(w: Waiting | null | undefined, now: Date): string {
  if (!w) return 'waiting';
  const since = `since ${at(w.since, now)} (${formatAge(now.getTime() - Date.parse(w.since))})`;
  switch (w.kind) {
    case 'approval':
      return `waiting for approval of ${calls(w)} ${since}${w.expiresAt ? ` · denied if undecided at ${at(w.expiresAt, now)}` : ''}`;
    case 'decision':
      return `waiting for a decision on ${calls(w)}, cut off when its worker stopped, ${since}`;
    case 'timer':
      return w.wakeAt
        ? `sleeping until ${at(w.wakeAt, now)} (in ${formatDuration(Math.max(0, Date.parse(w.wakeAt) - now.getTime()))}) · ${since}`
        : `sleeping ${since}`;
    default:
      return `waiting ${since}`;
  }
}

/** The header's phrase for the run's state, and which state it is. */
export function runStatePhrase(run: Run, now: Date): { state: RunState; text: string } {
  const created = Date.parse(run.createdAt);
  if (run.finishedAt) return { state: 'finished', text: `took ${formatDuration(Date.parse(run.finishedAt) - created)}` };
  if (run.status === 'WAITING') return { state: 'waiting', text: waitingPhrase(run.waiting, now) };
  if (run.status === 'QUEUED') {
    if (!run.nextAttemptAt) return { state: 'queued', text: 'in the queue' };
    const wait = Math.max(0, Date.parse(run.nextAttemptAt) - now.getTime());
    return { state: 'retry', text: `in the queue until ${at(run.nextAttemptAt, now)} (in ${formatDuration(wait)})` };
  }
  return { state: 'running', text: `running for ${formatDuration(now.getTime() - created)}` };
}

/** Why the last attempt of an unfinished run ended (a model outage, a crash), or null when none did. */
export function lastAttemptNote(run: Run, now: Date): string | null {
  const e = run.lastError;
  if (!e || run.finishedAt) return null;
  return `Attempt ${e.attempt} ended ${formatAge(now.getTime() - Date.parse(e.at))}: ${e.message}`;
}
