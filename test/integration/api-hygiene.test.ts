/**
 * The API against clients that are slow, forged by a browser page, or sent while the database is
 * down, over real sockets (fastify's inject has no socket, no Host of its own and no timeouts).
 */
import type { FastifyInstance } from 'fastify';
import http from 'node:http';
import net from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type ApiDeps, createServer } from '../../src/api/server.ts';
import { freePort } from '../../src/db/embedded.ts';
import { createPool } from '../../src/db/pool.ts';
import { createLogger } from '../../src/observability/logger.ts';
import { RunListing } from '../../src/store/run-listing.ts';
import { RunRecords } from '../../src/store/run-records.ts';
import { testDatabase, type TestDatabase } from '../support/db.ts';
import { newRun } from '../support/engine.ts';

const DEFAULTS = { agent: 'demo', model: 'default-model', tokenBudget: 5_000, timeoutSeconds: 120, maxSteps: 20 };

let db: TestDatabase;
beforeAll(async () => {
  db = await testDatabase();
});
afterAll(async () => {
  await db.close();
});

function server(extra: Partial<ApiDeps> = {}): FastifyInstance {
  return createServer({
    store: db.records,
    listing: new RunListing(db.pool),
    defaults: DEFAULTS,
    checkDatabase: async () => void (await db.pool.query('SELECT 1')),
    logger: false,
    ...extra,
  });
}

/** Starts `app` on `host` and returns its port; closed by the caller. */
async function listening(app: FastifyInstance, host = '127.0.0.1'): Promise<number> {
  await app.listen({ host, port: 0 });
  return (app.server.address() as net.AddressInfo).port;
}

interface Answer {
  status: number;
  headers: http.IncomingHttpHeaders;
  body: any;
}

/** A request with exactly the headers given (Host included), as a browser or a script could send it. */
function request(port: number, method: string, path: string, headers: Record<string, string> = {}, body?: string): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const req = http.request({ host: '127.0.0.1', port, method, path, headers, agent: false }, (res) => {
      let text = '';
      res.on('data', (d: Buffer) => (text += d.toString('utf8')));
      res.on('end', () => resolve({ status: res.statusCode!, headers: res.headers, body: text ? JSON.parse(text) : null }));
    });
    req.on('error', reject);
    req.end(body);
  });
}

describe('while listening on loopback', () => {
  let app: FastifyInstance;
  let port: number;
  beforeAll(async () => {
    app = server();
    port = await listening(app);
  });
  afterAll(async () => {
    await app.close();
  });

  it('answers only a loopback Host: a DNS-rebound name is refused', async () => {
    const run = await newRun(db.records);
    for (const host of [`127.0.0.1:${port}`, `localhost:${port}`, 'LOCALHOST', `app.localhost:${port}`, `[::1]:${port}`, '127.9.9.9']) {
      expect((await request(port, 'GET', `/api/runs/${run.id}`, { host })).status, host).toBe(200);
    }
    for (const host of [
      `attacker.example:${port}`,
      'attacker.example',
      '10.0.0.5',
      'localhost.attacker.example',
      `localhost@attacker.example:${port}`,
      'localhost/x',
    ]) {
      const res = await request(port, 'GET', `/api/runs/${run.id}`, { host });
      expect(res.status, host).toBe(403);
      expect(res.body).toEqual({ error: { code: 'forbidden', message: expect.stringContaining('loopback Host') } });
      expect(JSON.stringify(res.body)).not.toContain(run.id);
    }
    expect((await request(port, 'GET', '/healthz', { host: 'attacker.example' })).status).toBe(403);
  });

  it('refuses a cancel or a new run sent by a page of another site, and keeps the run', async () => {
    const run = await newRun(db.records);
    const local = { host: `127.0.0.1:${port}` };
    for (const origin of ['https://attacker.example', 'null', 'http://127.0.0.1.attacker.example', 'not a url']) {
      const cancel = await request(port, 'POST', `/api/runs/${run.id}/cancel`, { ...local, origin });
      expect(cancel.status, origin).toBe(403);
      expect(cancel.body.error).toEqual({ code: 'forbidden', message: expect.stringContaining('another site') });
      const create = await request(port, 'POST', '/api/runs', { ...local, origin, 'content-type': 'application/json' }, '{"input":"x"}');
      expect(create.status, origin).toBe(403);
    }
    expect((await db.records.state(run.id)).status).toBe('QUEUED');
    // Reading is not state-changing (and the browser keeps a cross-site answer from the page anyway).
    expect((await request(port, 'GET', `/api/runs/${run.id}`, { ...local, origin: 'https://attacker.example' })).status).toBe(200);
    // A page served from this machine, on any port, is the same site; a client without Origin is not a browser page.
    expect((await request(port, 'POST', `/api/runs/${run.id}/cancel`, { ...local, origin: 'http://localhost:3000' })).status).toBe(202);
    const other = await newRun(db.records);
    expect((await request(port, 'POST', `/api/runs/${other.id}/cancel`, local)).status).toBe(202);
  });
});

it('accepts any Host and Origin when listening on every address, where its names cannot be known', async () => {
  const app = server();
  try {
    const port = await listening(app, '0.0.0.0');
    const run = await newRun(db.records);
    expect((await request(port, 'GET', `/api/runs/${run.id}`, { host: 'agents.example.com' })).status).toBe(200);
    const res = await request(port, 'POST', `/api/runs/${run.id}/cancel`, {
      host: 'agents.example.com',
      origin: 'https://dashboard.example.com',
    });
    expect(res.status).toBe(202);
  } finally {
    await app.close();
  }
});

describe('a client too slow to send its request', () => {
  const timeouts = { headersMs: 1_000, requestMs: 2_000, idleMs: 30_000, checkIntervalMs: 100 };

  /** Opens a socket, writes `head`, then one byte of `trickle` every 100 ms; resolves with what came back and when. */
  function slowClient(port: number, head: string, trickle: string): Promise<{ answer: string; afterMs: number }> {
    return new Promise((resolve) => {
      const t0 = Date.now();
      const socket = net.connect(port, '127.0.0.1');
      let answer = '';
      let i = 0;
      const timer = setInterval(() => i < trickle.length && socket.write(trickle[i++]!), 100);
      socket.on('connect', () => socket.write(head));
      socket.on('data', (d) => (answer += d.toString('utf8')));
      socket.on('error', () => {});
      socket.on('close', () => {
        clearInterval(timer);
        resolve({ answer, afterMs: Date.now() - t0 });
      });
    });
  }

  it('is cut off with a 408, whether it trickles its body or its headers', async () => {
    const app = server({ timeouts });
    try {
      const port = await listening(app);
      const head = `POST /api/runs HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n`;
      const trickledBody = slowClient(port, head, ' '.repeat(1000));
      const trickledHeaders = slowClient(port, 'POST /api/runs HTTP/1.1\r\n', 'X-Slow: '.padEnd(1000, 'x'));
      const silent = slowClient(port, '', '');
      for (const { answer, afterMs } of await Promise.all([trickledBody, trickledHeaders, silent])) {
        expect(answer).toMatch(/^HTTP\/1\.1 408 /);
        expect(JSON.parse(answer.slice(answer.indexOf('\r\n\r\n') + 4))).toEqual({
          error: { code: 'request_timeout', message: expect.any(String) },
        });
        expect(afterMs).toBeLessThan(20_000); // it would trickle for 100 s
      }
    } finally {
      await app.close();
    }
  });
});

it('answers a request that is not HTTP in its error shape too', async () => {
  const app = server();
  try {
    const port = await listening(app);
    const answer = await new Promise<string>((resolve) => {
      const socket = net.connect(port, '127.0.0.1', () => socket.write('HELLO THERE\r\n\r\n'));
      let text = '';
      socket.on('data', (d) => (text += d.toString('utf8')));
      socket.on('close', () => resolve(text));
    });
    expect(answer).toMatch(/^HTTP\/1\.1 400 Bad Request\r\n/);
    expect(JSON.parse(answer.slice(answer.indexOf('\r\n\r\n') + 4))).toEqual({
      error: { code: 'bad_request', message: 'the request is not valid HTTP' },
    });
  } finally {
    await app.close();
  }
});

describe('while the database is down', () => {
  it('answers 503 with Retry-After on every route that needs it, and the run routes work again once it is back', async () => {
    const port = await freePort();
    const proxy = new TcpProxy(new URL(db.url), port);
    const pool = createPool(new URL(db.url.replace(/:\d+\//, `:${port}/`)).toString(), 2);
    const records = new RunRecords(pool);
    const app = server({ store: records, listing: new RunListing(pool), checkDatabase: async () => void (await pool.query('SELECT 1')) });
    try {
      await proxy.start();
      const run = await newRun(records);
      await proxy.stop();
      const json = { 'content-type': 'application/json' };
      const asked = [
        await app.inject({ method: 'POST', url: '/api/runs', payload: '{"input":"x"}', headers: json }),
        await app.inject(`/api/runs/${run.id}`),
        await app.inject('/api/runs'),
        await app.inject(`/api/runs/${run.id}/timeline`),
        await app.inject(`/api/runs/${run.id}/steps/1`),
        await app.inject({ method: 'POST', url: `/api/runs/${run.id}/cancel` }),
        await app.inject('/healthz'),
      ];
      for (const res of asked) {
        expect(res.statusCode, res.body).toBe(503);
        expect(res.headers['retry-after']).toBe('5');
        expect(res.json().error).toEqual({ code: 'database_unavailable', message: expect.any(String) });
      }
      await proxy.start();
      expect((await app.inject(`/api/runs/${run.id}`)).statusCode).toBe(200);
    } finally {
      await app.close();
      await pool.end();
      await proxy.stop();
    }
  });
});

describe('what reaches the log', () => {
  it('never the request body nor the values a database error quotes, even on a 500', async () => {
    const lines: string[] = [];
    const logger = createLogger({ level: 'trace', destination: { write: (s: string) => void lines.push(s) } });
    // A real PostgreSQL error about a value: its `where` quotes the JSON it could not parse.
    const dbError = await db.pool.query('SELECT $1::jsonb', ['{"token":"SECRET-IN-VALUE","bad":"\\ud800"}']).catch((e: unknown) => e);
    expect(JSON.stringify(dbError)).toContain('SECRET-IN-VALUE');
    const store = Object.assign(Object.create(db.store), { createOnce: () => Promise.reject(dbError) });
    const app = server({ store, logger });
    try {
      const json = { 'content-type': 'application/json' };
      const failed = await app.inject({
        method: 'POST',
        url: '/api/runs',
        headers: json,
        payload: '{"input":"SECRET-IN-INPUT","metadata":{"token":"SECRET-IN-METADATA"}}',
      });
      expect(failed.statusCode).toBe(500);
      const refused = await app.inject({
        method: 'POST',
        url: '/api/runs',
        headers: json,
        payload: '{"input":"x","metadata":{"token":"SECRET-IN-METADATA","bad":"\\ud800"}}',
      });
      expect(refused.statusCode).toBe(400);
      expect(
        (await app.inject({ method: 'POST', url: '/api/runs', headers: json, payload: '{"input":"SECRET-IN-INPUT",' })).statusCode,
      ).toBe(400);
    } finally {
      await app.close();
    }
    const logged = lines.join('');
    expect(logged).toContain('"code":"22P02"'); // the 500 is logged, with its SQLSTATE
    for (const secret of ['SECRET-IN-VALUE', 'SECRET-IN-INPUT', 'SECRET-IN-METADATA']) expect(logged).not.toContain(secret);
  });
});

/** A TCP relay to the test database that can be shut (connections refused, open ones cut) and reopened. */
class TcpProxy {
  private server: net.Server | null = null;
  private readonly sockets = new Set<net.Socket>();
  constructor(
    private readonly target: URL,
    private readonly port: number,
  ) {}

  start(): Promise<void> {
    this.server = net.createServer((client) => {
      const upstream = net.connect(Number(this.target.port), this.target.hostname);
      for (const s of [client, upstream]) {
        this.sockets.add(s);
        s.on('error', () => {});
        s.on('close', () => this.sockets.delete(s));
      }
      client.pipe(upstream).pipe(client);
    });
    return new Promise((resolve) => this.server!.listen(this.port, '127.0.0.1', resolve));
  }

  async stop(): Promise<void> {
    for (const s of this.sockets) s.destroy();
    await new Promise((resolve) => (this.server ? this.server.close(resolve) : resolve(undefined)));
    this.server = null;
  }
}
