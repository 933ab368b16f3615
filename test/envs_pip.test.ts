/**
 * The pip backend (`--pip-index`): a bare line's requirement that no Debian package ships comes from
 * the index given, here a folder of wheels the test builds itself (a real wheel: a zip with its
 * dist-info, installed by Debian's own pip in the package phase, the only one with network). The
 * resolve record lists it under env.pip, the build records what pip installed, the tests import it.
 * Without the index the same line does not validate: nothing else provides the module.
 */
import { execFileSync } from 'node:child_process';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import type { LedgerEntry } from '../pipeline/runtime/ledger.js';
import type { BuildRecord, ResolveRecord, ValidateRecord } from '../pipeline/runtime/records.js';
import { cli, gitRepo, tempDir } from './helpers.js';

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
    const res = await cli(['run', '--manifest', bare, '--out', out, '--stages', 'clone,resolve,build,validate', '--pip-index', wheels]);
    expect(res.code, `${res.stdout}\n${res.stderr}`).toBe(0);
  }, 900_000);

  it('installs the requirement from the index with pip, records what it installed, and the suite imports it', () => {
    expect(entry<ResolveRecord>(out, 'resolve').record?.env).toMatchObject({ pip: ['worldline-wheel-probe>=1.2'], apt: ['python3-pip'] });
    expect(entry<BuildRecord>(out, 'build').record?.pip_installed).toContain('worldline-wheel-probe==1.2.0');
    expect(entry<ValidateRecord>(out, 'validate').record).toMatchObject({ collected: 1, passed: 1 });
  });

  it('leaves it unresolved without an index: the line does not validate, and the resolve record says why', async () => {
    const without = join(out, '..', 'without');
    const res = await cli(['run', '--manifest', bare, '--out', without, '--stages', 'clone,resolve,build,validate']);
    expect(res.code).toBe(1);
    expect(entry<ResolveRecord>(without, 'resolve').record?.unresolved.join()).toMatch(/worldline-wheel-probe>=1\.2 \(runtime, pyproject\.toml:4\)/);
    // The repair loop finds no package for the module; the rest of the suite (here nothing) is all that runs.
    expect(entry<BuildRecord>(without, 'build').record?.attempts?.[0].problems.join()).toMatch(/No module named 'wheel_probe'/);
    expect(entry<ValidateRecord>(without, 'validate').reason).toMatch(/^not traceable/);
  });
});
