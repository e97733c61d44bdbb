/** How the server hands out the dashboard's files: from memory, with their types, revalidated, and never a path on disk. */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import Fastify, { type FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadDashboard, registerDashboard } from '../../src/api/dashboard.ts';

let dir: string;
let app: FastifyInstance;

beforeAll(() => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'dashboard-files-'));
  fs.mkdirSync(path.join(dir, 'views'));
  fs.writeFileSync(path.join(dir, 'index.html'), '<!doctype html><title>shell</title>');
  fs.writeFileSync(path.join(dir, 'main.js'), 'import "./views/run.js";');
  fs.writeFileSync(path.join(dir, 'views', 'run.js'), 'export {};');
  fs.writeFileSync(path.join(dir, 'app.css'), 'body{}');
  fs.writeFileSync(path.join(dir, 'notes.md'), 'not served: no known type');
  app = Fastify();
  registerDashboard(app, loadDashboard(dir));
});

afterAll(async () => {
  await app.close();
  fs.rmSync(dir, { recursive: true, force: true });
});

describe('the dashboard files', () => {
  it('answers every page address with the shell, under a strict Content-Security-Policy', async () => {
    for (const url of ['/', '/overview', '/runs/6f1c0a52-0000-4000-8000-000000000000?step=3']) {
      const res = await app.inject(url);
      expect(res.statusCode, url).toBe(200);
      expect(res.body).toBe('<!doctype html><title>shell</title>');
      expect(res.headers['content-type']).toBe('text/html; charset=utf-8');
      expect(res.headers['content-security-policy']).toContain("script-src 'self'");
      expect(res.headers['content-security-policy']).toContain("frame-ancestors 'none'");
      expect(res.headers['x-content-type-options']).toBe('nosniff');
    }
  });

  it('serves the built files with their types, nested ones too, and answers 304 to a matching ETag', async () => {
    const js = await app.inject('/assets/views/run.js');
    expect(js.statusCode).toBe(200);
    expect(js.headers['content-type']).toBe('text/javascript; charset=utf-8');
    expect(js.headers['cache-control']).toBe('no-cache');
    const again = await app.inject({ url: '/assets/views/run.js', headers: { 'if-none-match': String(js.headers.etag) } });
    expect(again.statusCode).toBe(304);
    expect(again.body).toBe('');
    expect((await app.inject('/assets/app.css')).headers['content-type']).toBe('text/css; charset=utf-8');
  });

  it('knows only the files it loaded: no other path reaches the disk', async () => {
    for (const url of [
      '/assets/notes.md',
      '/assets/../package.json',
      '/assets/%2e%2e/%2e%2e/etc/passwd',
      '/assets/nothing.js',
      '/assets/',
    ]) {
      const res = await app.inject(url);
      expect(res.statusCode, url).toBe(404);
    }
  });

  it('says how to build it when it is not built', async () => {
    const bare = Fastify();
    registerDashboard(bare, loadDashboard(path.join(dir, 'missing')));
    const res = await bare.inject('/');
    expect(res.statusCode).toBe(503);
    expect(res.body).toContain('npm run build');
    await bare.close();
  });
});
