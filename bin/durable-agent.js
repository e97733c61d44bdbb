#!/usr/bin/env node
// Runs the TypeScript sources directly (tsx), so there is no build step between a clone and `npm start`.
import { register } from 'tsx/esm/api';

register();
const { main } = await import('../src/cli.ts');
process.exit(await main(process.argv.slice(2)));
