/**
 * The reducer a client of the events protocol needs: for each model step, the text of its latest
 * attempt that was not abandoned. Pure and incremental: fold events as they arrive, read `text` any
 * time. At the end of a run that finished on a model answer, `text` equals the run's `output`.
 */
import type { RunEventData } from './protocol.ts';

export interface StepText {
  seq: number;
  /** The attempt whose text this is (0 before any text). */
  attempt: number;
  text: string;
}

export interface RunFold {
  /** The model steps in order of seq, each with the text that stands. */
  steps: StepText[];
  /** The text of the latest model step: the answer being written, and at the end the run's output. */
  text: string;
  /** run.finished's data once it has arrived. */
  finished: RunEventData['run.finished'] | null;
  /** The id of the last event folded (a cursor to resume from). */
  lastId: number;
}

interface FoldState {
  steps: Map<number, StepText>;
  abandoned: Set<string>;
  finished: RunEventData['run.finished'] | null;
  lastId: number;
}

export class EventFold {
  private readonly s: FoldState = { steps: new Map(), abandoned: new Set(), finished: null, lastId: 0 };

  /** Folds one event in (unknown types are ignored); events at or below the last id are ignored too. */
  add(e: { id: number; type: string; data: unknown }): this {
    const s = this.s;
    if (e.id <= s.lastId) return this;
    s.lastId = e.id;
    const step = (seq: number) => {
      let st = s.steps.get(seq);
      if (!st) s.steps.set(seq, (st = { seq, attempt: 0, text: '' }));
      return st;
    };
    switch (e.type) {
      case 'step.started': {
        const d = e.data as RunEventData['step.started'];
        if (d.kind === 'MODEL') step(d.seq);
        break;
      }
      case 'text.delta': {
        const d = e.data as RunEventData['text.delta'];
        if (s.abandoned.has(`${d.seq}.${d.attempt}`)) break;
        const st = step(d.seq);
        if (d.attempt < st.attempt) break;
        if (d.attempt > st.attempt) Object.assign(st, { attempt: d.attempt, text: '' });
        st.text += d.text;
        break;
      }
      case 'attempt.abandoned': {
        const d = e.data as RunEventData['attempt.abandoned'];
        s.abandoned.add(`${d.seq}.${d.attempt}`);
        const st = s.steps.get(d.seq);
        if (st && st.attempt === d.attempt) st.text = '';
        break;
      }
      case 'run.finished':
        s.finished = e.data as RunEventData['run.finished'];
        break;
      default:
        break;
    }
    return this;
  }

  get result(): RunFold {
    const steps = [...this.s.steps.values()].sort((a, b) => a.seq - b.seq).map((st) => ({ ...st }));
    return { steps, text: steps.at(-1)?.text ?? '', finished: this.s.finished, lastId: this.s.lastId };
  }
}

/** Folds a whole list of events (see EventFold for folding as they come). */
export function foldEvents(events: Iterable<{ id: number; type: string; data: unknown }>): RunFold {
  const fold = new EventFold();
  for (const e of events) fold.add(e);
  return fold.result;
}
