/**
 * An environment image's bytecode (pipeline/sandbox/bytecode.ts): the image's prefix holds the
 * stdlib's, the checkout's and our tracer's (checked-hash) and pytest's rewritten test modules, runs read them, and a
 * file changed at run time never runs stale: not even one changed to the same size and mtime.
 */
import { mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { packageRoot } from '../core/package.js';
import { DEFAULTS } from '../pipeline/runtime/options.js';
import { readResult } from '../pipeline/sandbox/results.js';
import { runSandboxed } from '../pipeline/sandbox/sandbox.js';
import { cli, tempDir } from './helpers.js';

/** Writes, in the container, what the prefix holds and what runs read from it. */
const PROBE = `
import glob, importlib.util, json, os, subprocess, sys
out = {"prefix": sys.pycache_prefix}
core = "/repo/textstats/core.py"
pyc = importlib.util.cache_from_source(core)
out["core_pyc"] = pyc
out["core_flags"] = int.from_bytes(open(pyc, "rb").read()[4:8], "little")
lib = "/worldline/lib/worldline_tracer/plugin.py"
out["lib_pyc"] = importlib.util.cache_from_source(lib)
out["lib_flags"] = int.from_bytes(open(out["lib_pyc"], "rb").read()[4:8], "little")
out["stdlib_pyc"] = bool(glob.glob(sys.pycache_prefix + "/usr/lib/python3*/json/__init__.*.pyc"))
out["rewritten"] = [p.rsplit("/", 1)[1] for p in glob.glob(sys.pycache_prefix + "/repo/tests/test_core.*-pytest-*.pyc")]
# Our Python is on no run's PYTHONPATH (our programs find it beside them): named here to import it.
verbose = subprocess.run([sys.executable, "-v", "-c", "import json, textstats, worldline_tracer.plugin"], capture_output=True, text=True, cwd="/repo", env=dict(os.environ, PYTHONPATH="/worldline/lib")).stderr
out["read"] = sorted(l.split("'")[1] for l in verbose.splitlines() if l.startswith("# code object from '"))
json.dump(out, open("/worldline/out/probe.json", "w"))
`;

/** core.py changed to the same size and mtime (lower -> upper): checked-hash pycs must see it. */
const SAME_SIZE_AND_MTIME = `
import os, subprocess, sys
core = "/repo/textstats/core.py"
st = os.stat(core)
text = open(core).read()
assert "w.lower()" in text
open(core, "w").write(text.replace("w.lower()", "w.upper()"))
os.utime(core, ns=(st.st_atime_ns, st.st_mtime_ns))
now = os.stat(core)
assert (now.st_size, now.st_mtime_ns) == (st.st_size, st.st_mtime_ns)
print(subprocess.run([sys.executable, "-c", "import textstats; print(textstats.words('Ab cd'))"], capture_output=True, text=True, cwd="/repo").stdout.strip())
`;

describe("an environment image's bytecode", () => {
  let image: string;
  let dir: string;

  const run = async (name: string, script: string): Promise<void> => {
    const work = join(dir, name);
    mkdirSync(work);
    const res = await runSandboxed({
      image,
      cmd: ['sh', '-c', script],
      work,
      vars: {},
      srcLayout: false,
      limits: DEFAULTS,
      timeoutMs: 120_000,
      labels: { 'worldline.stage': 'test-bytecode' },
    });
    expect(res.exitCode, res.output).toBe(0);
  };

  beforeAll(async () => {
    dir = tempDir('bytecode');
    const manifest = join(dir, 'manifest.jsonl');
    writeFileSync(manifest, JSON.stringify({ repo: join(packageRoot, 'examples/repos/textstats') }) + '\n');
    const out = join(dir, 'out');
    const res = await cli(['run', '--manifest', manifest, '--out', out, '--stages', 'clone,build']);
    expect(res.code, res.stderr).toBe(0);
    const entry = readdirSync(join(out, 'ledger', 'build'))[0];
    image = (JSON.parse(readFileSync(join(out, 'ledger', 'build', entry), 'utf8')) as { record: { image: string } }).record.image;
  }, 600_000);

  it('holds the stdlib, the checkout (checked-hash) and the rewritten tests, and runs read them', async () => {
    await run('probe', `python3 -c '${PROBE.replace(/'/g, "'\\''")}'`);
    const probe = JSON.parse(readResult(join(dir, 'probe'), 'probe.json')!) as Record<string, unknown>;
    expect(probe.prefix).toBe('/opt/worldline/pyc');
    expect(probe.core_pyc).toMatch(/^\/opt\/worldline\/pyc\/repo\/textstats\/core\.cpython-3\d+\.pyc$/);
    // PEP 552 flags: bit 0 hash-based, bit 1 check_source.
    expect(probe.core_flags).toBe(3);
    expect(probe.lib_pyc).toBe('/opt/worldline/pyc/worldline/lib/worldline_tracer/plugin.cpython-311.pyc');
    expect(probe.lib_flags).toBe(3);
    expect(probe.stdlib_pyc).toBe(true);
    expect((probe.rewritten as string[]).length).toBe(1);
    const read = probe.read as string[];
    expect(read).toContain(probe.core_pyc);
    expect(read).toContain(probe.lib_pyc);
    expect(read.some((p) => /^\/opt\/worldline\/pyc\/usr\/lib\/python3[.\d]*\/json\/__init__\./.test(p))).toBe(true);
    // Nothing is read from beside the sources (Debian's own __pycache__): the prefix replaces it.
    expect(read.filter((p) => !p.startsWith('/opt/worldline/pyc/'))).toEqual([]);
  }, 300_000);

  it('runs the new code of a checkout file changed to the same size and mtime', async () => {
    await run('stale', `python3 -c '${SAME_SIZE_AND_MTIME.replace(/'/g, "'\\''")}' > /worldline/out/words`);
    expect(readResult(join(dir, 'stale'), 'words')!.trim()).toBe("['AB', 'CD']");
  }, 300_000);

  it('runs the new code of a test module written in the run, under pytest', async () => {
    const append = `printf '\\n\\ndef test_worldline_fresh():\\n    assert 1 + 1 == 3\\n' >> tests/test_core.py`;
    await run(
      'pytest',
      `cd /repo && ${append} && { python3 -m pytest -q -p no:cacheprovider tests/test_core.py -k worldline_fresh > /worldline/out/pytest.txt; true; }`,
    );
    const report = readResult(join(dir, 'pytest'), 'pytest.txt')!;
    expect(report).toContain('1 failed');
    expect(report).toContain('assert (1 + 1) == 3');
  }, 300_000);
});
