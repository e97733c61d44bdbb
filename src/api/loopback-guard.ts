/**
 * Refusals for a server listening on loopback only. The network cannot reach it, but any web page
 * open in a browser on the same machine can:
 *  - DNS rebinding: a page of attacker.example, whose name is then made to resolve to 127.0.0.1,
 *    reads our answers as its own; such requests carry `Host: attacker.example`. Only a loopback
 *    name (localhost, *.localhost, 127.0.0.0/8, [::1]) is accepted in Host.
 *  - Cross-site requests: any page can send a form POST, which needs no CORS preflight, e.g. a
 *    cancel. A state-changing request whose Origin is not on a loopback name is refused (ports may
 *    differ: another local tool on another port is the same site).
 * A server bound to any other address is reached by names it cannot know, so neither applies there.
 */
import net from 'node:net';
import type { HttpError } from './errors.ts';

/** Methods that change nothing, which browsers send cross-site freely and which are answered read-only. */
const SAFE_METHODS = new Set(['GET', 'HEAD', 'OPTIONS']);

export function isLoopbackAddress(address: string): boolean {
  const ip = address.startsWith('::ffff:') ? address.slice('::ffff:'.length) : address;
  if (net.isIPv4(ip)) return ip.startsWith('127.');
  return ip === '::1';
}

/** A name that can only mean this machine: browsers resolve `localhost` and `*.localhost` to loopback themselves. */
export function isLoopbackHostname(hostname: string): boolean {
  const name = hostname.toLowerCase().replace(/\.$/, '');
  if (name === 'localhost' || name.endsWith('.localhost')) return true;
  const bare = name.startsWith('[') && name.endsWith(']') ? name.slice(1, -1) : name;
  return net.isIP(bare) !== 0 && isLoopbackAddress(bare);
}

/** The hostname of a Host header (`name`, `name:port`, `[v6]:port`), or null when it is not one. */
function hostnameOf(host: string): string | null {
  try {
    const url = new URL(`http://${host}`);
    const onlyHostAndPort = url.pathname === '/' && !url.username && !url.password && !url.search && !url.hash;
    return onlyHostAndPort ? url.hostname : null;
  } catch {
    return null;
  }
}

const forbidden = (message: string): HttpError => ({ status: 403, body: { error: { code: 'forbidden', message } } });

/** Why a request to a loopback-bound server is refused, or null when it is not. */
export function loopbackRefusal(method: string, host: string | undefined, origin: string | undefined): HttpError | null {
  // HTTP/1.0 without Host is not something a browser sends; Node answers 400 to HTTP/1.1 without one.
  if (host !== undefined) {
    const name = hostnameOf(host);
    if (name === null || !isLoopbackHostname(name)) {
      return forbidden('this server listens on loopback only and answers only to a loopback Host (localhost, 127.0.0.1, [::1])');
    }
  }
  if (origin !== undefined && !SAFE_METHODS.has(method)) {
    let sameSite: boolean;
    try {
      sameSite = origin !== 'null' && isLoopbackHostname(new URL(origin).hostname);
    } catch {
      sameSite = false;
    }
    if (!sameSite) return forbidden(`a ${method} sent by a page of another site (its Origin is not a loopback name) is refused`);
  }
  return null;
}
