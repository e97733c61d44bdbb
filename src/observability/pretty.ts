/**
 * LOG_FORMAT=pretty: one readable line per event, the lines the README's kill -9 demo shows:
 *   worker-A run=6f1c0a52 seq=1 MODEL stop=tool_use in=812 out=64 latency=1830ms
 *   worker-A run=6f1c0a52 seq=2 TOOL list_tickets id=toolu_01Ab started
 *   worker-B run=6f1c0a52 resumed at seq=2
 *   worker-B run=6f1c0a52 seq=2 TOOL list_tickets id=toolu_01Ab done 41ms
 *   worker-B run=6f1c0a52 SUCCEEDED tokens=2226
 * The run context becomes the prefix. Engine events (the `event` field, see log-events.ts) have their
 * own short form, showing the unusual (cache tokens, retries, errors) only when it happened; the
 * JSON line keeps everything. Any other line prints its message and its scalar fields.
 */
import { Writable } from 'node:stream';

type Line = Record<string, unknown>;

const SHORT: Record<string, string> = {
  stop_reason: 'stop',
  input_tokens: 'in',
  output_tokens: 'out',
  cache_read_input_tokens: 'cache_read',
  cache_creation_input_tokens: 'cache_write',
  tool_use_id: 'id',
};
const PREFIX = new Set(['level', 'time', 'msg', 'run_id', 'step_seq', 'worker', 'kind', 'tool_name', 'event']);
const LEVELS: Record<number, string> = { 10: 'TRACE', 20: 'DEBUG', 30: '', 40: 'WARN', 50: 'ERROR', 60: 'FATAL' };

const positive = (v: unknown) => typeof v === 'number' && v > 0;

function errorText(line: Line): string[] {
  const err = line.err as { message?: unknown } | undefined;
  return err && typeof err === 'object' && err.message !== undefined ? [`err=${String(err.message)}`] : [];
}

/** The body of each engine event's line, after the prefix. */
const EVENTS: Record<string, (l: Line) => string[]> = {
  model_step: (l) => [
    `stop=${l.stop_reason}`,
    `in=${l.input_tokens}`,
    `out=${l.output_tokens}`,
    ...(positive(l.cache_read_input_tokens) ? [`cache_read=${l.cache_read_input_tokens}`] : []),
    ...(positive(l.cache_creation_input_tokens) ? [`cache_write=${l.cache_creation_input_tokens}`] : []),
    `latency=${l.latency_ms}ms`,
    ...(Number(l.attempts) > 1 ? [`attempts=${l.attempts}`] : []),
  ],
  model_failed: (l) => [
    'failed',
    ...(l.http_status !== undefined ? [`http=${l.http_status}`] : []),
    `latency=${l.latency_ms}ms`,
    ...errorText(l),
  ],
  tool_started: (l) => [`id=${l.tool_use_id}`, l.resumed ? 'started again (resumed)' : 'started'],
  tool_step: (l) => [`id=${l.tool_use_id}`, l.status === 'ERROR' ? 'error' : 'done', `${l.latency_ms}ms`],
  run_claimed: (l) => [positive(l.resumed_at_seq) ? `resumed at seq=${l.resumed_at_seq}` : 'claimed'],
  run_finished: (l) => [String(l.status), `tokens=${l.tokens_used}`, ...(l.error ? [`error=${String(l.error)}`] : [])],
  lease_lost: () => ['lease lost'],
  attempt_ended: (l) => [`attempt ended (${l.reason})`, ...errorText(l)],
};

function generic(line: Line): string[] {
  const parts: string[] = [];
  if (line.msg) parts.push(String(line.msg));
  for (const [k, v] of Object.entries(line)) {
    if (PREFIX.has(k) || v === undefined || v === null || typeof v === 'object') continue;
    parts.push(k === 'latency_ms' ? `latency=${v}ms` : `${SHORT[k] ?? k}=${v}`);
  }
  for (const [k, v] of Object.entries(line)) {
    if (!PREFIX.has(k) && v && typeof v === 'object' && 'message' in v) parts.push(`${k}=${String((v as { message: unknown }).message)}`);
  }
  return parts;
}

export function formatPretty(line: Line): string {
  const parts: string[] = [];
  const level = LEVELS[Number(line.level)] ?? '';
  if (level) parts.push(level);
  if (line.worker) parts.push(String(line.worker));
  if (line.run_id) parts.push(`run=${String(line.run_id).slice(0, 8)}`);
  if (line.step_seq !== undefined) parts.push(`seq=${line.step_seq}`);
  if (line.kind) parts.push(String(line.kind));
  if (line.tool_name) parts.push(String(line.tool_name));
  const render = typeof line.event === 'string' ? EVENTS[line.event] : undefined;
  parts.push(...(render ? render(line) : generic(line)));
  return parts.join(' ');
}

export function prettyStream(out: NodeJS.WritableStream = process.stdout): Writable {
  return new Writable({
    write(chunk: Buffer, _enc, done) {
      for (const text of chunk.toString('utf8').split('\n')) {
        if (!text) continue;
        try {
          out.write(formatPretty(JSON.parse(text) as Line) + '\n');
        } catch {
          out.write(text + '\n');
        }
      }
      done();
    },
  });
}
