/**
 * LOG_FORMAT=pretty: one readable line per event, like
 *   worker-A run=6f1c0a52 seq=1 MODEL stop=tool_use in=812 out=64 latency=1830ms
 * Run and step fields become the prefix; the message follows; known step fields are shortened.
 */
import { Writable } from 'node:stream';

const SHORT: Record<string, string> = {
  stop_reason: 'stop',
  input_tokens: 'in',
  output_tokens: 'out',
  cache_read_input_tokens: 'cache_read',
  cache_creation_input_tokens: 'cache_write',
  tool_use_id: 'id',
};
const HIDDEN = new Set(['level', 'time', 'msg', 'run_id', 'step_seq', 'worker', 'kind', 'tool_name', 'event']);
const LEVELS: Record<number, string> = { 10: 'TRACE', 20: 'DEBUG', 30: '', 40: 'WARN', 50: 'ERROR', 60: 'FATAL' };

export function formatPretty(line: Record<string, unknown>): string {
  const parts: string[] = [];
  const level = LEVELS[Number(line.level)] ?? '';
  if (level) parts.push(level);
  if (line.worker) parts.push(String(line.worker));
  if (line.run_id) parts.push(`run=${String(line.run_id).slice(0, 8)}`);
  if (line.step_seq !== undefined) parts.push(`seq=${line.step_seq}`);
  if (line.kind) parts.push(String(line.kind));
  if (line.tool_name) parts.push(String(line.tool_name));
  if (line.msg) parts.push(String(line.msg));
  for (const [k, v] of Object.entries(line)) {
    if (HIDDEN.has(k) || v === undefined || v === null || typeof v === 'object') continue;
    if (k === 'latency_ms') parts.push(`latency=${v}ms`);
    else parts.push(`${SHORT[k] ?? k}=${v}`);
  }
  for (const [k, v] of Object.entries(line)) {
    if (!HIDDEN.has(k) && v && typeof v === 'object' && 'message' in v) parts.push(`${k}=${String((v as { message: unknown }).message)}`);
  }
  return parts.join(' ');
}

export function prettyStream(out: NodeJS.WritableStream = process.stdout): Writable {
  return new Writable({
    write(chunk: Buffer, _enc, done) {
      for (const text of chunk.toString('utf8').split('\n')) {
        if (!text) continue;
        try {
          out.write(formatPretty(JSON.parse(text) as Record<string, unknown>) + '\n');
        } catch {
          out.write(text + '\n');
        }
      }
      done();
    },
  });
}
