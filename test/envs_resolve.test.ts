/**
 * The Debian resolver against the real bookworm and trixie indexes (reduced once from the mirror
 * into cacheDir()/debian: the same mirror base images come from), and against what Debian itself
 * declares: a package's Requires-Dist resolves to the packages its Depends names.
 */
import { execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { beforeAll, describe, expect, it, vi } from 'vitest';
import { debianCandidate, packageForModule, resolutionKey, resolveDebian } from '../pipeline/envs/debian/resolve.js';
import { type DebianIndex, loadDebianIndex } from '../pipeline/envs/debian/suite_index.js';
import { readEvidence } from '../pipeline/envs/evidence/read.js';
import { cacheDir } from '../pipeline/runtime/layout.js';
import { withoutTestPaths } from '../pipeline/sandbox/suite_run.js';
import { fetchDeb } from './corpus.js';
import { tempDir, writeTree } from './helpers.js';

const layout = (files: Record<string, string>) => writeTree(tempDir('resolve'), files);
/** The evidence of a repository whose only file is this pyproject.toml. */
const project = (...lines: string[]) => readEvidence(layout({ 'pyproject.toml': lines.join('\n') }));

let bookworm: DebianIndex;
let trixie: DebianIndex;

beforeAll(async () => {
  [bookworm, trixie] = await Promise.all([loadDebianIndex('bookworm'), loadDebianIndex('trixie')]);
});

describe('Debian indexes', () => {
  it("hold each suite's dh-python map, packages, dist-info and import names", () => {
    expect(bookworm.python).toMatch(/^3\.11\.\d+$/);
    expect(trixie.python).toMatch(/^3\.13\.\d+$/);
    // About 5,200 and 6,500 entries: dh-python's cpython3_fallback of each suite.
    expect(bookworm.dhPython.size).toBeGreaterThan(4500);
    expect(trixie.dhPython.size).toBeGreaterThan(bookworm.dhPython.size);
    expect(bookworm.dhPython.get('pyyaml')).toBe('python3-yaml');
    expect(bookworm.packages.get('python3-pytest')).toMatch(/^7\./);
    expect(trixie.packages.get('python3-pytest')).toMatch(/^8\./);
    expect(bookworm.distInfo.get('attrs')).toEqual([['python3-attr', expect.stringMatching(/^22\./)]]);
    expect(trixie.modules.get('yaml')).toEqual(['python3-yaml']);
    expect(bookworm.hash).not.toBe(trixie.hash);
    expect(existsSync(join(cacheDir(), 'debian', 'bookworm', `index-${bookworm.hash}.json`))).toBe(true);
  });

  it('load from the cache with no network: a second process reads the same index', async () => {
    vi.resetModules();
    vi.stubEnv('WORLDLINE_DEBIAN_MIRROR', 'http://127.0.0.1:9/nothing-listens-here');
    try {
      const fresh = await import('../pipeline/envs/debian/suite_index.js');
      const again = await fresh.loadDebianIndex('bookworm');
      expect(again.hash).toBe(bookworm.hash);
      expect(again.dhPython).toEqual(bookworm.dhPython);
      expect(again.modules.size).toBe(bookworm.modules.size);
    } finally {
      vi.unstubAllEnvs();
    }
  });
});

describe('requirement names to Debian packages', () => {
  it('maps PyPI names the way Debian does, in both suites', () => {
    const cases: [string, string][] = [
      ['python-dateutil', 'python3-dateutil'],
      ['attrs', 'python3-attr'],
      ['pyyaml', 'python3-yaml'],
      ['hypothesis', 'python3-hypothesis'],
      ['pytest-timeout', 'python3-pytest-timeout'],
      ['zope-interface', 'python3-zope.interface'],
      ['markdown-it-py', 'python3-markdown-it'],
    ];
    for (const index of [bookworm, trixie]) {
      for (const [name, pkg] of cases) expect(debianCandidate(index, name)?.package, `${name} in ${index.suite}`).toBe(pkg);
    }
    expect(debianCandidate(bookworm, 'attrs')).toEqual({
      package: 'python3-attr',
      version: bookworm.packages.get('python3-attr'),
      upstream: expect.stringMatching(/^22\.2/),
      via: 'dh-python',
    });
    expect(debianCandidate(bookworm, 'argparse')?.via).toBe('python3');
    expect(debianCandidate(bookworm, 'no-such-project-anywhere-xyz')).toBeUndefined();
  });

  it('maps a missing import name to the package that ships it', () => {
    expect(packageForModule(bookworm, 'yaml')?.package).toBe('python3-yaml');
    expect(packageForModule(bookworm, 'dateutil.parser')?.package).toBe('python3-dateutil');
    expect(packageForModule(trixie, 'attr')?.package).toBe('python3-attr');
    expect(packageForModule(bookworm, 'google.protobuf')?.package).toBe('python3-protobuf');
    expect(packageForModule(bookworm, 'tkinter')?.package).toBe('python3-tk');
    expect(packageForModule(bookworm, 'no_such_module_xyz')).toBeUndefined();
  });
});

describe('resolving a bare repository', () => {
  it('takes runtime and test requirements with provenance, skips what markers exclude, and chooses 3.11 when it satisfies as much', () => {
    const dir = layout({
      'pyproject.toml': [
        '[project]', // 1
        'name = "demo"',
        'requires-python = ">=3.9"',
        'dependencies = ["python-dateutil>=2.8", "attrs", "tomli; python_version < \'3.11\'", "PyYAML"]',
        '[project.optional-dependencies]', // 5
        'tests = ["pytest", "hypothesis", "pytest-timeout", "demo[yaml]"]',
        'yaml = ["ruamel.yaml"]',
        'docs = ["sphinx"]',
        '[tool.pytest.ini_options]',
        'addopts = "--cov=demo --cov-report=term -ra -p xdist"', // 10
      ].join('\n'),
      'tox.ini': '[testenv]\nextras = tests\ncommands = pytest tests -m "not network" -n 4\nsetenv =\n  TZ = UTC\n',
    });
    const ev = readEvidence(dir);
    const r = resolveDebian(ev, [bookworm, trixie]);
    expect(r.python).toBe('3.11');
    expect(r.suite).toBe('bookworm');
    expect(r.env.apt).toEqual([
      'python3-attr',
      'python3-dateutil',
      'python3-hypothesis',
      'python3-pytest',
      'python3-pytest-timeout',
      'python3-ruamel.yaml',
      'python3-yaml',
    ]);
    expect(r.extras).toEqual(['tests', 'yaml']);
    expect(r.groups).toEqual(['runtime', 'test']);
    expect(r.unresolved).toEqual([]);
    const dateutil = r.packages.find((p) => p.package === 'python3-dateutil')!;
    expect(dateutil).toMatchObject({
      via: 'dh-python',
      asked: [{ requirement: 'python-dateutil>=2.8', group: 'runtime', source: { file: 'pyproject.toml', line: 4 }, satisfied: true }],
    });
    expect(r.skipped.map((s) => `${s.requirement}: ${s.reason}`)).toEqual([
      'demo[yaml]: the project itself',
      "tomli ; python_version < '3.11': its marker is false on Python 3.11.2",
    ]);
    expect(r.env.pytest_args).toEqual(['-o', 'addopts=-ra', 'tests', '-m', 'not network']);
    // Runs that name their own tests drop the paths and keep every option's value.
    expect(withoutTestPaths(r.env.pytest_args)).toEqual(['-o', 'addopts=-ra', '-m', 'not network']);
    expect(r.pytestArgs[0]).toMatchObject({
      source: { file: 'pyproject.toml', line: 9 },
      why: expect.stringContaining('--cov=demo (coverage traces the run itself)'),
    });
    expect(r.env.vars).toEqual({ TZ: 'UTC' });
    expect(r.bases.map((b) => `${b.python} ${b.satisfied}`)).toEqual(['3.11 7', '3.13 7']);
    // On 3.9 (bullseye) tomli's marker holds: it is resolved there.
    const onTrixieOnly = resolveDebian(ev, [trixie]);
    expect(onTrixieOnly.python).toBe('3.13');
  });

  it('chooses 3.13 when only trixie meets the bounds, and says what bookworm lacks', () => {
    const ev = project(
      '[project]',
      'name = "newer"',
      'dependencies = ["attrs>=24.1"]',
      '[dependency-groups]',
      'test = ["pytest>=8"]',
      '[tool.pytest]',
      'testpaths = ["tests"]',
      'xfail_strict = true',
    );
    const r = resolveDebian(ev, [bookworm, trixie]);
    expect(r.python).toBe('3.13');
    expect(r.env.apt).toEqual(['python3-attr', 'python3-pytest']);
    expect(r.bases.map((b) => [b.python, b.satisfied, b.unsatisfiable])).toEqual([
      ['3.13', 2, 0],
      ['3.11', 0, 2],
    ]);
    // pytest 8 ignores pytest 9's native table: it is passed as -o.
    expect(r.env.pytest_args).toEqual(['-o', 'testpaths=tests', '-o', 'xfail_strict=true']);
    const onBookworm = resolveDebian(ev, [bookworm]);
    expect(onBookworm.unresolved.map((u) => `${u.requirement} ${u.reason}: ${u.detail}`)).toEqual([
      expect.stringMatching(/^attrs>=24\.1 unsatisfiable: Debian bookworm has python3-attr 22\.2\.0-\S+ \(22\.2\.0\), outside >=24\.1$/),
      expect.stringMatching(/^pytest>=8 unsatisfiable: Debian bookworm has python3-pytest 7\.2\.1-\S+ \(7\.2\.1\), outside >=8$/),
    ]);
    // Installed anyway: the closest the suite has.
    expect(onBookworm.env.apt).toEqual(['python3-attr', 'python3-pytest']);
  });

  it('keeps requires-python above the count of satisfied requirements, and resolves build requirements apart', () => {
    const ev = project(
      '[build-system]',
      'requires = ["setuptools>=61", "setuptools-scm[toml]>=6.2"]',
      'build-backend = "setuptools.build_meta"',
      '[project]',
      'name = "older"',
      'requires-python = ">=3.8,<3.12"',
      'dependencies = ["attrs>=24.1", "no-such-dependency-xyz"]',
    );
    const r = resolveDebian(ev, [bookworm, trixie]);
    expect(r.python).toBe('3.11');
    expect(r.bases.map((b) => [b.python, b.requiresPython])).toEqual([
      ['3.11', true],
      ['3.13', false],
    ]);
    expect(r.unresolved.map((u) => u.reason)).toEqual(['unsatisfiable', 'missing']);
    expect(r.build.backend).toBe('setuptools.build_meta');
    expect(r.build.packages.map((p) => p.package)).toEqual(['python3-setuptools', 'python3-setuptools-scm']);
    expect(r.env.apt).toEqual(['python3-attr']);
  });

  it('is deterministic: the same evidence and indexes give the same resolution and key; other evidence, another key', () => {
    const dir = layout({ 'pyproject.toml': '[project]\nname = "same"\ndependencies = ["requests", "idna", "six"]\n' });
    const a = resolveDebian(readEvidence(dir), [trixie, bookworm]);
    const b = resolveDebian(readEvidence(dir), [bookworm, trixie]);
    expect(b).toEqual(a);
    expect(a.key).toBe(resolutionKey(readEvidence(dir), [bookworm, trixie]));
    writeFileSync(join(dir, 'requirements-test.txt'), 'pytest\n');
    expect(resolutionKey(readEvidence(dir), [bookworm, trixie])).not.toBe(a.key);
  });

  it('takes dev requirements only where nothing says test; skips installers; other requirement files are extras', () => {
    const ev = readEvidence(
      layout({ 'requirements-dev.txt': 'pytest-mock\nblack\ntox\n', 'requirements.txt': 'six\n', 'requirements/benchmarks.txt': 'pyperf\n' }),
    );
    const r = resolveDebian(ev, [bookworm]);
    expect(r.groups).toEqual(['runtime', 'test', 'dev']);
    expect(r.env.apt).toEqual(['black', 'python3-pytest-mock', 'python3-six']);
    expect(r.skipped).toEqual([
      { requirement: 'tox', source: { file: 'requirements-dev.txt', line: 3 }, reason: 'an installer or test runner, not needed in the image' },
    ]);
  });

  it("runs the broadest of the project's test commands: the whole suite over one job's single module", () => {
    const workflow = (name: string, run: string) => `jobs:\n  ${name}:\n    runs-on: ubuntu-latest\n    steps:\n      - run: ${run}\n`;
    const args = (files: Record<string, string>) =>
      resolveDebian(readEvidence(layout({ 'pyproject.toml': '[project]\nname = "many"\n', ...files })), [bookworm]).env.pytest_args;
    // lm-evaluation-harness: new_tasks.yml (read first) runs one module, unit_tests.yml the rest.
    const jobs = {
      '.github/workflows/new_tasks.yml': workflow('tasks', 'pytest tests/test_tasks.py -x'),
      '.github/workflows/unit_tests.yml': workflow('cpu', 'pytest -x -n=auto --ignore=tests/models/test_openvino.py'),
    };
    expect(args(jobs)).toEqual(['--ignore=tests/models/test_openvino.py']);
    expect(args({ ...jobs, '.github/workflows/unit_tests.yml': workflow('cpu', 'pytest tests -m "not slow"') })).toEqual(['tests', '-m', 'not slow']);
    // nnsight: a conftest's own option and its value are no test path (pytest said `file or directory not found: cpu`).
    expect(args({ '.github/workflows/ci.yml': workflow('test', 'pytest tests/ --device cpu') })).toEqual(['tests/']);
    expect(args({ '.github/workflows/ci.yml': workflow('test', 'pytest --runslow tests/unit') })).toEqual(['tests/unit']);
    // pyvene runs unittest's discovery over files named *TestCase.py, which pytest's defaults do not collect.
    expect(args({ '.github/workflows/ci.yml': workflow('test', "python -m unittest discover -p '*TestCase.py'") })).toEqual([
      '-o',
      'python_files=*TestCase.py',
    ]);
    expect(args({ '.github/workflows/ci.yml': workflow('test', 'python -m unittest discover -s tests') })).toEqual(['tests', '-o', 'python_files=test*.py']);
    // With testpaths configured (pyvene's pytest table names tests/ and python_files test_*.py), the pattern still applies.
    const configured = { 'pytest.ini': '[pytest]\ntestpaths = tests\npython_files = test_*.py\n' };
    expect(args({ ...configured, '.github/workflows/ci.yml': workflow('test', "python -m unittest discover -p '*TestCase.py'") })).toEqual([
      '-o',
      'python_files=*TestCase.py',
    ]);
    expect(args({ ...configured, '.github/workflows/ci.yml': workflow('test', 'pytest tests/unit') })).toEqual([]);
  });

  it('takes the PEP 735 groups a test job installs: pip install --group, uv sync and uv run with their defaults', () => {
    const pyproject = [
      '[project]',
      'name = "grouped"',
      '[project.optional-dependencies]',
      'test = ["six"]',
      '[dependency-groups]',
      'dev = ["pytest-mock"]',
      'lint = ["black"]',
      'docs = ["sphinx"]',
    ].join('\n');
    const job = (...runs: string[]) =>
      `jobs:\n  test:\n    runs-on: ubuntu-latest\n    steps:\n${runs.map((r) => `      - run: ${r}\n`).join('')}      - run: pytest\n`;
    const apt = (workflow?: string) =>
      resolveDebian(readEvidence(layout({ 'pyproject.toml': pyproject, ...(workflow ? { '.github/workflows/ci.yml': workflow } : {}) })), [bookworm]).env.apt;
    // A test extra and no job: the groups are someone else's (lint, docs, a developer's dev).
    expect(apt()).toEqual(['python3-six']);
    expect(apt(job('pip install . --group lint'))).toEqual(['black', 'python3-six']);
    // A shell comment names nothing (gpytorch's CI: `pip install "numpy<2"  # Numpy 2.0 is not ...`).
    expect(apt(job('|\n          pip install . --group lint  # sphinx 2.0 is for the docs job'))).toEqual(['black', 'python3-six']);
    // uv's default group is dev; --group adds, --no-dev takes it away.
    expect(apt(job('uv sync --group docs'))).toEqual(['python3-pytest-mock', 'python3-six', 'python3-sphinx']);
    expect(apt(job('uv sync --no-dev'))).toEqual(['python3-six']);
    expect(apt(job('uv run --group lint pytest -x'))).toEqual(['black', 'python3-pytest-mock', 'python3-six']);
    expect(apt(job('uv sync --all-groups'))).toEqual(['black', 'python3-pytest-mock', 'python3-six', 'python3-sphinx']);
  });

  it("bounds a requirement by the constraints installed beside it, not by another env's", () => {
    const ev = readEvidence(
      layout({
        'setup.cfg': '[options]\ninstall_requires =\n    six>=1.10\n',
        'tox.ini':
          '[testenv]\ndeps = -rrequirements-test.txt\ncommands = pytest\n[testenv:old]\ndeps =\n    six\n    -cold-constraints.txt\ncommands = pytest\n',
        'requirements-test.txt': 'idna\n-c constraints.txt\n',
        'constraints.txt': 'idna<2\n',
        'old-constraints.txt': 'six==1.0\n',
      }),
    );
    const r = resolveDebian(ev, [bookworm]);
    expect(r.unresolved.map((u) => `${u.requirement} ${u.scope} ${u.detail.replace(/ \d\S+ \([^)]*\)/, '')}`)).toEqual([
      'idna requirements:requirements-test.txt Debian bookworm has python3-idna, outside <2',
      'idna tox:testenv Debian bookworm has python3-idna, outside <2',
      'six tox:old Debian bookworm has python3-six, outside ==1.0',
    ]);
  });
});

/** Requires-Dist of a .deb's dist-info METADATA, extras left out. (Debian empties an egg-info's requires.txt: such packages are not checked.) */
function requiresDist(root: string): string[] {
  const dp = join(root, 'usr/lib/python3/dist-packages');
  const meta = readdirSync(dp).find((d) => d.endsWith('.dist-info'));
  if (!meta) throw new Error(`no dist-info under ${dp}`);
  return [...readFileSync(join(dp, meta, 'METADATA'), 'utf8').matchAll(/^Requires-Dist: (.*)$/gm)].map((m) => m[1]).filter((r) => !/extra\s*==/.test(r));
}

describe("Debian's own declared dependencies", () => {
  const checked: ['bookworm' | 'trixie', string][] = [
    ['bookworm', 'python3-jsonschema'],
    ['bookworm', 'python3-pytest'],
    ['bookworm', 'python3-rich'],
    ['bookworm', 'python3-httpx'],
    ['bookworm', 'python3-sphinx'],
    ['trixie', 'python3-jsonschema'],
    ['trixie', 'python3-rich'],
    ['trixie', 'python3-flask'],
    ['trixie', 'python3-httpx'],
    ['trixie', 'python3-pytest'],
    ['trixie', 'python3-aiohttp'],
    ['trixie', 'python3-requests'],
  ];
  it.each(checked)('%s %s: its Requires-Dist, laid out as a bare project, resolves to packages its Depends names', async (suite, pkg) => {
    const deb = await fetchDeb(pkg, suite, cacheDir());
    const root = mkdtempSync(join(tmpdir(), 'wl-deb-'));
    try {
      execFileSync('dpkg-deb', ['-x', deb, root]);
      const requires = requiresDist(root);
      const depends = execFileSync('dpkg-deb', ['-f', deb, 'Depends']).toString();
      const names = new Set(depends.split(/[,|]/).map((d) => d.trim().split(/[\s(:]/)[0]));
      const r = resolveDebian(project('[project]', 'name = "bare"', `dependencies = ${JSON.stringify(requires)}`), [suite === 'bookworm' ? bookworm : trixie]);
      expect(r.unresolved.filter((u) => u.reason === 'missing')).toEqual([]);
      expect(r.env.apt.length).toBeGreaterThan(0);
      for (const p of r.env.apt) expect(names, `${p} (for ${pkg}: ${requires.join(', ')})`).toContain(p);
    } finally {
      rmSync(root, { recursive: true, force: true });
    }
  });
});
