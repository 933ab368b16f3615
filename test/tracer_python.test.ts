/**
 * The Python that runs inside containers (tracer, mutation operators) passes its own pytest suites in
 * both base images; the tracer's tests run on its pure Python and on the image's compiled accelerator.
 */
import { execFileSync } from 'node:child_process';
import { existsSync, readdirSync, statSync } from 'node:fs';
import { homedir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, inject, it } from 'vitest';
import { packageRoot } from '../core/package.js';
import { runContainer } from '../pipeline/sandbox/sandbox.js';
import { TRACER_CODE, tracersDir } from '../pipeline/sandbox/tracers.js';

// Both at once: each suite is one pytest process, and CI has two cores.
describe.concurrent('tracers/ (Python) inside the base images', () => {
  for (const key of ['base311', 'base313'] as const) {
    it(`passes its own tests on ${key}`, async () => {
      const res = await runContainer({
        image: inject(key),
        cmd: ['sh', '-c', 'cd /src && python3 -c "import _worldline_native" && python3 -m pytest -q -p no:cacheprovider tracers/tests tracers/mutate_tests'],
        env: { PYTHONDONTWRITEBYTECODE: '1' },
        binds: [`${join(packageRoot, 'tracers')}:/src/tracers:ro`],
        limits: { memoryBytes: 1024 * 1024 * 1024, pids: 256, cpus: 1 },
        timeoutMs: 600_000,
      });
      expect(res.output).toMatch(/\d+ passed/);
      expect(res.output).not.toMatch(/\d+ failed/);
      expect(res.exitCode).toBe(0);
    }, 600_000);
  }
});

/** A host Python 3.9 (pyenv), when there is one: the 3.9 base image costs a bullseye debootstrap CI does not pay. */
function hostPython39(): string | undefined {
  const versions = join(homedir(), '.pyenv', 'versions');
  const v = existsSync(versions) ? readdirSync(versions).find((d) => /^3\.9\.\d+$/.test(d)) : undefined;
  return v ? join(versions, v, 'bin', 'python3') : undefined;
}

// Compiles every file a container runs and imports each module that does not need pytest, on 3.9.
const CHECK_39 = `
import importlib, sys
sys.dont_write_bytecode = True
sys.path.insert(0, sys.argv[1])
files = sys.argv[2:]
for f in files:
    with open(f) as fh:
        compile(fh.read(), f, "exec")
mods = sorted({f[len(sys.argv[1]) + 1:-3].replace("/", ".").replace(".__init__", "") for f in files})
for m in mods:
    try:
        importlib.import_module(m)
    except ModuleNotFoundError as e:
        if e.name != "pytest":
            raise
print(sys.version_info[:2], len(files), "files", len(mods), "modules")
`;

describe('tracers/ on Python 3.9', () => {
  const python = hostPython39();
  it.runIf(python)('every file a container runs compiles and imports on a host Python 3.9', () => {
    const entries = [...new Set([...Object.values(TRACER_CODE).flat(), 'trace_script.py'])];
    const files = entries.flatMap((e) => {
      const path = join(tracersDir, e);
      return statSync(path).isDirectory()
        ? readdirSync(path)
            .filter((f) => f.endsWith('.py'))
            .map((f) => join(path, f))
        : [path];
    });
    const out = execFileSync(python as string, ['-I', '-c', CHECK_39, tracersDir, ...files], { encoding: 'utf8' });
    expect(out).toContain(`(3, 9) ${files.length} files`);
    expect(files.length).toBeGreaterThan(10);
  });
});
