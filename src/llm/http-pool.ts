/**
 * Kept-alive connections to one HTTP endpoint: a `node:http` or `node:https` Agent that reuses its
 * sockets from call to call (no TCP and TLS handshake per call), closes the ones left idle before a
 * server would, and gives up on a connection that takes too long to open. Also tells when a request
 * failed because the server had just closed the kept-alive connection it was sent on.
 *
 * When the environment names a proxy for the endpoint (HTTPS_PROXY, or HTTP_PROXY for an http: one)
 * and NO_PROXY does not exempt it, each connection is opened as a tunnel through the proxy (HTTP
 * CONNECT), then used as a direct one: kept alive, TLS with the endpoint itself. Node's own
 * `proxyEnv` Agent option is not used: it is missing before Node 22.21, which the engines range
 * allows; its NO_PROXY takes `example.com` for that host only, where curl (and most tools) also
 * exempt its subdomains; it sends no Proxy-Authorization when a request's headers are given as a
 * list, as ours are; its connections never say they are open, so the connect limit below would close
 * them; and a malformed proxy URL fails with the URL, password included, in the message.
 */
import http from 'node:http';
import https from 'node:https';
import net, { type Socket } from 'node:net';
import tls from 'node:tls';
import type { Duplex } from 'node:stream';
import { ConfigError } from '../domain/errors.ts';

/**
 * @unit milliseconds — how long a socket may stay idle in the pool. Servers close idle connections
 * on their own clock (Node's HTTP server after 5 s, proxies and load balancers usually later); closing
 * ours first means a call is rarely sent on a connection the server is closing. A server that says
 * `Keep-Alive: timeout=N` shortens it further: the socket is closed a second before N (IdleSockets).
 */
export const IDLE_SOCKET_MS = 4_000;

/** @unit milliseconds — the longest opening a connection (TCP, then TLS) may take; then the call fails as timed out. */
export const CONNECT_TIMEOUT_MS = 10_000;

/** The most a proxy's answer to CONNECT may hold before its blank line: a real one is a few hundred bytes. */
const MAX_TUNNEL_HEAD_BYTES = 16 * 1024;

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
  // No `timeout`: the idle limit is kept by IdleSockets below. Node's would put a timer on every socket
  // for its whole life, the ones carrying a call included (a socket keeps its timer once it had one).
  // The most recently used socket first: the least likely to have been closed by the server, and
  // under light traffic the others stay idle and are closed.
  scheduling: 'lifo',
};

/** @unit milliseconds — how often the free sockets are looked at: one closes between IDLE_SOCKET_MS − this and IDLE_SOCKET_MS idle. */
const IDLE_SWEEP_MS = 500;

/**
 * The idle limit of a pool's free sockets, kept by one timer for the pool (running only while some
 * socket is free) rather than one per socket: a socket that comes free is stamped with the sweep's
 * count, and a sweep destroys the free ones stamped long enough ago. A server's `Keep-Alive:
 * timeout=N` shortens the limit as Node's own Agent does: closed a second before N, not kept at all
 * when N is a second or less (Node's `keepSocketAlive` refuses those).
 */
class IdleSockets {
  /** Free sockets, with the sweep count after which each is closed. */
  private readonly free = new Map<Duplex, number>();
  private sweeps = 0;
  private timer: NodeJS.Timeout | null = null;

  /**
   * `socket` came free, after a response whose Keep-Alive header was `keepAliveHint`; `kept`: what the
   * Agent's own `keepSocketAlive` returned (typed void, but whether the socket is kept), returned.
   */
  freed(socket: Duplex, keepAliveHint: string | undefined, kept: unknown): boolean {
    if (!kept) return false;
    const hintSeconds = keepAliveHint === undefined ? NaN : Number(/^timeout=(\d+)/.exec(keepAliveHint)?.[1]);
    const limitMs = hintSeconds > 0 ? Math.min(IDLE_SOCKET_MS, hintSeconds * 1000 - 1000) : IDLE_SOCKET_MS;
    this.free.set(socket, this.sweeps + Math.max(1, Math.floor(limitMs / IDLE_SWEEP_MS)));
    this.timer ??= setInterval(() => this.sweep(), IDLE_SWEEP_MS).unref();
    return true;
  }

  /** `socket` carries a call again. */
  taken(socket: Duplex): void {
    this.free.delete(socket);
  }

  private sweep(): void {
    const now = ++this.sweeps;
    for (const [socket, closeAt] of this.free) {
      if (socket.destroyed) this.free.delete(socket);
      else if (closeAt <= now) {
        this.free.delete(socket);
        socket.destroy();
      }
    }
    if (this.free.size === 0 && this.timer) {
      clearInterval(this.timer);
      this.timer = null;
    }
  }
}

/** The Keep-Alive header of the response `socket` just carried, read where Node's Agent reads it. */
function keepAliveHint(socket: Duplex): string | undefined {
  const hint = (socket as { _httpMessage?: { res?: http.IncomingMessage } | null })._httpMessage?.res?.headers['keep-alive'];
  return typeof hint === 'string' ? hint : undefined;
}

/** A proxy to tunnel through, from the environment. Its URL is not kept: it may hold a password. */
export interface Proxy {
  /** The proxy's own protocol: `https:` speaks TLS with the proxy, then again with the endpoint inside. */
  protocol: 'http:' | 'https:';
  /** Without the brackets of an IPv6 address. */
  host: string;
  port: number;
  /** `Basic …` from the URL's user and password; null when it has neither. */
  authorization: string | null;
}

type Callback = (error: Error | null, socket: Duplex) => void;

class HttpPool extends http.Agent {
  private readonly idle = new IdleSockets();

  constructor(private readonly tunnelVia: Proxy | null) {
    super(AGENT_OPTIONS);
  }

  override keepSocketAlive(socket: Duplex): boolean {
    return this.idle.freed(socket, keepAliveHint(socket), super.keepSocketAlive(socket));
  }

  override reuseSocket(socket: Duplex, request: http.ClientRequest): void {
    this.idle.taken(socket);
    super.reuseSocket(socket, request);
  }

  override createConnection(options: http.ClientRequestArgs, callback?: Callback): Duplex | null | undefined {
    if (!this.tunnelVia) return limitConnect(super.createConnection(options, callback) as Socket, 'connect');
    // The tunnel, once open, is the connection: the request goes over it as it would to the endpoint.
    openTunnel(this.tunnelVia, options, (error, socket) => callback!(error, socket!));
    return undefined;
  }
}

class HttpsPool extends https.Agent {
  private readonly idle = new IdleSockets();

  constructor(private readonly tunnelVia: Proxy | null) {
    super(AGENT_OPTIONS);
  }

  override keepSocketAlive(socket: Duplex): boolean {
    return this.idle.freed(socket, keepAliveHint(socket), super.keepSocketAlive(socket));
  }

  override reuseSocket(socket: Duplex, request: http.ClientRequest): void {
    this.idle.taken(socket);
    super.reuseSocket(socket, request);
  }

  override createConnection(options: https.RequestOptions, callback?: Callback): Duplex | null | undefined {
    if (!this.tunnelVia) return limitConnect(super.createConnection(options, callback) as Socket, 'secureConnect');
    openTunnel(this.tunnelVia, options, (error, tunnel) => {
      if (error) return callback!(error, tunnel!);
      // TLS with the endpoint inside the tunnel, as the Agent would make it (its session reuse included).
      callback!(
        null,
        limitConnect(super.createConnection({ ...options, socket: tunnel } as https.RequestOptions) as Socket, 'secureConnect'),
      );
    });
    return undefined;
  }
}

/**
 * A pool for `url`'s protocol (null for one that is neither http: nor https:), through the proxy `env`
 * names for it. A proxy variable that cannot be used is a ConfigError naming the variable, never its value.
 */
export function keepAliveAgent(url: URL, env: NodeJS.ProcessEnv = process.env): http.Agent | null {
  if (url.protocol !== 'http:' && url.protocol !== 'https:') return null;
  const proxy = proxyFor(url, env);
  return url.protocol === 'http:' ? new HttpPool(proxy) : new HttpsPool(proxy);
}

/**
 * The proxy the environment names for `url`, as curl and Node read it: `https_proxy` or `HTTPS_PROXY`
 * for an https: URL, `http_proxy` or `HTTP_PROXY` for an http: one (the lower-case name first, an
 * empty one counting as unset), unless `no_proxy` or `NO_PROXY` exempts the URL's host (see
 * `isExempt`). A proxy URL without a scheme is an http:// one, as curl takes it.
 */
export function proxyFor(url: URL, env: NodeJS.ProcessEnv = process.env): Proxy | null {
  const names = url.protocol === 'https:' ? ['https_proxy', 'HTTPS_PROXY'] : ['http_proxy', 'HTTP_PROXY'];
  const variable = names.find((name) => env[name]);
  if (!variable) return null;
  const port = Number(url.port) || (url.protocol === 'https:' ? 443 : 80);
  const noProxy = env.no_proxy || env.NO_PROXY;
  if (noProxy && isExempt(url.hostname, port, noProxy)) return null;
  return parseProxy(env[variable]!.trim(), variable);
}

function parseProxy(value: string, variable: string): Proxy {
  const written = /^[a-z][a-z0-9+.-]*:\/\//i.test(value) ? value : `http://${value}`;
  // The messages name the variable only: its value may carry a password.
  if (!URL.canParse(written)) throw new ConfigError(`${variable} is not a proxy URL`);
  const url = new URL(written);
  if (url.protocol !== 'http:' && url.protocol !== 'https:') {
    throw new ConfigError(`${variable} names a ${url.protocol}// proxy: only http:// and https:// proxies are supported`);
  }
  if (!url.hostname) throw new ConfigError(`${variable} is not a proxy URL: it names no host`);
  const credentials = url.username || url.password ? `${decoded(url.username)}:${decoded(url.password)}` : null;
  return {
    protocol: url.protocol,
    host: url.hostname.replace(/^\[(.*)\]$/, '$1'),
    port: Number(url.port) || (url.protocol === 'https:' ? 443 : 80),
    authorization: credentials === null ? null : `Basic ${Buffer.from(credentials).toString('base64')}`,
  };
}

/** A URL's user or password as written before it was percent-encoded (as it is, if that is not valid encoding). */
function decoded(part: string): string {
  try {
    return decodeURIComponent(part);
  } catch {
    return part;
  }
}

/**
 * Whether NO_PROXY's comma-separated list exempts `hostname` (as a URL gives it) on `port`, as curl
 * reads the list: `*` exempts every host; an entry exempts the host it names and, for a domain, its
 * subdomains, with or without a leading dot (`example.com` and `.example.com` both exempt
 * `api.example.com`; `*.example.com` is read as `.example.com`); `host:port` (`[v6]:port`) only on that
 * port; an IP address only itself, an address range as `10.0.0.0/8` (or IPv6 `fd00::/8`) its addresses.
 * Case and blanks around entries do not matter; names are not resolved.
 */
export function isExempt(hostname: string, port: number, noProxy: string): boolean {
  const host = hostname
    .toLowerCase()
    .replace(/^\[(.*)\]$/, '$1')
    .replace(/\.$/, '');
  const family = net.isIP(host);
  for (const item of noProxy.split(',')) {
    let entry = item.trim().toLowerCase();
    if (entry === '') continue;
    if (entry === '*') return true;
    // "[::1]:8080", "host:8080"; a bare IPv6 address ("::1", "fd00::/8") has more than one colon.
    const withPort = /^\[([^\]]+)\](?::(\d+))?$/.exec(entry) ?? /^([^:]+):(\d+)$/.exec(entry);
    if (withPort) {
      if (withPort[2] !== undefined && Number(withPort[2]) !== port) continue;
      entry = withPort[1]!;
    }
    const slash = entry.indexOf('/');
    if (slash !== -1) {
      if (family !== 0 && inRange(host, family, entry.slice(0, slash), entry.slice(slash + 1))) return true;
      continue;
    }
    entry = entry.replace(/^\*?\./, '').replace(/\.$/, '');
    if (host === entry || (family === 0 && host.endsWith(`.${entry}`))) return true;
  }
  return false;
}

function inRange(host: string, family: number, network: string, prefix: string): boolean {
  if (net.isIP(network) !== family || !/^\d{1,3}$/.test(prefix) || Number(prefix) > (family === 4 ? 32 : 128)) return false;
  const range = new net.BlockList();
  const type = family === 4 ? 'ipv4' : 'ipv6';
  range.addSubnet(network, Number(prefix), type);
  return range.check(host, type);
}

/** A proxy answered CONNECT with another status than 2xx: the tunnel was refused. */
export class ProxyRefusal extends Error {
  constructor(
    /** The proxy's HTTP status (407: it wants credentials, or refused the ones given). */
    readonly status: number,
    authority: string,
  ) {
    super(`the proxy refused a tunnel to ${authority} (HTTP ${status})`);
  }
}

/**
 * Opens a connection to `proxy` and asks it for a tunnel to the request's host and port (CONNECT,
 * with the proxy's credentials when it has some); `done` gets the socket once the proxy answered 2xx,
 * ready to speak to the endpoint through it. Within CONNECT_TIMEOUT_MS, or fails as timed out.
 * Nothing of the proxy's answer but its status goes into an error.
 */
function openTunnel(proxy: Proxy, target: http.ClientRequestArgs, done: (error: Error | null, socket?: Socket) => void): void {
  const host = String(target.host ?? 'localhost');
  const authority = `${net.isIPv6(host) ? `[${host}]` : host}:${Number(target.port)}`;
  const socket =
    proxy.protocol === 'https:'
      ? tls.connect({ host: proxy.host, port: proxy.port, ...(net.isIP(proxy.host) ? {} : { servername: proxy.host }) })
      : net.connect({ host: proxy.host, port: proxy.port });
  socket.setNoDelay(true);
  const opened = proxy.protocol === 'https:' ? 'secureConnect' : 'connect';
  let head: Buffer = Buffer.alloc(0);
  const finish = (error: Error | null): void => {
    clearTimeout(timer);
    socket.off(opened, ask).off('readable', read).off('error', finish).off('close', closed);
    if (error) {
      socket.destroy();
      done(error);
    } else {
      done(null, socket);
    }
  };
  const ask = (): void => {
    const credentials = proxy.authorization ? `proxy-authorization: ${proxy.authorization}\r\n` : '';
    socket.write(`CONNECT ${authority} HTTP/1.1\r\nhost: ${authority}\r\n${credentials}\r\n`);
  };
  // Read in paused mode: the bytes after the answer's blank line (none, from a proxy that waits for the
  // client to speak first) are put back for whoever reads the socket next.
  const read = (): void => {
    for (let chunk = socket.read() as Buffer | null; chunk !== null; chunk = socket.read() as Buffer | null) {
      head = head.length === 0 ? chunk : Buffer.concat([head, chunk]);
      const end = head.indexOf('\r\n\r\n');
      if (end === -1) {
        if (head.length > MAX_TUNNEL_HEAD_BYTES) return finish(new Error('the proxy answered CONNECT with no end to its headers'));
        continue;
      }
      const status = /^HTTP\/1\.[01] (\d{3})/.exec(head.subarray(0, end).toString('latin1'))?.[1];
      if (status === undefined) return finish(new Error('the proxy answered CONNECT with something other than HTTP'));
      if (!status.startsWith('2')) return finish(new ProxyRefusal(Number(status), authority));
      if (end + 4 < head.length) socket.unshift(head.subarray(end + 4));
      return finish(null);
    }
  };
  const closed = (): void => finish(new Error('the proxy closed the connection before the tunnel was open'));
  const timer = setTimeout(
    () => finish(new Error(`connect timed out after ${CONNECT_TIMEOUT_MS} ms (through the proxy)`)),
    CONNECT_TIMEOUT_MS,
  );
  timer.unref();
  socket.once(opened, ask).on('readable', read).once('error', finish).once('close', closed);
}

/**
 * Destroys `socket` if it is not open (and, for TLS, past its handshake) within CONNECT_TIMEOUT_MS:
 * Node sets no limit of its own, and an unreachable address would otherwise hold the call until the
 * caller's time limit. The message says "timed out", which is how the failure is classified.
 *
 * Once it is open, nothing of the limit stays on the socket: a `close` listener left for its life
 * would keep the cleared timer and its closures for as long as the connection is pooled, with
 * thousands of connections a few hundred kilobytes.
 */
function limitConnect(socket: Socket, opened: 'connect' | 'secureConnect'): Socket {
  const timer = setTimeout(() => socket.destroy(new Error(`connect timed out after ${CONNECT_TIMEOUT_MS} ms`)), CONNECT_TIMEOUT_MS);
  timer.unref();
  const done = (): void => {
    clearTimeout(timer);
    socket.off(opened, done).off('close', done);
  };
  socket.on(opened, done).on('close', done);
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
