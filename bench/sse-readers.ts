/**
 * Readers of one run's event stream for `npm run bench`, in a process of their own so that the API
 * process measured is not also parsing a thousand streams. Connects READERS readers to URL, prints
 * {"ready":true} once each has seen the event whose text is "hello", and at the end prints, for each
 * text, the times (ms since the epoch, sub-millisecond) it reached each reader.
 */
import http from 'node:http';

const url = process.env.URL!;
const readers = Number(process.env.READERS ?? 1000);
const now = () => performance.timeOrigin + performance.now();
const arrivals = new Map<string, number[]>();
let ready = 0;

/** One reader; a connection the server resets (a full accept queue) is made again with Last-Event-ID. */
function reader(): Promise<void> {
  let lastId = 0;
  let sawHello = false;
  const connect = (): Promise<void> =>
    new Promise<void>((resolve, reject) => {
      const headers: Record<string, string> = { accept: 'text/event-stream' };
      if (lastId > 0) headers['last-event-id'] = String(lastId);
      http
        .get(url, { headers, agent: false }, (res) => {
          let buffer = '';
          res.setEncoding('utf8');
          res.on('data', (chunk: string) => {
            const at = now();
            buffer += chunk;
            let end: number;
            while ((end = buffer.indexOf('\n\n')) !== -1) {
              const frame = buffer.slice(0, end);
              buffer = buffer.slice(end + 2);
              const lines = frame.split('\n');
              const id = lines.find((l) => l.startsWith('id: '));
              if (id) lastId = Number(id.slice(4));
              const data = lines.find((l) => l.startsWith('data: '));
              const text = data ? (JSON.parse(data.slice(6)) as { text?: string }).text : undefined;
              if (text === undefined) continue;
              if (text === 'hello' && !sawHello) {
                sawHello = true;
                if (++ready === readers) console.log(JSON.stringify({ ready: true }));
              }
              let list = arrivals.get(text);
              if (!list) arrivals.set(text, (list = []));
              list.push(at);
            }
          });
          res.on('end', resolve);
          res.on('error', reject);
        })
        .on('error', reject);
    });
  const attempt = async (): Promise<void> => {
    for (let tries = 0; ; tries++) {
      try {
        return await connect();
      } catch (e) {
        if (tries > 20) throw e;
        await new Promise((r) => setTimeout(r, 50 + Math.random() * 200));
      }
    }
  };
  return attempt();
}

// Connected in groups, as readers arrive in practice, rather than a thousand SYNs at once.
const all: Promise<void>[] = [];
for (let i = 0; i < readers; i++) {
  all.push(reader());
  if (i % 100 === 99) await new Promise((r) => setTimeout(r, 100));
}
await Promise.all(all);
// Exit once the (large) line is flushed: process.exit right away would cut a piped stdout short.
process.stdout.write(`${JSON.stringify({ arrivals: Object.fromEntries(arrivals) })}\n`, () => process.exit(0));
