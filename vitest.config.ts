import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    globalSetup: ['test/support/global-setup.ts'],
    testTimeout: 60_000,
    hookTimeout: 120_000,
    // Integration tests spawn workers and PostgreSQL backends; two cores do not gain from more files at once.
    maxWorkers: 2,
  },
});
