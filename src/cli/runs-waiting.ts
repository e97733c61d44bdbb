/**
 * What a person can do about a WAITING run, as `runs show` prints it under the run's fields: what it
 * waits for, and the exact commands that act on it, each with what it does. Pure.
 */
import type { WaitingJson } from '../api/schemas.ts';
import { ago } from './format.ts';

/** A shell word: as it is when it is plain, in single quotes otherwise. */
function word(s: string): string {
  return /^[\w.:/@%+=-]+$/.test(s) ? s : `'${s.replace(/'/g, `'\\''`)}'`;
}

/** Commands under one another, their comments lined up. */
function commands(lines: [string, string][], indent: string): string[] {
  const width = Math.max(...lines.map(([c]) => c.length));
  return lines.map(([c, why]) => `${indent}${c.padEnd(width)}  # ${why}`);
}

/**
 * The block for a run waiting as `w` says. `url`: the --url the person gave, carried into the commands
 * so that they ask the same server.
 */
export function waitingActions(runId: string, w: WaitingJson, now: Date, url?: string): string {
  const runs = (sub: string, toolUseId: string | null, ...rest: string[]) =>
    [
      'durable-agent runs',
      sub,
      runId,
      ...(toolUseId === null ? [] : [word(toolUseId)]),
      ...rest,
      ...(url ? ['--url', word(url)] : []),
    ].join(' ');
  const when = (iso: string) => `${iso} (${ago(new Date(iso), now)})`;
  const lines: string[] = [];
  switch (w.kind) {
    case 'approval':
      for (const c of w.toolCalls) {
        lines.push(`  ${c.toolName} (${c.toolUseId}) waits to be approved:`);
        lines.push(
          ...commands(
            [
              [runs('approve', c.toolUseId), 'run it'],
              [runs('deny', c.toolUseId, "--reason '<why>'"), 'do not run it; the model is told why'],
            ],
            '    ',
          ),
        );
      }
      if (w.expiresAt) lines.push(`  undecided calls are denied ("approval timed out") at ${when(w.expiresAt)}`);
      break;
    case 'decision':
      for (const c of w.toolCalls) {
        lines.push(`  ${c.toolName} (${c.toolUseId}) was cut off when its worker stopped, and it is not safe to run twice: did it happen?`);
        lines.push(
          ...commands(
            [
              [runs('complete', c.toolUseId, "--result '<its result>'"), 'it did: the model gets this as its result'],
              [runs('approve', c.toolUseId), 'it did not: run it again'],
              [runs('deny', c.toolUseId, "--reason '<why>'"), 'do not run it; the model is told it may or may not have happened, and why'],
            ],
            '    ',
          ),
        );
      }
      break;
    case 'timer':
      lines.push(
        `  nothing: it sleeps (${w.toolCalls.map((c) => `${c.toolName} ${c.toolUseId}`).join(', ')})${w.wakeAt ? ` until ${when(w.wakeAt)}` : ''} and then continues by itself`,
      );
      lines.push(...commands([[runs('cancel', null), 'or stop it now']], '    '));
      break;
  }
  return `\nwhat you can do:\n${lines.join('\n')}\n`;
}
