/**
 * The index backend given a folder (`--pip-index DIR`): a bare line's requirement that no Debian
 * package ships comes from the folder of wheels the test builds itself (a real wheel: a zip with its
 * dist-info), locked on the host with that folder as the only source, copied into the host's cache
 * by content and installed by uv in the build's no-network phase. The resolve record carries the
 * lock (env.lock, with its hash), the build says how its files came, the tests import it. Without
 * the index (`none`, the default) the same line does not validate: nothing else provides the module.
 * test/envs_index.test.ts covers an index served over TLS.
 */
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import type { LedgerEntry } from '../pipeline/runtime/ledger.js';
import type { BuildRecord, ResolveRecord, ValidateRecord } from '../pipeline/runtime/records.js';
import { cli, gitRepo, tempDir } from './helpers.js';

const WHEEL = 'worldline_wheel_probe-1.2.0-py3-none-any.whl';

/** A pure-Python wheel of `worldline-wheel-probe` 1.2.0 (module `wheel_probe`), written with Python's zipfile. */
function buildWheel(dir: string): void {
  const script = [
    'import sys, zipfile',
    'name, version = "worldline_wheel_probe", "1.2.0"',
    'info = f"{name}-{version}.dist-info"',
    'files = {',
    '    "wheel_probe/__init__.py": "VALUE = 42\\n",',
    '    f"{info}/METADATA": f"Metadata-Version: 2.1\\nName: worldline-wheel-probe\\nVersion: {version}\\n",',
    '    f"{info}/WHEEL": "Wheel-Version: 1.0\\nGenerator: worldline-test\\nRoot-Is-Purelib: true\\nTag: py3-none-any\\n",',
    '}',
    'files[f"{info}/RECORD"] = "".join(f"{p},,\\n" for p in list(files) + [f"{info}/RECORD"])',
    'with zipfile.ZipFile(f"{sys.argv[1]}/{name}-{version}-py3-none-any.whl", "w") as z:',
    '    for path, text in files.items():',
    '        z.writestr(path, text)',
  ].join('\n');
  execFileSync('python3', ['-c', script, dir]);
}

describe('a package index for what Debian lacks', () => {
  let out: string;
  let bare: string;
  const entry = <R>(o: string, stage: string) => {
    const dir = join(o, 'ledger', stage);
    const file = execFileSync('ls', [dir]).toString().trim().split('\n')[0];
    return JSON.parse(readFileSync(join(dir, file), 'utf8')) as LedgerEntry<R>;
  };

  beforeAll(async () => {
    const dir = tempDir('envs-pip');
    const wheels = join(dir, 'wheels');
    mkdirSync(wheels);
    buildWheel(wheels);
    const repo = gitRepo(join(dir, 'pip-user'), {
      'pyproject.toml': '[project]\nname = "pip-user"\nversion = "0.1.0"\ndependencies = ["worldline-wheel-probe>=1.2"]\n',
      'tests/test_probe.py':
        'import importlib.metadata\n\nimport wheel_probe\n\n\ndef test_probe():\n    assert wheel_probe.VALUE == 42\n    assert importlib.metadata.version("worldline-wheel-probe") == "1.2.0"\n',
    });
    bare = join(dir, 'bare.jsonl');
    writeFileSync(bare, `${JSON.stringify({ repo })}\n`);
    out = join(dir, 'out');
    const res = await cli(['run', '--manifest', bare, '--out', out, '--stages', 'clone,resolve,build,validate', '--pip-index', wheels], {
      WORLDLINE_INDEX_CACHE: join(dir, 'index-cache'),
    });
    expect(res.code, `${res.stdout}\n${res.stderr}`).toBe(0);
  }, 900_000);

  it('locks the requirement from the folder, installs it offline from the cache, and the suite imports it', () => {
    const resolved = entry<ResolveRecord>(out, 'resolve').record;
    expect(resolved?.env).toMatchObject({ pip: [], apt: [] });
    const sha256 = createHash('sha256')
      .update(readFileSync(join(out, '..', 'wheels', WHEEL)))
      .digest('hex');
    expect(resolved?.env?.lock).toEqual([
      { name: 'worldline-wheel-probe', version: '1.2.0', filename: WHEEL, url: expect.stringMatching(/^file:\/\//), sha256 },
    ]);
    expect(resolved?.index).toMatchObject({ mode: 'folder', exclude_newer_from: 'commit' });
    expect(entry<BuildRecord>(out, 'build').record?.index).toMatchObject({ mode: 'folder', files: 1 });
    expect(entry<ValidateRecord>(out, 'validate').record).toMatchObject({ collected: 1, passed: 1 });
  });

  it('leaves it unresolved with --pip-index none (Debian alone): the line does not validate, and the resolve record says why', async () => {
    const without = join(out, '..', 'without');
    const res = await cli(['run', '--manifest', bare, '--out', without, '--stages', 'clone,resolve,build,validate', '--pip-index', 'none']);
    expect(res.code).toBe(1);
    expect(entry<ResolveRecord>(without, 'resolve').record?.unresolved.join()).toMatch(/worldline-wheel-probe>=1\.2 \(runtime, pyproject\.toml:4\)/);
    // The repair loop finds no package for the module; the rest of the suite (here nothing) is all that runs.
    expect(entry<BuildRecord>(without, 'build').record?.attempts?.[0].problems.join()).toMatch(/No module named 'wheel_probe'/);
    // Nothing collected, and the reason says why in the suite's words.
    expect(entry<ValidateRecord>(without, 'validate').reason).toMatch(
      /^not traceable: .*\(0 collected.*\): tests\/test_probe\.py: .*No module named 'wheel_probe'/,
    );
  });
});
