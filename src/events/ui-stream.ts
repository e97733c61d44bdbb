/**
 * A run's events as the AI SDK's UI message stream (the protocol `useChat` and `readUIMessageStream`
 * read: Server-Sent Events whose data are JSON chunks, ending with `[DONE]`, announced by the response
 * header `x-vercel-ai-ui-message-stream: v1`). Pure: events in, chunks out.
 *
 *   run                 → start {messageId: run id} … finish, then [DONE]
 *   model step          → start-step … finish-step
 *   text.delta          → text-start / text-delta / text-end, one text part per (step, attempt)
 *   thinking.delta      → reasoning-start / reasoning-delta / reasoning-end, likewise
 *   tool.started        → tool-input-available (a dynamic tool: the page needs no tool definitions)
 *   tool.finished       → tool-output-available, or tool-output-error when the tool failed
 *   run.waiting         → for each call waiting for a person (an approval, or a decision after a
 *                         crash): its input, then tool-approval-request (approvalId = the tool_use id,
 *                         the id the decision route takes), so useChat shows it as awaiting approval
 *   run.finished        → error {errorText} first when the run did not succeed
 *   attempt.abandoned   → its text never appears: deltas of attempts the stream already knows to be
 *                         abandoned are skipped; when text of the attempt was already sent, the message
 *                         starts over (start with a new messageId) and what stands is sent again, so
 *                         the reader's latest message holds no void text and nothing twice.
 */
import type { RunEventData } from './protocol.ts';

export type UiChunk = Record<string, unknown> & { type: string };

/** The response header that tells the AI SDK this is a UI message stream. */
export const UI_MESSAGE_STREAM_HEADER = { 'x-vercel-ai-ui-message-stream': 'v1' } as const;

/** The stream's last line. */
export const UI_STREAM_DONE = 'data: [DONE]\n\n';

export function uiFrame(chunk: UiChunk): string {
  return `data: ${JSON.stringify(chunk)}\n\n`;
}

interface Sent {
  chunk: UiChunk;
  /** The (seq, attempt) of a text chunk, to drop it when the attempt is abandoned. */
  attempt?: string;
}

const key = (seq: number, attempt: number) => `${seq}.${attempt}`;

export class UiStreamMapper {
  /** Everything sent for the current message, so it can be sent again without the void text. */
  private sent: Sent[] = [];
  private readonly abandoned = new Set<string>();
  private openText: string | null = null;
  private openStep: number | null = null;
  private readonly stepsStarted = new Set<number>();
  /** Calls whose input the reader has (tool.started, or a wait that listed them). */
  private readonly announced = new Set<string>();
  private restarts = 0;
  private started = false;

  constructor(private readonly runId: string) {}

  /**
   * The chunks for a batch of events. Abandonments anywhere in the batch are applied before its
   * deltas are mapped, so a replay of stored events never sends void text at all.
   */
  map(events: readonly { type: string; data: unknown }[]): UiChunk[] {
    for (const e of events) {
      if (e.type === 'attempt.abandoned') {
        const d = e.data as RunEventData['attempt.abandoned'];
        if (!this.sent.some((s) => s.attempt === key(d.seq, d.attempt))) this.abandoned.add(key(d.seq, d.attempt));
      }
    }
    const out: UiChunk[] = [];
    for (const e of events) out.push(...this.one(e.type, e.data));
    return out;
  }

  private emit(out: UiChunk[], chunk: UiChunk, attempt?: string): void {
    this.sent.push(attempt ? { chunk, attempt } : { chunk });
    out.push(chunk);
  }

  private closeText(out: UiChunk[]): void {
    if (this.openText === null) return;
    const end = this.openText.startsWith('r') ? 'reasoning-end' : 'text-end';
    this.emit(out, { type: end, id: this.openText }, this.openText.slice(1));
    this.openText = null;
  }

  private one(type: string, data: unknown): UiChunk[] {
    const out: UiChunk[] = [];
    if (!this.started) {
      this.started = true;
      out.push({ type: 'start', messageId: this.runId });
    }
    switch (type) {
      case 'step.started': {
        const d = data as RunEventData['step.started'];
        if (d.kind !== 'MODEL' || this.stepsStarted.has(d.seq)) break;
        this.stepsStarted.add(d.seq);
        this.closeText(out);
        if (this.openStep !== null) this.emit(out, { type: 'finish-step' });
        this.openStep = d.seq;
        this.emit(out, { type: 'start-step' });
        break;
      }
      case 'text.delta':
      case 'thinking.delta': {
        const d = data as RunEventData['text.delta'];
        const k = key(d.seq, d.attempt);
        if (this.abandoned.has(k)) break;
        const part = type === 'text.delta' ? 'text' : 'reasoning';
        const id = `${part[0]}${k}`;
        if (this.openText !== id) {
          this.closeText(out);
          this.openText = id;
          this.emit(out, { type: `${part}-start`, id }, k);
        }
        this.emit(out, { type: `${part}-delta`, id, delta: d.text }, k);
        break;
      }
      case 'attempt.abandoned': {
        const d = data as RunEventData['attempt.abandoned'];
        const k = key(d.seq, d.attempt);
        this.abandoned.add(k);
        if (!this.sent.some((s) => s.attempt === k)) break;
        // Text of this attempt is already out: start the message over without it.
        if (this.openText === `t${k}` || this.openText === `r${k}`) this.openText = null;
        this.sent = this.sent.filter((s) => s.attempt !== k);
        this.restarts += 1;
        out.push({ type: 'start', messageId: `${this.runId}-${this.restarts}` }, ...this.sent.map((s) => s.chunk));
        break;
      }
      case 'tool.started': {
        const d = data as RunEventData['tool.started'];
        this.closeText(out);
        if (this.announced.has(d.toolUseId)) break;
        this.announced.add(d.toolUseId);
        this.emit(out, { type: 'tool-input-available', toolCallId: d.toolUseId, toolName: d.toolName, input: d.input, dynamic: true });
        break;
      }
      case 'run.waiting': {
        const d = data as RunEventData['run.waiting'];
        if (d.kind !== 'approval' && d.kind !== 'decision') break;
        this.closeText(out);
        for (const c of d.toolCalls) {
          if (!this.announced.has(c.toolUseId)) {
            this.announced.add(c.toolUseId);
            this.emit(out, { type: 'tool-input-available', toolCallId: c.toolUseId, toolName: c.toolName, input: c.input, dynamic: true });
          }
          this.emit(out, { type: 'tool-approval-request', approvalId: c.toolUseId, toolCallId: c.toolUseId });
        }
        break;
      }
      case 'tool.finished': {
        const d = data as RunEventData['tool.finished'];
        this.emit(
          out,
          d.isError
            ? { type: 'tool-output-error', toolCallId: d.toolUseId, errorText: d.output, dynamic: true }
            : { type: 'tool-output-available', toolCallId: d.toolUseId, output: d.output, dynamic: true },
        );
        break;
      }
      case 'run.finished': {
        const d = data as RunEventData['run.finished'];
        this.closeText(out);
        if (this.openStep !== null) out.push({ type: 'finish-step' });
        this.openStep = null;
        if (d.status !== 'SUCCEEDED') out.push({ type: 'error', errorText: d.error ?? `the run ended ${d.status}` });
        out.push({ type: 'finish', finishReason: finishReason(d) });
        break;
      }
      default:
        break;
    }
    return out;
  }
}

function finishReason(d: RunEventData['run.finished']): string {
  if (d.status !== 'SUCCEEDED') return d.status === 'CANCELLED' ? 'other' : 'error';
  return d.stopReason === 'max_tokens' ? 'length' : 'stop';
}
