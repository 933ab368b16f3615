import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    globalSetup: ['test/global-setup.ts'],
    // Docker-heavy tests share one engine and two cores: run files one at a time.
    fileParallelism: false,
    testTimeout: 60_000,
    hookTimeout: 900_000,
  },
});
