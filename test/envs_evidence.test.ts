import { execFileSync } from 'node:child_process';
import { symlinkSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import type { Evidence } from '../pipeline/envs/evidence/context.js';
import { readEvidence } from '../pipeline/envs/evidence/read.js';
import { poetryToPep440 } from '../pipeline/envs/requirements/poetry.js';
import { tempDir, writeTree } from './helpers.js';

/** A scripted repository layout: files written by the test, nothing else. */
const layout = (files: Record<string, string>) => writeTree(tempDir('evidence'), files);

/** "key specifiers [; marker] group[/scope] file:line" per requirement, in the order found. */
function requirements(ev: Evidence): string[] {
  return ev.requirements.map((r) => {
    const spec = r.requirement.specifiers.map((s) => `${s.op}${s.version}`).join(',');
    const marker = r.requirement.markerText ? ` ; ${r.requirement.markerText}` : '';
    return `${r.requirement.key}${spec ? ` ${spec}` : ''}${marker} ${r.group}${r.scope ? `/${r.scope}` : ''} ${r.source.file}:${r.source.line}${r.constraint ? ' constraint' : ''}`;
  });
}

const at = (file: string, line: number) => ({ file, line });
/** GitHub's expression sigil, kept apart so the text is no template placeholder. */
const GH = '$';

describe('evidence: pyproject.toml', () => {
  it('reads PEP 621 dependencies, extras as groups, PEP 735 groups with include-group, build-system, classifiers and hatch', () => {
    const ev = readEvidence(
      layout({
        'pyproject.toml': [
          '[build-system]', // 1
          'requires = ["hatchling>=1.18", "hatch-vcs"]',
          'build-backend = "hatchling.build"',
          '',
          '[project]', // 5
          'name = "demo"',
          'dynamic = ["version"]',
          'requires-python = ">=3.10"',
          'dependencies = [',
          '  "attrs>=22.2",', // 10
          '  "python-dateutil>=2.8; python_version >= \'3.9\'",',
          ']',
          'classifiers = ["Programming Language :: Python :: 3.11", "Programming Language :: Python :: 3 :: Only"]',
          '',
          '[project.optional-dependencies]', // 15
          'tests = ["pytest>=7", "hypothesis"]',
          'Docs = ["sphinx"]',
          '',
          '[dependency-groups]',
          'test = ["pytest-timeout", {include-group = "typing"}]', // 20
          'typing = ["mypy>=1"]',
          '',
          '[tool.hatch.version]',
          'source = "vcs"',
          '[tool.hatch.build.hooks.vcs]', // 25
          'version-file = "src/demo/_version.py"',
          '[tool.hatch.envs.default]',
          'dependencies = ["coverage"]',
          'features = ["tests"]',
          '[tool.hatch.envs.default.scripts]', // 30
          'test = "pytest {args:tests}"',
          '[tool.hatch.envs.default.env-vars]',
          'DEMO_MODE = "strict"',
          '',
        ].join('\n'),
      }),
    );
    expect(requirements(ev)).toEqual([
      'hatchling >=1.18 build pyproject.toml:2',
      'hatch-vcs build pyproject.toml:2',
      'attrs >=22.2 runtime pyproject.toml:10',
      "python-dateutil >=2.8 ; python_version >= '3.9' runtime pyproject.toml:11",
      'pytest >=7 test/extra:tests pyproject.toml:16',
      'hypothesis test/extra:tests pyproject.toml:16',
      'sphinx docs/extra:docs pyproject.toml:17',
      'pytest-timeout test/group:test pyproject.toml:20',
      'mypy >=1 test/group:test pyproject.toml:21',
      'mypy >=1 lint/group:typing pyproject.toml:21',
      'coverage test/hatch:default pyproject.toml:28',
    ]);
    expect(ev.project).toEqual({
      name: 'demo',
      buildBackend: 'hatchling.build',
      version: { scm: 'hatch-vcs', files: [{ path: 'src/demo/_version.py', source: at('pyproject.toml', 26) }] },
    });
    expect(ev.requiresPython).toEqual([{ specifier: '>=3.10', source: at('pyproject.toml', 8) }]);
    expect(ev.pythonVersions).toEqual([{ version: '3.11', from: 'classifier', source: at('pyproject.toml', 13) }]);
    expect(ev.selfInstalls).toEqual([{ extras: ['tests'], group: 'test', source: at('pyproject.toml', 29) }]);
    expect(ev.testCommands).toEqual([{ tool: 'hatch', scope: 'hatch:default:test', args: ['tests'], source: at('pyproject.toml', 31) }]);
    expect(ev.vars).toEqual([{ name: 'DEMO_MODE', value: 'strict', scope: 'hatch:default', source: at('pyproject.toml', 33) }]);
    expect(ev.files.map((f) => f.path)).toEqual(['pyproject.toml']);
  });

  it('translates poetry constraints and groups, reads pdm dev-dependencies and setuptools-scm', () => {
    expect(poetryToPep440('^1.2.3')).toBe('>=1.2.3,<2.0.0');
    expect(poetryToPep440('^0.2.3')).toBe('>=0.2.3,<0.3.0');
    expect(poetryToPep440('^0.0.3')).toBe('>=0.0.3,<0.0.4');
    expect(poetryToPep440('^0.0')).toBe('>=0.0,<0.1.0');
    expect(poetryToPep440('~1.2.3')).toBe('>=1.2.3,<1.3.0');
    expect(poetryToPep440('~1')).toBe('>=1,<2.0.0');
    expect(poetryToPep440('1.2.*')).toBe('==1.2.*');
    expect(poetryToPep440('>= 1.2 < 2')).toBe('>=1.2,<2');
    expect(poetryToPep440('*')).toBe('');
    expect(poetryToPep440('^1 || ^2')).toBeUndefined();
    const ev = readEvidence(
      layout({
        'pyproject.toml': [
          '[tool.poetry]', // 1
          'name = "poetic"',
          'version = "1.2.3"',
          '[tool.poetry.dependencies]',
          'python = "^3.9"', // 5
          'requests = "^2.28"',
          'tomli = { version = ">=1.1", python = "<3.11" }',
          'rich = { version = "~13.3", extras = ["jupyter"], optional = true }',
          'legacy = "1.0 || 2.0"',
          '[tool.poetry.group.test.dependencies]', // 10
          'pytest = "^7.2"',
          '[tool.poetry.dev-dependencies]',
          'black = "*"',
          '[tool.pdm.dev-dependencies]',
          'lint = ["ruff"]', // 15
          'testing = ["pytest-cov>=4"]',
          '[tool.setuptools_scm]',
          'write_to = "poetic/_version.py"',
        ].join('\n'),
      }),
    );
    expect(requirements(ev)).toEqual([
      'requests >=2.28,<3.0.0 runtime pyproject.toml:6',
      'tomli >=1.1 ; python_full_version < "3.11" runtime pyproject.toml:7',
      'rich >=13.3,<13.4.0 extra pyproject.toml:8',
      'legacy runtime pyproject.toml:9',
      'black dev pyproject.toml:13',
      'pytest >=7.2,<8.0.0 test/poetry:test pyproject.toml:11',
      'ruff lint/pdm:lint pyproject.toml:15',
      'pytest-cov >=4 test/pdm:testing pyproject.toml:16',
    ]);
    expect(ev.requirements[2].requirement.extras).toEqual(['jupyter']);
    expect(ev.requiresPython).toEqual([{ specifier: '>=3.9,<4.0.0', source: at('pyproject.toml', 5) }]);
    expect(ev.project).toEqual({
      name: 'poetic',
      version: { static: '1.2.3', scm: 'setuptools-scm', files: [{ path: 'poetic/_version.py', source: at('pyproject.toml', 18) }] },
    });
    expect(ev.notes).toEqual([{ source: at('pyproject.toml', 9), message: 'poetry constraint "1.0 || 2.0" is a union; taken without bounds' }]);
  });

  it('follows setuptools dynamic requirement files and reads legacy_tox_ini; a TOML error is a note', () => {
    const ev = readEvidence(
      layout({
        'pyproject.toml': [
          '[project]',
          'name = "dyn"',
          'dynamic = ["dependencies", "optional-dependencies"]',
          '[tool.setuptools.dynamic]',
          'dependencies = { file = ["requirements.in"] }',
          'optional-dependencies.test = { file = ["test.txt"] }',
          '[tool.tox]',
          'legacy_tox_ini = """',
          '[testenv]',
          'deps = pretend',
          'commands = pytest -q',
          '"""',
        ].join('\n'),
        'requirements.in': 'packaging>=21\n',
        'test.txt': 'pytest\n',
      }),
    );
    expect(requirements(ev)).toEqual([
      'packaging >=21 runtime requirements.in:1',
      'pytest test/extra:test test.txt:1',
      'pretend test/tox:testenv pyproject.toml:10',
      'packaging >=21 runtime/requirements:requirements.in requirements.in:1',
    ]);
    expect(ev.testCommands).toEqual([{ tool: 'tox', scope: 'tox:testenv', args: ['-q'], source: at('pyproject.toml', 11) }]);
    const bad = readEvidence(layout({ 'pyproject.toml': '[project\nname = 1\n' }));
    expect(bad.notes).toHaveLength(1);
    expect(bad.notes[0].message).toMatch(/^not read: /);
  });
});

describe('evidence: setuptools', () => {
  it('reads setup.cfg options, extras and python_requires', () => {
    const ev = readEvidence(
      layout({
        'setup.cfg': [
          '[metadata]', // 1
          'name = cfgproj',
          'version = attr: cfgproj.__version__',
          'classifiers =',
          '    Programming Language :: Python :: 3.9', // 5
          '[options]',
          'python_requires = >=3.8',
          'install_requires =',
          '    six>=1.10  # six is old',
          '    importlib-metadata; python_version < "3.8"', // 10
          'tests_require =',
          '    mock',
          '[options.extras_require]',
          'test =',
          '    pytest-xdist', // 15
        ].join('\n'),
      }),
    );
    expect(requirements(ev)).toEqual([
      'six >=1.10 runtime setup.cfg:9',
      'importlib-metadata ; python_version < "3.8" runtime setup.cfg:10',
      'mock test setup.cfg:12',
      'pytest-xdist test/extra:test setup.cfg:15',
    ]);
    expect(ev.project).toEqual({ name: 'cfgproj', version: { files: [] } });
    expect(ev.requiresPython).toEqual([{ specifier: '>=3.8', source: at('setup.cfg', 7) }]);
    expect(ev.pythonVersions).toEqual([{ version: '3.9', from: 'classifier', source: at('setup.cfg', 5) }]);
  });

  it('parses setup.py without running it: literals, names assigned literals, += and item assignment, files read', () => {
    const ev = readEvidence(
      layout({
        'setup.py': [
          'import os', // 1
          'from setuptools import setup',
          'here = os.path.abspath(os.path.dirname(__file__))',
          'BASE = ["click>=8", "jinja2"]',
          'BASE += ["markupsafe"]', // 5
          'TESTS = ["pytest", "freezegun"]',
          'EXTRAS = {"test": TESTS, "yaml": ["PyYAML>=5.1"], \':python_version < "3.8"\': ["typing-extensions"]}',
          'EXTRAS["all"] = EXTRAS["yaml"] + ["toml"]',
          'with open(os.path.join(here, "requirements", "base.txt")) as f:',
          '    base_reqs = f.read().splitlines()', // 10
          'import subprocess; subprocess.run(["rm", "-rf", "/"])  # never run',
          'setup(',
          '    name="pyproj",',
          '    version=get_version(),',
          '    install_requires=BASE + base_reqs,', // 15
          '    extras_require=EXTRAS,',
          '    tests_require=[l.strip() for l in open("requirements/test.txt") if l.strip()],',
          '    python_requires=">=3.7",',
          '    use_scm_version={"write_to": "pyproj/version.py"},',
          '    setup_requires=["setuptools_scm"],', // 20
          '    classifiers=["Programming Language :: Python :: 3.10"],',
          '    entry_points=ENTRY_POINTS,',
          ')',
        ].join('\n'),
        'requirements/base.txt': 'idna>=2.5\n',
        'requirements/test.txt': '-r base.txt\npytest-asyncio>=0.21\n',
      }),
    );
    const fromSetup = requirements(ev).filter((r) => !r.includes('/requirements:'));
    expect(fromSetup).toEqual([
      'click >=8 runtime setup.py:4',
      'jinja2 runtime setup.py:4',
      'markupsafe runtime setup.py:5',
      'idna >=2.5 runtime requirements/base.txt:1',
      'idna >=2.5 test requirements/base.txt:1',
      'pytest-asyncio >=0.21 test requirements/test.txt:2',
      'setuptools-scm build setup.py:20',
      'pytest test/extra:test setup.py:6',
      'freezegun test/extra:test setup.py:6',
      'pyyaml >=5.1 extra/extra:yaml setup.py:7',
      'typing-extensions ; python_version < "3.8" runtime setup.py:7',
      'pyyaml >=5.1 extra/extra:all setup.py:7',
      'toml extra/extra:all setup.py:8',
    ]);
    expect(ev.project).toEqual({ name: 'pyproj', version: { scm: 'setuptools-scm', files: [{ path: 'pyproj/version.py', source: at('setup.py', 19) }] } });
    expect(ev.requiresPython).toEqual([{ specifier: '>=3.7', source: at('setup.py', 18) }]);
    expect(ev.pythonVersions).toEqual([{ version: '3.10', from: 'classifier', source: at('setup.py', 21) }]);
  });

  it("reads a name reassigned from itself as Python does, a requirement joined from literals, past a raw string's escaped quote", () => {
    // gpytorch's setup.py: the list was lost whole, and with it linear_operator, scipy, scikit-learn.
    const ev = readEvidence(
      layout({
        'setup.py': [
          'from setuptools import setup; import re',
          'm = re.search(r"^__version__ = [\'\\"]([^\'\\"]*)[\'\\"]", "")  # a raw string\'s \\" does not end it',
          'torch_min = "2.0"',
          'install_requires = ["scipy>=1.6.0", "linear_operator>=0.6"]',
          'try:',
          '    import torch',
          '    if torch.__version__ >= torch_min:',
          '        install_requires = [">=".join(["torch", torch_min])] + install_requires',
          'except ImportError:',
          '    pass',
          'setup(name="gp", install_requires=install_requires)',
        ].join('\n'),
      }),
    );
    expect(requirements(ev)).toEqual(['torch >=2.0 runtime setup.py:8', 'scipy >=1.6.0 runtime setup.py:4', 'linear-operator >=0.6 runtime setup.py:4']);
  });

  it('says which setup.py values it cannot know', () => {
    const ev = readEvidence(
      layout({ 'setup.py': 'from setuptools import setup\nsetup(install_requires=compute(), extras_require={"dev": [f"x{y}"]}, **kwargs)\n' }),
    );
    expect(ev.requirements).toEqual([]);
    expect(ev.notes.map((n) => `${n.source.line} ${n.message}`)).toEqual([
      '2 setup(**...) is not read: kwargs is not assigned in the file',
      '2 install_requires is not read: a call of compute()',
      '2 extras_require["dev"] is not read: an f-string',
    ]);
  });

  it('notes where a project compiles an extension of its own: setup.py, a compiling build requirement, ext-modules', () => {
    const setupPy = 'from setuptools import Extension, setup\n\nEXT = [\n    Extension("p._c", ["src/p/_c.c"]),\n]\nsetup(ext_modules=EXT)\n';
    expect(readEvidence(layout({ 'setup.py': setupPy })).project.compiled).toEqual(at('setup.py', 4));
    const cython = readEvidence(layout({ 'pyproject.toml': '[build-system]\nrequires = ["setuptools", "Cython>=3"]\n' })).project.compiled;
    expect(cython?.file).toBe('pyproject.toml');
    const table = readEvidence(
      layout({ 'pyproject.toml': '[project]\nname = "p"\n\n[tool.setuptools]\next-modules = [{name = "p._c", sources = ["c.c"]}]\n' }),
    );
    expect(table.project.compiled?.file).toBe('pyproject.toml');
    // Pure Python: no compiler.
    const pure = readEvidence(
      layout({ 'setup.py': 'from setuptools import setup\nsetup(name="p")\n', 'pyproject.toml': '[build-system]\nrequires = ["hatchling"]\n' }),
    );
    expect(pure.project.compiled).toBeUndefined();
  });

  it('notes the build programs a setup.py runs itself (tensordict builds its CMakeExtension with cmake)', () => {
    // The shape of pytorch/tensordict's setup.py at fc30bc1: the extension class names no sources, build_ext runs cmake.
    const setupPy = [
      'import subprocess',
      'from setuptools import Extension, setup',
      'from setuptools.command.build_ext import build_ext',
      'class CMakeExtension(Extension):',
      '    def __init__(self, name, sourcedir=""):',
      '        super().__init__(name, sources=[])',
      'class CMakeBuild(build_ext):',
      '    def build_extension(self, ext):',
      '        cmake_args = ["-DCMAKE_BUILD_TYPE=Release"]',
      '        subprocess.check_call(',
      '            ["cmake", ext.sourcedir] + cmake_args, cwd=self.build_temp',
      '        )',
      '        subprocess.check_call(["cmake", "--build", "."], cwd=self.build_temp)',
      '        subprocess.check_output(["git", "rev-parse", "HEAD"])',
      'setup(name="tensordict", ext_modules=[CMakeExtension("tensordict._C")], cmdclass={"build_ext": CMakeBuild})',
    ].join('\n');
    const ev = readEvidence(layout({ 'setup.py': `${setupPy}\n` }));
    expect(ev.project.programs).toEqual([{ name: 'cmake', source: at('setup.py', 10) }]);
    expect(ev.project.compiled).toEqual(at('setup.py', 10));
    // git is no build program the base must add; a pure setup.py runs none.
    expect(readEvidence(layout({ 'setup.py': 'import subprocess\nsubprocess.run("git describe", shell=True)\n' })).project.programs).toBeUndefined();
  });
});

describe('evidence: requirement files, tox, nox, workflows, Pipfile', () => {
  it('finds requirement files by name, follows -r and -c, prefers .in over its compiled .txt, records -e . and options', () => {
    const ev = readEvidence(
      layout({
        'requirements.txt': '--index-url https://pypi.example/simple\nrequests>=2\n-e .\n',
        'requirements-test.txt': '-r requirements.txt\n-c constraints.txt\npytest\n-e .[tests]\n',
        'constraints.txt': 'urllib3<2\n',
        'requirements/docs.in': 'sphinx\n',
        'requirements/docs.txt': 'sphinx==7.0.0\nalabaster==0.7.13\n',
        'dev-requirements.txt': 'black\n',
      }),
    );
    expect(requirements(ev)).toEqual([
      'black dev/requirements:dev-requirements.txt dev-requirements.txt:1',
      'requests >=2 test/requirements:requirements-test.txt requirements.txt:2',
      'urllib3 <2 test/requirements:requirements-test.txt constraints.txt:1 constraint',
      'pytest test/requirements:requirements-test.txt requirements-test.txt:3',
      'requests >=2 runtime/requirements:requirements.txt requirements.txt:2',
      'sphinx docs/requirements:requirements/docs.in requirements/docs.in:1',
    ]);
    expect(ev.selfInstalls).toEqual([
      { extras: [], editable: true, group: 'test', source: at('requirements.txt', 3) },
      { extras: ['tests'], editable: true, group: 'test', source: at('requirements-test.txt', 4) },
      { extras: [], editable: true, group: 'runtime', source: at('requirements.txt', 3) },
    ]);
    expect(ev.options).toEqual([
      { option: '--index-url', value: 'https://pypi.example/simple', source: at('requirements.txt', 1) },
      { option: '--index-url', value: 'https://pypi.example/simple', source: at('requirements.txt', 1) },
    ]);
  });

  it('reads tox envs: deps with references, factors and -r, extras, setenv, commands, envlist', () => {
    const ev = readEvidence(
      layout({
        'tox.ini': [
          '[tox]', // 1
          'envlist = py{38,39,310}, lint',
          '[base]',
          'deps = sortedcontainers',
          '[testenv]', // 5
          'deps =',
          '    {[base]deps}',
          '    -rrequirements-ci.txt',
          '    py38,py39: backports.zoneinfo  # only before 3.9',
          '    tf: tensorflow', // 10
          'extras = tests',
          'setenv =',
          '    PYTHONPATH = {toxinidir}/src',
          'commands = pytest {posargs:tests} -W error',
          '[testenv:lint]', // 15
          'deps = flake8',
          'commands = flake8 src',
          '[testenv:py311]',
          'basepython = python3.11',
          'deps = exceptiongroup', // 20
          '[pytest]',
          'testpaths = tests',
        ].join('\n'),
        'requirements-ci.txt': 'pytest-mock\n',
      }),
    );
    expect(requirements(ev)).toEqual([
      'pytest-mock test/requirements:requirements-ci.txt requirements-ci.txt:1',
      'sortedcontainers test/tox:testenv tox.ini:4',
      'pytest-mock test/tox:testenv requirements-ci.txt:1',
      // A condition on Python factors is a marker; on another factor, an env variant (an extra).
      'backports-zoneinfo ; python_version == "3.8" or python_version == "3.9" test/tox:testenv (py38,py39) tox.ini:9',
      'tensorflow extra/tox:testenv (tf) tox.ini:10',
      'flake8 lint/tox:lint tox.ini:16',
      // An env named for a Python installs its deps on that Python only.
      'exceptiongroup ; python_version == "3.11" test/tox:py311 tox.ini:20',
    ]);
    expect(ev.selfInstalls).toEqual([{ extras: ['tests'], group: 'test', source: at('tox.ini', 11) }]);
    expect(ev.vars).toEqual([{ name: 'PYTHONPATH', value: 'src', scope: 'tox:testenv', source: at('tox.ini', 13) }]);
    expect(ev.testCommands).toEqual([{ tool: 'tox', scope: 'tox:testenv', args: ['tests', '-W', 'error'], source: at('tox.ini', 14) }]);
    expect(ev.pythonVersions.map((p) => `${p.version} ${p.from} ${p.source.line}`)).toEqual(['3.8 tox 2', '3.9 tox 2', '3.10 tox 2', '3.11 tox 19']);
    expect(ev.pytest.map((p) => [p.source, p.testpaths])).toEqual([[at('tox.ini', 21), ['tests']]]);
  });

  it('reads noxfile sessions: installs (literals and names), the pytest run, the Python versions', () => {
    const ev = readEvidence(
      layout({
        'noxfile.py': [
          'import nox', // 1
          'TEST_DEPS = ["pytest", "trustme"]',
          '@nox.session(python=["3.11", "3.12"])',
          'def tests(session):',
          '    session.install("-e", ".[tests]")', // 5
          '    session.install(*TEST_DEPS, "anyio>=3")',
          '    session.run("pytest", "-x", *session.posargs)',
          '@nox.session',
          'def docs(session):',
          '    session.install("furo")', // 10
          '    session.run("sphinx-build", "docs", "build")',
        ].join('\n'),
      }),
    );
    expect(requirements(ev)).toEqual([
      'anyio >=3 test/nox:tests noxfile.py:6',
      'pytest test/nox:tests noxfile.py:6',
      'trustme test/nox:tests noxfile.py:6',
      'furo docs/nox:docs noxfile.py:10',
    ]);
    expect(ev.selfInstalls).toEqual([{ extras: ['tests'], editable: true, group: 'test', source: at('noxfile.py', 5) }]);
    expect(ev.testCommands).toEqual([{ tool: 'nox', scope: 'nox:tests', args: ['-x'], source: at('noxfile.py', 7) }]);
    expect(ev.pythonVersions.map((p) => p.version)).toEqual(['3.11', '3.12']);
  });

  it('reads a workflow: pip install lines per job, the pytest invocation, env at each level, the Python matrix', () => {
    const ev = readEvidence(
      layout({
        '.github/workflows/ci.yml': [
          'name: ci', // 1
          'on: [push]',
          'env:',
          '  FORCE_COLOR: "1"',
          `  TOKEN: ${GH}{{ secrets.TOKEN }}`, // 5
          'jobs:',
          '  test:',
          '    strategy:',
          '      matrix:',
          '        python-version: ["3.9", "3.10", 3.11]', // 10
          '        include:',
          '          - python-version: "3.13"',
          '    env:',
          '      PYTHONDEVMODE: "1"',
          '    steps:', // 15
          '      - uses: actions/setup-python@v5',
          '        with:',
          `          python-version: ${GH}{{ matrix.python-version }}`,
          '      - run: |',
          '          python -m pip install --upgrade pip', // 20
          '          pip install -e .[tests] \\',
          `            pytest-randomly "zope.interface>=5" ${GH}{{ matrix.extra }}`,
          '      - run: python -m pytest -q tests --deselect tests/test_net.py && echo done',
          '  lint:',
          '    runs-on: ubuntu-latest', // 25
          '    steps:',
          '      - run: pip install pre-commit',
        ].join('\n'),
        '.github/workflows/notes.txt': 'not a workflow',
      }),
    );
    expect(requirements(ev)).toEqual([
      'pip test/workflow:ci.yml:test .github/workflows/ci.yml:20',
      'pytest-randomly test/workflow:ci.yml:test .github/workflows/ci.yml:21',
      'zope-interface >=5 test/workflow:ci.yml:test .github/workflows/ci.yml:21',
      'pre-commit lint/workflow:ci.yml:lint .github/workflows/ci.yml:27',
    ]);
    expect(ev.selfInstalls).toEqual([{ extras: ['tests'], editable: true, group: 'test', source: at('.github/workflows/ci.yml', 21) }]);
    expect(ev.testCommands).toEqual([
      { tool: 'workflow', scope: 'workflow:ci.yml:test', args: ['-q', 'tests', '--deselect', 'tests/test_net.py'], source: at('.github/workflows/ci.yml', 23) },
    ]);
    expect(ev.vars.map((v) => `${v.name}=${v.value} ${v.scope} ${v.source.line}`)).toEqual([
      'FORCE_COLOR=1 workflow:ci.yml 4',
      'PYTHONDEVMODE=1 workflow:ci.yml:test 14',
    ]);
    expect(ev.pythonVersions.map((p) => `${p.version}:${p.source.line}`)).toEqual(['3.9:10', '3.10:10', '3.11:10', '3.13:12']);
  });

  it("reads the script a workflow step runs as the step's own lines (sqlmodel's scripts/test.sh)", () => {
    const ev = readEvidence(
      layout({
        '.github/workflows/test.yml': [
          'jobs:',
          '  test:',
          '    steps:',
          '      - run: uv pip install -r requirements-tests.txt',
          '      - name: Test', // 5
          '        run: bash scripts/test.sh',
          '      - run: ./scripts/absent.sh',
        ].join('\n'),
        'requirements-tests.txt': 'pytest >=7\n',
        'scripts/test.sh': ['#!/usr/bin/env bash', '', 'set -e', 'coverage run -m pytest tests', 'coverage combine', 'pip install dirty-equals'].join('\n'),
      }),
    );
    expect(ev.testCommands).toEqual([{ tool: 'workflow', scope: 'workflow:test.yml:test', args: ['tests'], source: at('scripts/test.sh', 4) }]);
    expect(requirements(ev).filter((r) => r.includes('workflow:'))).toEqual([
      'pytest >=7 test/workflow:test.yml:test requirements-tests.txt:1',
      'dirty-equals test/workflow:test.yml:test scripts/test.sh:6',
    ]);
  });

  it('reads a Pipfile', () => {
    const ev = readEvidence(
      layout({
        Pipfile: [
          '[packages]',
          'arrow = "*"',
          'pendulum = {version = ">=2", markers = "python_version < \'3.12\'"}',
          '[dev-packages]',
          'responses = "==0.23"',
          '[requires]',
          'python_version = "3.11"',
        ].join('\n'),
      }),
    );
    expect(requirements(ev)).toEqual(['arrow runtime Pipfile:2', "pendulum >=2 ; python_version < '3.12' runtime Pipfile:3", 'responses ==0.23 dev Pipfile:5']);
    expect(ev.pythonVersions).toEqual([{ version: '3.11', from: 'pipfile', source: at('Pipfile', 7) }]);
  });
});

describe('evidence: the pytest configuration', () => {
  it('lists every place pytest reads, in its order, with each option', () => {
    const ev = readEvidence(
      layout({
        'pytest.ini': '[pytest]\nminversion = 6.0\nrequired_plugins = pytest-timeout>=2\nfilterwarnings =\n    error\n    ignore::DeprecationWarning\n',
        'pyproject.toml':
          '[tool.pytest.ini_options]\ntestpaths = ["tests"]\naddopts = "-ra --strict-markers"\nmarkers = ["slow: slow tests"]\n\n[tool.pytest]\ntestpaths = ["src", "tests"]\nxfail_strict = true\n',
        'tox.ini': '[pytest]\naddopts = -p no:randomly\n',
        'setup.cfg': '[tool:pytest]\naddopts = --cov=pkg -n auto "-k not slow"\n',
      }),
    );
    expect(ev.pytest).toEqual([
      {
        source: at('pytest.ini', 1),
        format: 'ini',
        testpaths: [],
        addopts: [],
        required_plugins: ['pytest-timeout>=2'],
        markers: [],
        minversion: '6.0',
        filterwarnings: ['error', 'ignore::DeprecationWarning'],
        other: {},
      },
      {
        source: at('pyproject.toml', 6),
        format: 'toml',
        testpaths: ['src', 'tests'],
        addopts: [],
        required_plugins: [],
        markers: [],
        filterwarnings: [],
        other: { xfail_strict: 'true' },
      },
      {
        source: at('pyproject.toml', 1),
        format: 'ini',
        testpaths: ['tests'],
        addopts: ['-ra', '--strict-markers'],
        required_plugins: [],
        markers: ['slow: slow tests'],
        filterwarnings: [],
        other: {},
      },
      {
        source: at('tox.ini', 1),
        format: 'ini',
        testpaths: [],
        addopts: ['-p', 'no:randomly'],
        required_plugins: [],
        markers: [],
        filterwarnings: [],
        other: {},
      },
      {
        source: at('setup.cfg', 1),
        format: 'ini',
        testpaths: [],
        addopts: ['--cov=pkg', '-n', 'auto', '-k not slow'],
        required_plugins: [],
        markers: [],
        filterwarnings: [],
        other: {},
      },
    ]);
  });
});

describe('evidence: only text inside the checkout', () => {
  it('survives hostile nesting: a reader that cannot parse leaves a note and the others go on', () => {
    const ev = readEvidence(
      layout({
        'setup.py': `from setuptools import setup\nx = ${'f('.repeat(60000)}${')'.repeat(60000)}\nsetup(install_requires=["six"])\n`,
        'noxfile.py': `import nox\n${'session.install('.repeat(30000)}\n`,
        'pyproject.toml': `a = ${'['.repeat(100000)}${']'.repeat(100000)}\n`,
        'requirements.txt': 'idna\n',
      }),
    );
    expect(requirements(ev)).toEqual(['idna runtime/requirements:requirements.txt requirements.txt:1']);
    expect(ev.notes.map((n) => `${n.source.file} ${n.message.split(':')[0]}`)).toEqual(['pyproject.toml not read', 'setup.py not read', 'noxfile.py not read']);
  });

  it('does not follow a symlink out of the checkout, nor read FIFOs or huge files', () => {
    const outside = layout({ 'secret.txt': 'should-not-be-read==1\n' });
    const dir = layout({ 'requirements-test.txt': '-r ../escape.txt\n-r pipe.txt\npytest\n', 'requirements/big.txt': `${'x'.repeat(2 << 20)}\n` });
    symlinkSync(join(outside, 'secret.txt'), join(dir, 'requirements.txt'));
    execFileSync('mkfifo', [join(dir, 'pipe.txt')]);
    const ev = readEvidence(dir);
    expect(requirements(ev)).toEqual(['pytest test/requirements:requirements-test.txt requirements-test.txt:3']);
    expect(ev.files.map((f) => f.path)).toEqual(['requirements-test.txt']);
    expect(ev.notes.map((n) => n.message.split(':')[0])).toEqual(['../escape.txt', 'pipe.txt', 'requirements.txt', 'requirements/big.txt']);
    expect(ev.notes[0].message).toBe('../escape.txt: absent, or not a regular file inside the checkout');
  });
});
