import path from 'node:path';
import { fileURLToPath } from 'node:url';

/** The demo agent's tickets: created only where the demo agent is served. */
export const DEMO_MIGRATIONS_DIR = path.join(path.dirname(fileURLToPath(import.meta.url)), 'migrations');
