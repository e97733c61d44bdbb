#!/usr/bin/env node
// The `durable-agent` command: the compiled CLI in dist/ (`npm run build`; `npm ci` builds it).
import { main } from '../dist/cli.js';

process.exit(await main(process.argv.slice(2)));
