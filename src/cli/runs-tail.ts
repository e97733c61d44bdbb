/**
 * `runs tail <id>`: follows a run's events (GET /api/runs/{id}/events as SSE, reconnecting with
 * Last-Event-ID) and prints the model's text as it arrives and each step as it finishes; ends when
 * the run does. An abandoned attempt is said to be so on a line of its own, and the text that
 * replaces it follows. `--json`: one event per line, as the API sends them.
 */
import { FollowRunError, followRun } from '../events/follow.ts';
import type { RunEventData } from '../events/protocol.ts';
import { ApiCallError } from './api-client.ts';
import { duration } from './format.ts';
import { type RunsSubcommand, runIdArgument } from './runs-context.ts';

/** What `runs tail` prints for one event (text as is; the rest as lines of their own). */
export class TailPrinter {
  /** Whether the cursor is in the middle of a line of model text. */
  private midLine = false;
  private readonly tools = new Map<string, string>();

  constructor(private readonly out: (text: string) => void) {}

  private line(text: string): void {
    this.out(`${this.midLine ? '\n' : ''}${text}\n`);
    this.midLine = false;
  }

  print(type: string, data: unknown): void {
    switch (type) {
      case 'run.started': {
        const d = data as RunEventData['run.started'];
        this.line(`-- claimed by ${d.worker} (attempt ${d.attempt})`);
        break;
      }
      case 'text.delta': {
        const d = data as RunEventData['text.delta'];
        this.out(d.text);
        this.midLine = !d.text.endsWith('\n');
        break;
      }
      case 'attempt.abandoned': {
        const d = data as RunEventData['attempt.abandoned'];
        this.line(
          `-- step ${d.seq}: attempt ${d.attempt} abandoned (${d.reason}${d.error ? `: ${d.error}` : ''}); the text above it is void`,
        );
        break;
      }
      case 'tool.started': {
        const d = data as RunEventData['tool.started'];
        this.tools.set(d.toolUseId, d.toolName);
        this.line(`-- step ${d.seq}: ${d.toolName} ${JSON.stringify(d.input)}`);
        break;
      }
      case 'step.finished': {
        const d = data as RunEventData['step.finished'];
        const tokens =
          d.kind === 'MODEL' ? ` in=${d.inputTokens ?? 0} out=${d.outputTokens ?? 0}${d.stopReason ? ` stop=${d.stopReason}` : ''}` : '';
        this.line(`-- step ${d.seq} ${d.kind} ${d.status}${tokens} ${duration(d.latencyMs)}`);
        break;
      }
      case 'run.finished': {
        const d = data as RunEventData['run.finished'];
        this.line(`-- run ${d.status}${d.error ? `: ${d.error}` : ''}`);
        break;
      }
      default:
        break;
    }
  }
}

export const tailCommand: RunsSubcommand = {
  name: 'tail',
  args: '<id>',
  summary: 'follow a run: its text as it streams, its steps as they finish, until it ends',
  positionals: 1,
  options: {
    after: { type: 'string', help: 'start after this event id (default: from the beginning)' },
  },
  async run(ctx) {
    const id = runIdArgument(ctx);
    const after = ctx.options.after as string | undefined;
    if (after !== undefined && !/^\d{1,15}$/.test(after)) throw ctx.usage('--after must be an event id (a whole number)');
    const api = ctx.api();
    const printer = new TailPrinter(ctx.out);
    let received = false;
    // A server that cannot be reached at all is an error (exit 1); one that drops the stream is reconnected to.
    const onReconnect = (error: Error) => {
      if (!received)
        throw new ApiCallError(
          `cannot follow run ${id} at ${api.url} (${error.message}): is the server running? (--url or DURABLE_AGENT_URL)`,
          null,
        );
    };
    try {
      for await (const e of followRun(api.url, id, { after: Number(after ?? 0), onReconnect, ...(api.key ? { apiKey: api.key } : {}) })) {
        received = true;
        if (ctx.json) ctx.out(`${JSON.stringify(e)}\n`);
        else printer.print(e.type, e.data);
      }
    } catch (e) {
      if (e instanceof FollowRunError) throw new ApiCallError(`GET /api/runs/${id}/events: ${e.status} ${e.message}`, e.status);
      throw e;
    }
    return 0;
  },
};
