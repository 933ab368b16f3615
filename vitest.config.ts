import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    globalSetup: ['test/global-setup.ts'],
    // Docker-heavy tests share one engine and two cores: run files one at a time.
    fileParallelism: false,
    testTimeout: 60_000,
    // --pip-index defaults to this host's index when it answers: tests ask for it by name, and
    // test the default itself (envs_index.test.ts), so a bare line here stays Debian's alone.
    env: { WORLDLINE_PIP_INDEX: 'none' },
    hookTimeout: 900_000,
  },
});
