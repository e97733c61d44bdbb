/**
 * What a pooled connection carries once it is open: the connect limit (http-pool.ts) leaves nothing
 * on it, so a pooled socket holds the listeners of Node's own keep-alive Agent and no more; and how
 * long a free one is kept: IDLE_SOCKET_MS, or less when the server says so, with no timer on a socket.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Socket } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { IDLE_SOCKET_MS, keepAliveAgent } from '../../src/llm/http-pool.ts';

let server: http.Server;
let url: URL;

beforeAll(async () => {
  server = http.createServer((req, res) => {
    if (req.url === '/short') res.setHeader('keep-alive', 'timeout=2');
    res.end('ok');
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  url = new URL(`http://127.0.0.1:${(server.address() as AddressInfo).port}/`);
});
afterAll(async () => {
  server.closeAllConnections();
  await new Promise((resolve) => server.close(resolve));
});

/** The socket one GET through `agent` was answered on, once the answer was read and the socket is free again. */
async function pooledSocket(agent: http.Agent, path = '/'): Promise<Socket> {
  const socket = await new Promise<Socket>((resolve, reject) => {
    const req = http.get(new URL(path, url), { agent }, (res) => {
      res.resume();
      res.on('end', () => resolve(req.socket!));
    });
    req.on('error', reject);
  });
  // The Agent takes the socket back after the response's end, on a later tick.
  await new Promise((resolve) => setImmediate(resolve));
  return socket;
}

/** The timer Node keeps on `socket` for its `setTimeout` (its kTimeout slot), if it ever had one. */
const timerOf = (socket: Socket): unknown => {
  const slot = Object.getOwnPropertySymbols(socket).find((symbol) => symbol.description === 'timeout');
  return slot === undefined ? undefined : (socket as unknown as Record<symbol, unknown>)[slot];
};

const listeners = (socket: Socket) =>
  Object.fromEntries(['connect', 'close', 'error', 'timeout', 'free'].map((event) => [event, socket.listenerCount(event)]));

describe('the keep-alive pool', () => {
  it("keeps no timer on a socket, where Node's Agent with an idle limit keeps one on each", async () => {
    const nodes = new http.Agent({ keepAlive: true, timeout: 4_000 });
    try {
      expect(timerOf(await pooledSocket(nodes))).toBeTruthy();
    } finally {
      nodes.destroy();
    }
  });

  it('leaves no listener of its connect limit on a pooled socket: the same ones as on a socket of Node’s own Agent', async () => {
    const ours = keepAliveAgent(url, {})!;
    const nodes = new http.Agent({ keepAlive: true, timeout: 4_000 });
    try {
      const [mine, theirs] = [await pooledSocket(ours), await pooledSocket(nodes)];
      expect(Object.values(ours.freeSockets).flat()).toContain(mine);
      expect(listeners(mine)).toEqual(listeners(theirs));
    } finally {
      ours.destroy();
      nodes.destroy();
    }
  });

  it('closes a free socket within its idle limit, with no timer on the socket (nor on one carrying a call)', async () => {
    const agent = keepAliveAgent(url, {})!;
    try {
      const socket = await new Promise<Socket>((resolve, reject) => {
        const req = http.get(url, { agent }, (res) => {
          // Carrying this call: no timer kept with it.
          expect(timerOf(req.socket!) ?? null).toBeNull();
          res.resume();
          res.on('end', () => resolve(req.socket!));
        });
        req.on('error', reject);
      });
      await new Promise((resolve) => setImmediate(resolve));
      const freedAt = performance.now();
      expect(Object.values(agent.freeSockets).flat()).toContain(socket);
      expect(timerOf(socket) ?? null).toBeNull();
      await new Promise((resolve) => socket.once('close', resolve));
      const idleMs = performance.now() - freedAt;
      expect(idleMs).toBeGreaterThan(IDLE_SOCKET_MS - 600);
      expect(idleMs).toBeLessThan(IDLE_SOCKET_MS + 1_000);
      expect(Object.values(agent.freeSockets).flat()).not.toContain(socket);
    } finally {
      agent.destroy();
    }
  });

  it("closes a free socket a second before the server's own Keep-Alive timeout, as Node's Agent does", async () => {
    const agent = keepAliveAgent(url, {})!;
    try {
      const socket = await pooledSocket(agent, '/short');
      const freedAt = performance.now();
      await new Promise((resolve) => socket.once('close', resolve));
      // timeout=2: closed after about one second idle, well before the server's two.
      expect(performance.now() - freedAt).toBeLessThan(1_500);
    } finally {
      agent.destroy();
    }
  });
});
