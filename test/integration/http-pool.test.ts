/**
 * What a pooled connection carries once it is open: the connect limit (http-pool.ts) leaves nothing
 * on it, so a pooled socket holds the listeners of Node's own keep-alive Agent and no more.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Socket } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { keepAliveAgent } from '../../src/llm/http-pool.ts';

let server: http.Server;
let url: URL;

beforeAll(async () => {
  server = http.createServer((_req, res) => res.end('ok'));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  url = new URL(`http://127.0.0.1:${(server.address() as AddressInfo).port}/`);
});
afterAll(async () => {
  server.closeAllConnections();
  await new Promise((resolve) => server.close(resolve));
});

/** The socket one GET through `agent` was answered on, once the answer was read and the socket is free again. */
async function pooledSocket(agent: http.Agent): Promise<Socket> {
  const socket = await new Promise<Socket>((resolve, reject) => {
    const req = http.get(url, { agent }, (res) => {
      res.resume();
      res.on('end', () => resolve(req.socket!));
    });
    req.on('error', reject);
  });
  // The Agent takes the socket back after the response's end, on a later tick.
  await new Promise((resolve) => setImmediate(resolve));
  return socket;
}

const listeners = (socket: Socket) =>
  Object.fromEntries(['connect', 'close', 'error', 'timeout', 'free'].map((event) => [event, socket.listenerCount(event)]));

describe('the keep-alive pool', () => {
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
});
