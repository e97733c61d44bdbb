#!/usr/bin/env node
// The `durable-agent` command: the compiled CLI in dist/ (`npm run build`; `npm start`, `npm test` and
// `npm pack` build it first). In a clone nothing has built yet, say so rather than fail on an import.
import fs from 'node:fs';

const cli = new URL('../dist/cli/main.js', import.meta.url);
if (!fs.existsSync(cli)) {
  process.stderr.write('durable-agent: the CLI is not built (dist/cli/main.js is missing): run `npm run build` first\n');
  process.exit(1);
}
const { main } = await import(cli.href);
process.exit(await main(process.argv.slice(2)));
