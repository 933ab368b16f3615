import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, inject, it } from 'vitest';
import { PYTHON_VERSIONS } from '../pipeline/runtime/manifest.js';
import { BASE_RECIPES, baseTag, userBaseImage } from '../pipeline/sandbox/base_images.js';
import { buildImage, inspectImage, removeImage, tarStream } from '../pipeline/sandbox/engine.js';
import { runContainer } from '../pipeline/sandbox/sandbox.js';
import { tempDir } from './helpers.js';

describe('base images', () => {
  it("are tagged by their recipe hash and label their Python and pytest versions, and carry the tracer's C accelerator", async () => {
    for (const [python, ref] of [
      ['3.11', inject('base311')],
      ['3.13', inject('base313')],
    ] as const) {
      expect(ref).toBe(baseTag(BASE_RECIPES[python]));
      const labels = (await inspectImage(ref))!.Config.Labels!;
      expect(labels['worldline.python']).toMatch(new RegExp(`^${python.replace('.', '\\.')}\\.\\d+$`));
      expect(labels['worldline.pytest']).toMatch(/^\d+\.\d+/);
      expect(labels['worldline.pytest_timeout']).toBe('true');
      expect(labels['worldline.native']).toBe('true');
      // built in a throwaway rootfs: no compiler reaches the image
      const res = await runContainer({
        image: ref,
        cmd: ['sh', '-c', 'python3 -c "import _worldline_native as m, _worldline_episodes as e; print(m.__file__, e.__file__)"; command -v gcc || echo NO_GCC'],
        limits: { memoryBytes: 256 << 20, pids: 64, cpus: 1 },
        timeoutMs: 60_000,
      });
      for (const module of ['_worldline_native', '_worldline_episodes']) {
        expect(res.output).toMatch(new RegExp(`/usr/lib/python3/dist-packages/${module}\\.cpython-${python.replace('.', '')}-[^/]*\\.so`));
      }
      expect(res.output).toContain('NO_GCC');
    }
  });

  it('3.9 has its own recipe, from bullseye, for histories whose tests need what 3.10 removed', () => {
    // Building it costs a bullseye debootstrap, so CI checks the recipe, not the image (README: Python 3.9).
    expect(BASE_RECIPES['3.9']).toMatchObject({ suite: 'bullseye', python: '3.9' });
    expect(BASE_RECIPES['3.9'].packages).toEqual(BASE_RECIPES['3.11'].packages);
    expect(new Set(PYTHON_VERSIONS.map((v) => baseTag(BASE_RECIPES[v]))).size).toBe(PYTHON_VERSIONS.length);
    expect(BASE_RECIPES['3.9'].native).toMatch(/^[0-9a-f]{12}$/);
    expect(BASE_RECIPES['3.9'].native).toBe(BASE_RECIPES['3.13'].native);
    expect(baseTag(BASE_RECIPES['3.9'])).toMatch(/^worldline\/base:py3\.9-[0-9a-f]{12}$/);
  });

  it('a user-named base image is probed, and what it lacks is named', async () => {
    const ok = await userBaseImage(inject('base311'));
    expect(ok).toMatchObject({ source: 'user', python: expect.stringMatching(/^3\.11/), pytestTimeout: true, native: true });

    const ctx = tempDir('nopytest');
    mkdirSync(ctx, { recursive: true });
    writeFileSync(
      join(ctx, 'Dockerfile'),
      `FROM ${inject('base311')}\nRUN rm -rf /usr/lib/python3/dist-packages/pytest /usr/lib/python3/dist-packages/_pytest /usr/bin/git\nLABEL worldline.unit=test-nopytest\n`,
    );
    const tag = 'worldline/test:no-pytest';
    const built = await buildImage({
      context: () => tarStream(['-C', ctx, 'Dockerfile']),
      tag,
      logFile: join(ctx, 'build.log'),
      timeoutMs: 120_000,
      memoryBytes: 512 << 20,
      cpus: 1,
    });
    expect(built.ok).toBe(true);
    try {
      await expect(userBaseImage(tag)).rejects.toThrow(`base image ${tag} lacks what Worldline needs: pytest (python3 -m pytest fails to import), git`);
      await expect(userBaseImage('worldline/test:never-built')).rejects.toThrow(/is not present locally/);
    } finally {
      await removeImage(tag);
    }
  });
});
