import { defineConfig } from 'vitest/config';

// Four tiers, each runnable alone (`vitest run --project unit`); `npm test` runs them all.
// Only the tiers that need PostgreSQL name the global setup, so unit tests never start a cluster.
const database = ['test/support/global-setup.ts'];

export default defineConfig({
  test: {
    testTimeout: 60_000,
    hookTimeout: 120_000,
    // Integration tests spawn workers and PostgreSQL backends; two cores do not gain from more files at once.
    maxWorkers: 2,
    projects: [
      // No database, no processes.
      { extends: true, test: { name: 'unit', include: ['test/unit/**/*.test.ts'] } },
      // In-process against PostgreSQL.
      { extends: true, test: { name: 'integration', include: ['test/integration/**/*.test.ts'], globalSetup: database } },
      // Spawn processes (the CLI, worker processes, MCP servers, PostgreSQL itself), kill them, drive Chromium,
      // or build and pack the package; the CLI's tests need a current dist/.
      { extends: true, test: { name: 'process', include: ['test/process/**/*.test.ts'], globalSetup: database } },
      // Starts and restarts a PostgreSQL of its own.
      { extends: true, test: { name: 'chaos', include: ['test/chaos/**/*.test.ts'] } },
    ],
  },
});
