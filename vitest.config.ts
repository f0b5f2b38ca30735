import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts', 'packages/*/test/**/*.test.ts', 'apps/*/test/**/*.test.ts'],
    // Integration tests start real servers and processes: generous timeouts, no timing assertions.
    testTimeout: 60_000,
    hookTimeout: 60_000,
    // Two cores: files run in parallel forks but not so many that servers starve each other.
    pool: 'forks',
    maxWorkers: 2,
    passWithNoTests: false,
    reporters: ['default'],
  },
});
