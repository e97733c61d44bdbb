/**
 * The dashboard's files: a single page that `npm run build` compiles from dashboard/ into
 * dist/dashboard/. They are read once at start and served from memory, so no request ever names a
 * path on disk. The page shell answers every page address (/, /runs/{id}, /overview; the page routes
 * itself), the rest lives under /assets/. The page talks to the API like any client, with the same
 * authentication, so the shell itself holds no data and needs none.
 */
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { PROJECT_ROOT } from '../config/environment.ts';

export const DASHBOARD_DIR = path.join(PROJECT_ROOT, 'dist', 'dashboard');

/** The addresses the page shell answers; keep in step with the page's router (dashboard/src/router.ts). */
export const DASHBOARD_PAGES = ['/', '/overview', '/schedules', '/runs/:id'] as const;

const CONTENT_TYPES: Record<string, string> = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.svg': 'image/svg+xml',
  '.woff2': 'font/woff2',
  '.txt': 'text/plain; charset=utf-8',
};

/** Only our own files, no inline script or style: what the page shows of a run can never run as code. */
const SECURITY_HEADERS = {
  'content-security-policy':
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; font-src 'self'; connect-src 'self'; " +
    "base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
  'x-content-type-options': 'nosniff',
  'referrer-policy': 'no-referrer',
  'x-frame-options': 'DENY',
};

interface Asset {
  body: Buffer;
  contentType: string;
  etag: string;
}

export interface DashboardFiles {
  shell: Asset;
  /** By path below the build directory, with forward slashes: `main.js`, `views/run.js`. */
  assets: ReadonlyMap<string, Asset>;
}

function asset(file: string): Asset | null {
  const contentType = CONTENT_TYPES[path.extname(file)];
  if (!contentType) return null;
  const body = fs.readFileSync(file);
  return { body, contentType, etag: `"${createHash('sha256').update(body).digest('base64url').slice(0, 22)}"` };
}

/** The built dashboard in `dir`, or null when it has not been built. */
export function loadDashboard(dir: string = DASHBOARD_DIR): DashboardFiles | null {
  const shellFile = path.join(dir, 'index.html');
  if (!fs.existsSync(shellFile)) return null;
  const assets = new Map<string, Asset>();
  for (const entry of fs.readdirSync(dir, { recursive: true, withFileTypes: true })) {
    if (!entry.isFile()) continue;
    const file = path.join(entry.parentPath, entry.name);
    const a = asset(file);
    if (a) assets.set(path.relative(dir, file).split(path.sep).join('/'), a);
  }
  return { shell: asset(shellFile)!, assets };
}

function send(req: FastifyRequest, reply: FastifyReply, a: Asset): FastifyReply {
  // Revalidated on every load (cheap: a 304), so a new version shows at the next reload.
  reply.headers({ ...SECURITY_HEADERS, 'cache-control': 'no-cache', etag: a.etag });
  if (req.headers['if-none-match'] === a.etag) return reply.code(304).send();
  return reply.type(a.contentType).send(a.body);
}

const NOT_BUILT =
  '<!doctype html><meta charset="utf-8"><title>durable-agent</title>' +
  '<p>The dashboard is not built. Run <code>npm run build</code> in the project directory, then restart the server. ' +
  'The API works without it: <a href="/openapi.json">/openapi.json</a>.</p>';

/** Serves the dashboard; `null` (not built) answers its pages with a 503 that says how to build it. */
export function registerDashboard(app: FastifyInstance, files: DashboardFiles | null): void {
  // Open: the page shell and its files hold no data; the page asks for a key when the API wants one.
  const open = { config: { open: true } };
  for (const url of DASHBOARD_PAGES) {
    app.get(url, open, (req, reply) =>
      files ? send(req, reply, files.shell) : reply.code(503).headers(SECURITY_HEADERS).type('text/html; charset=utf-8').send(NOT_BUILT),
    );
  }
  app.get('/assets/*', open, (req, reply) => {
    const name = (req.params as { '*': string })['*'];
    const a = files?.assets.get(name);
    if (!a) {
      return reply
        .code(404)
        .type('application/json; charset=utf-8')
        .send({ error: { code: 'not_found', message: 'no such dashboard file' } });
    }
    return send(req, reply, a);
  });
}
