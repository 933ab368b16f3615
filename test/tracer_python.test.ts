/** The Python that runs inside containers (tracer, mutation operators) passes its own pytest suites in both base images. */
import { join } from 'node:path';
import { describe, expect, inject, it } from 'vitest';
import { packageRoot } from '../core/package.js';
import { runContainer } from '../pipeline/sandbox/sandbox.js';

describe('tracers/ (Python) inside the base images', () => {
  for (const key of ['base311', 'base313'] as const) {
    it(`passes its own tests on ${key}`, async () => {
      const res = await runContainer({
        image: inject(key),
        cmd: ['sh', '-c', 'cd /src && python3 -m pytest -q -p no:cacheprovider tracers/tests tracers/mutate_tests'],
        env: { PYTHONDONTWRITEBYTECODE: '1' },
        binds: [`${join(packageRoot, 'tracers')}:/src/tracers:ro`],
        limits: { memoryBytes: 1024 * 1024 * 1024, pids: 256, cpus: 2 },
        timeoutMs: 600_000,
      });
      expect(res.output).toMatch(/\d+ passed/);
      expect(res.output).not.toMatch(/\d+ failed/);
      expect(res.exitCode).toBe(0);
    }, 600_000);
  }
});
