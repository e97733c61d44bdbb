/**
 * Headless Chromium for the dashboard's tests and screenshots: Debian's `chromium` package driven by
 * playwright-core (which downloads no browser of its own). Each launch gets a fresh profile directory.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { type BrowserContext, chromium } from 'playwright-core';

export const CHROMIUM = '/usr/bin/chromium';

export interface LaunchedChromium {
  /** The browser's one context, on the fresh profile; open pages with `context.newPage()`. */
  context: BrowserContext;
  close(): Promise<void>;
}

export async function launchChromium(
  options: { viewport?: { width: number; height: number }; deviceScaleFactor?: number } = {},
): Promise<LaunchedChromium> {
  if (!fs.existsSync(CHROMIUM)) {
    throw new Error(`${CHROMIUM} is missing: the dashboard tests need Debian's chromium. Install it with: apt-get install -y chromium`);
  }
  const profile = fs.mkdtempSync(path.join(os.tmpdir(), 'durable-agent-chromium-'));
  // A persistent context is how playwright-core takes a profile directory (it refuses --user-data-dir in args).
  const context = await chromium.launchPersistentContext(profile, {
    executablePath: CHROMIUM,
    headless: true,
    args: [
      '--headless',
      '--no-sandbox',
      '--disable-gpu',
      '--disable-quic',
      '--no-first-run',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
    ],
    viewport: options.viewport ?? { width: 1360, height: 860 },
    deviceScaleFactor: options.deviceScaleFactor ?? 1,
  });
  return {
    context,
    async close() {
      await context.close().catch(() => {});
      fs.rmSync(profile, { recursive: true, force: true });
    },
  };
}
