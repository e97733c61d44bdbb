/**
 * Kept-alive connections to one HTTP endpoint: a `node:http` or `node:https` Agent that reuses its
 * sockets from call to call (no TCP and TLS handshake per call), closes the ones left idle before a
 * server would, and gives up on a connection that takes too long to open. Also tells when a request
 * failed because the server had just closed the kept-alive connection it was sent on.
 */
import http from 'node:http';
import https from 'node:https';
import type { Socket } from 'node:net';

/**
 * @unit milliseconds — how long a socket may stay idle in the pool. Servers close idle connections
 * on their own clock (Node's HTTP server after 5 s, proxies and load balancers usually later); closing
 * ours first means a call is rarely sent on a connection the server is closing. A server that says
 * `Keep-Alive: timeout=N` shortens it further: Node's Agent then closes the socket a second before N.
 */
export const IDLE_SOCKET_MS = 4_000;

/** @unit milliseconds — the longest opening a connection (TCP, then TLS) may take; then the call fails as timed out. */
export const CONNECT_TIMEOUT_MS = 10_000;

const AGENT_OPTIONS: http.AgentOptions = {
  keepAlive: true,
  // No cap. How many calls run at once is bounded above (the worker's step concurrency); a cap here
  // would queue calls out of sight, their wait counting against the time limits, and a queued call
  // that is aborted would stay in the Agent's queue until some socket came free.
  maxSockets: Infinity,
  // Nor on the sockets kept for the next calls (Node keeps 256 and destroys the rest as they come free).
  // Runs in flight call in waves: each waits for its checkpoint between calls, then calls again. With
  // thousands in flight, a cap made every wave open most of its connections anew.
  maxFreeSockets: Infinity,
  // The idle limit: the Agent destroys a pooled socket that saw no traffic this long.
  timeout: IDLE_SOCKET_MS,
  // The most recently used socket first: the least likely to have been closed by the server, and
  // under light traffic the others stay idle and are closed.
  scheduling: 'lifo',
};

class HttpPool extends http.Agent {
  override createConnection(...args: Parameters<http.Agent['createConnection']>): ReturnType<http.Agent['createConnection']> {
    return limitConnect(super.createConnection(...args) as Socket, 'connect');
  }
}

class HttpsPool extends https.Agent {
  override createConnection(...args: Parameters<https.Agent['createConnection']>): ReturnType<https.Agent['createConnection']> {
    return limitConnect(super.createConnection(...args) as Socket, 'secureConnect');
  }
}

/** A pool for `http:` or `https:` URLs (null for any other protocol). */
export function keepAliveAgent(protocol: string): http.Agent | null {
  if (protocol === 'http:') return new HttpPool(AGENT_OPTIONS);
  if (protocol === 'https:') return new HttpsPool(AGENT_OPTIONS);
  return null;
}

/**
 * Destroys `socket` if it is not open (and, for TLS, past its handshake) within CONNECT_TIMEOUT_MS:
 * Node sets no limit of its own, and an unreachable address would otherwise hold the call until the
 * caller's time limit. The message says "timed out", which is how the failure is classified.
 */
function limitConnect(socket: Socket, opened: 'connect' | 'secureConnect'): Socket {
  const timer = setTimeout(() => socket.destroy(new Error(`connect timed out after ${CONNECT_TIMEOUT_MS} ms`)), CONNECT_TIMEOUT_MS);
  timer.unref();
  const done = (): void => clearTimeout(timer);
  socket.once(opened, done);
  socket.once('close', done);
  return socket;
}

/**
 * Whether `error`, which ended `request` before any response, means the server closed the kept-alive
 * connection just as the request went out on it: reset or hung up (both ECONNRESET) or a write to a
 * closed socket (EPIPE), on a socket taken from the pool. An idle connection's close and a new
 * request cross on the wire now and then, however the idle limit is chosen; the server then most
 * likely never read the request, and HTTP clients (Go's, and Node's own advice for keep-alive) send it
 * again on another connection. A fresh connection failing the same way is a real failure.
 */
export function isStaleConnection(request: http.ClientRequest, error: unknown): boolean {
  if (!request.reusedSocket) return false;
  const code = error !== null && typeof error === 'object' ? (error as { code?: unknown }).code : undefined;
  return code === 'ECONNRESET' || code === 'EPIPE';
}
