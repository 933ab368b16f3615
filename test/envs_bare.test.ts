/**
 * Bare manifest lines become validated images with no person involved, on real Docker: corpus
 * projects laid out from Debian's packages with no apt list (their package folder only: no
 * packaging file to read, so the repair loop finds what their tests import) end with the
 * dependencies Debian itself declares for them, and a scripted repository with the evidence a
 * real one has (PEP 621 dependencies, requires-python, a hatch-vcs version file, an entry point,
 * an import nothing declares) gets its packages, its base, the project installed and its missing
 * import repaired. `worldline resolve` prints lines that parse as a manifest, and a second output
 * folder takes the repaired environment from the machine's cache instead of repairing again.
 */
import { execFileSync } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { beforeAll, describe, expect, inject, it } from 'vitest';
import { cacheDir } from '../pipeline/runtime/layout.js';
import type { LedgerEntry } from '../pipeline/runtime/ledger.js';
import { parseManifest } from '../pipeline/runtime/manifest.js';
import type { BuildRecord, ResolveRecord, ValidateRecord } from '../pipeline/runtime/records.js';
import { CORPUS, fetchDeb } from './corpus.js';
import { cli, gitRepo, sql, tempDir } from './helpers.js';

interface RunJson {
  units: { unit_id: string; repo: string; status: string; reason: string | null }[];
}

const SCRIPTED: Record<string, string> = {
  'pyproject.toml': [
    '[build-system]',
    'requires = ["hatchling", "hatch-vcs"]',
    'build-backend = "hatchling.build"',
    '[project]',
    'name = "scripted-app"',
    'dynamic = ["version"]',
    'requires-python = ">=3.12"',
    'dependencies = ["PyYAML>=5"]',
    '[project.scripts]',
    'scripted-app = "scripted_app.cli:main"',
    '[tool.hatch.version]',
    'source = "vcs"',
    '[tool.hatch.build.hooks.vcs]',
    'version-file = "src/scripted_app/_version.py"',
    '[tool.pytest.ini_options]',
    'testpaths = ["tests"]',
    'addopts = "--strict-markers"',
    '',
  ].join('\n'),
  'src/scripted_app/__init__.py': 'from ._version import __version__\n',
  'src/scripted_app/cli.py': 'def main():\n    return 0\n',
  'tests/test_app.py': [
    'import importlib.metadata',
    'import sys',
    '',
    'import six  # declared nowhere: the build repairs it',
    'import yaml',
    '',
    'import scripted_app',
    '',
    '',
    'def test_yaml():',
    '    assert yaml.safe_load("a: 1") == {"a": 1}',
    '',
    '',
    'def test_installed_version_matches_the_version_file():',
    '    assert importlib.metadata.version("scripted-app") == scripted_app.__version__',
    '    assert scripted_app.__version__.startswith("1.4.1.dev1+g")',
    '',
    '',
    'def test_entry_point():',
    '    names = [e.name for e in importlib.metadata.entry_points(group="console_scripts")]',
    '    assert "scripted-app" in names',
    '',
    '',
    'def test_python_the_project_requires():',
    '    assert sys.version_info >= (3, 12) and six.PY3',
    '',
  ].join('\n'),
};

/** The python3-* packages a Debian package depends on (the interpreter itself aside). */
async function debianDepends(pkg: string): Promise<string[]> {
  const deb = await fetchDeb(pkg, 'bookworm', cacheDir());
  const depends = execFileSync('dpkg-deb', ['-f', deb, 'Depends']).toString();
  return depends
    .split(',')
    .map((d) => d.trim().split(/[\s(:|]/)[0])
    .filter((d) => d.startsWith('python3-'));
}

describe('bare manifest lines', () => {
  let dir: string;
  let out: string;
  let manifest: string;
  let run: RunJson;
  const unitOf = (name: string) => run.units.find((u) => u.repo === name)!;
  const entry = <R>(o: string, stage: string, name: string) =>
    JSON.parse(readFileSync(join(o, 'ledger', stage, `${unitOf(name).unit_id}.json`), 'utf8')) as LedgerEntry<R>;

  /** One repository through clone..validate, Debian alone, into a folder of its own: its records by stage. */
  const validated = async (name: string, repo: string) => {
    const lines = join(dir, `${name}.jsonl`);
    writeFileSync(lines, `${JSON.stringify({ repo })}\n`);
    const o = join(dir, `${name}-out`);
    const res = await cli([
      'run',
      '--manifest',
      lines,
      '--out',
      o,
      '--stages',
      'clone,resolve,build,validate',
      '--licenses',
      '*',
      '--pip-index',
      'none',
      '--json',
    ]);
    expect(res.code, res.stderr).toBe(0);
    const [unit] = (JSON.parse(res.stdout) as RunJson).units;
    return <R>(stage: string) => (JSON.parse(readFileSync(join(o, 'ledger', stage, `${unit.unit_id}.json`), 'utf8')) as LedgerEntry<R>).record;
  };

  beforeAll(async () => {
    dir = tempDir('envs-bare');
    const scripted = gitRepo(join(dir, 'scripted-app'), SCRIPTED);
    const git = (...args: string[]) => execFileSync('git', ['-C', scripted, '-c', 'user.name=t', '-c', 'user.email=t@t', ...args]);
    git('tag', 'v1.4.0');
    writeFileSync(join(scripted, 'README.md'), 'after the tag\n');
    git('add', '.');
    git('commit', '-qm', 'after the tag');
    manifest = join(dir, 'bare.jsonl');
    const lines = [join(inject('corpusRoot'), 'isodate'), join(inject('corpusRoot'), 'hyperlink'), scripted].map((repo) => JSON.stringify({ repo }));
    writeFileSync(manifest, `${lines.join('\n')}\n`);
    out = join(dir, 'out');
    const res = await cli(['run', '--manifest', manifest, '--out', out, '--stages', 'clone,resolve,build,validate,shard', '--licenses', '*', '--json']);
    run = JSON.parse(res.stdout) as RunJson;
    expect(res.code, res.stderr).toBe(0);
  }, 900_000);

  it('gives Debian-laid-out projects the dependencies Debian declares for them, found by repairing what their tests import', async () => {
    for (const name of ['isodate', 'hyperlink']) {
      const build = entry<BuildRecord>(out, 'build', name).record!;
      expect(build.env_source, name).toBe('repaired');
      expect(build.attempts!.length, name).toBeGreaterThan(1);
      expect(build.attempts![0].problems.join('\n'), name).toMatch(/No module named/);
      for (const dep of await debianDepends(CORPUS[name].debPackage)) expect(build.env!.apt, `${name} depends on ${dep}`).toContain(dep);
      const v = entry<ValidateRecord>(out, 'validate', name).record!;
      expect(v, name).toMatchObject({ collected: CORPUS[name].expected.collected, passed: CORPUS[name].expected.passed, failed: 0 });
    }
  });

  it('says where each environment came from, in status and the repos rows', async () => {
    const status = await cli(['status', '--out', out]);
    expect(status.stdout).toMatch(/environments built: 3 repaired/);
    const repos = await sql<{ repo: string; env_source: string; env_apt: string[]; env_attempts: number; env_install: string | null; env_packages: string[] }>(
      `select repo, env_source, env_apt, env_attempts, env_install, env_packages from '${out}/dataset/repos/data/*.parquet' order by repo`,
    );
    expect(repos.map((r) => [r.repo, r.env_source, r.env_attempts])).toEqual([
      ['hyperlink', 'repaired', 2],
      ['isodate', 'repaired', 2],
      ['scripted-app', 'repaired', 2],
    ]);
    expect(repos[1].env_apt).toContain('python3-six');
    expect(repos[2].env_packages.join()).toMatch(/^python3-yaml \S+ <- PyYAML>=5/);
    expect(['backend', 'metadata']).toContain(repos[2].env_install);
  });

  it("resolves a repository's own evidence: its packages, the base its requires-python needs, the project installed, an undeclared import repaired", () => {
    const resolved = entry<ResolveRecord>(out, 'resolve', 'scripted-app').record!;
    expect(resolved).toMatchObject({ source: 'inferred', python: '3.13' });
    expect(resolved.packages.find((p) => p.package === 'python3-yaml')?.asked.join()).toMatch(/PyYAML>=5 \(runtime, pyproject\.toml:8\)/);
    expect(resolved.install).toMatchObject({ name: 'scripted-app', version: expect.stringMatching(/^1\.4\.1\.dev1\+g[0-9a-f]{7}$/), root: '/repo/src' });
    const build = entry<BuildRecord>(out, 'build', 'scripted-app').record!;
    expect(build).toMatchObject({ env_source: 'repaired', python: '3.13' });
    expect(build.env!.apt).toEqual(expect.arrayContaining(['python3-yaml', 'python3-six']));
    expect(build.attempts![0].changes.join()).toMatch(/\+python3-six: ModuleNotFoundError: No module named 'six'/);
    expect(['backend', 'metadata']).toContain(build.install?.method);
    expect(entry<ValidateRecord>(out, 'validate', 'scripted-app').record).toMatchObject({ collected: 4, passed: 4 });
  });

  it('prints the environments as a manifest a person can review and run, and a second folder starts from the repaired ones', async () => {
    const res = await cli(['resolve', '--manifest', manifest, '--out', out]);
    expect(res.code, res.stderr).toBe(0);
    const printed = parseManifest(res.stdout, 'resolved.jsonl');
    expect(printed.errors).toEqual([]);
    expect(printed.units.map((u) => [u.envGiven, u.pythonGiven])).toEqual([
      [true, true],
      [true, true],
      [true, true],
    ]);
    expect(printed.units[0].env.apt).toContain('python3-six');
    expect(printed.units[2].env.setup.join()).toContain('worldline_install.py');
    expect(res.stdout).toMatch(/^# .*isodate .*: repaired, python 3\.11$/m);
    expect(res.stdout).toMatch(/^# {3}repaired: \+python3-six/m);

    const again = join(dir, 'again');
    const second = await cli(['run', '--manifest', manifest, '--out', again, '--stages', 'clone,resolve,build', '--json']);
    expect(second.code, second.stderr).toBe(0);
    for (const name of ['isodate', 'hyperlink', 'scripted-app']) {
      expect(entry<ResolveRecord>(again, 'resolve', name).record?.cached, name).toBe(true);
      expect(entry<BuildRecord>(again, 'build', name).record?.attempts, name).toHaveLength(1);
    }
  });

  it("compiles a project's own C extension in the build: its setup.py's Extension gives the build a compiler", async () => {
    const repo = gitRepo(join(dir, 'c-ext'), {
      'pyproject.toml': [
        '[build-system]',
        'requires = ["setuptools"]',
        'build-backend = "setuptools.build_meta"',
        '',
        '[project]',
        'name = "c-ext"',
        'version = "1.0"',
        'dependencies = ["six"]',
        '',
      ].join('\n'),
      'setup.py': ['from setuptools import Extension, setup', '', 'setup(ext_modules=[Extension("c_ext._fast", ["src/c_ext/_fast.c"])])', ''].join('\n'),
      'src/c_ext/__init__.py': '',
      'src/c_ext/_fast.c': [
        '#include <Python.h>',
        'static PyObject *twice(PyObject *self, PyObject *arg) { return PyLong_FromLong(2 * PyLong_AsLong(arg)); }',
        'static PyMethodDef methods[] = {{"twice", twice, METH_O, NULL}, {NULL, NULL, 0, NULL}};',
        'static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_fast", NULL, -1, methods};',
        'PyMODINIT_FUNC PyInit__fast(void) { return PyModule_Create(&module); }',
        '',
      ].join('\n'),
      'tests/test_fast.py': 'from c_ext._fast import twice\n\n\ndef test_twice():\n    assert twice(21) == 42\n',
    });
    const record = await validated('c-ext', repo);
    expect(record<ResolveRecord>('resolve')?.env?.apt).toEqual(expect.arrayContaining(['gcc', 'libc6-dev', 'python3-dev']));
    expect(record<BuildRecord>('build')?.install?.method).toBe('backend');
    expect(record<ValidateRecord>('validate')).toMatchObject({ collected: 1, passed: 1 });
  }, 900_000);

  it("sets aside a test module that writes into an installed package's folder at import, as the runs' user cannot", async () => {
    // As nnsight does (its log beside its code), which cost SAELens every test: the build's collect-only
    // run, as root, did not fail there, and validate stopped at collection.
    const repo = gitRepo(join(dir, 'writes-site'), {
      'tests/test_writes.py': [
        'import os',
        '',
        "open(os.path.join(os.path.dirname(os.__file__), 'writes-site.log'), 'a').close()",
        '',
        '',
        'def test_never():',
        '    pass',
        '',
      ].join('\n'),
      'tests/test_plain.py': 'def test_plain():\n    assert 1 + 1 == 2\n',
    });
    const record = await validated('writes-site', repo);
    expect(record<BuildRecord>('build')?.env?.pytest_args).toContain('--continue-on-collection-errors');
    expect(record<ValidateRecord>('validate')).toMatchObject({ collected: 1, passed: 1, collect_errors: 1 });
  }, 900_000);
});
