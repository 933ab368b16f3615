/**
 * What the evidence readers fill in, and the one way they read a checkout: text files only,
 * through `Checkout.read`, which refuses anything outside the checkout (a `..` path, a symlink
 * out of it), anything but a regular file (a FIFO would hang the reader) and anything over
 * MAX_BYTES. Nothing here runs repository code.
 */
import { lstatSync, readdirSync, readFileSync, realpathSync, statSync } from 'node:fs';
import { join, posix, sep } from 'node:path';
import { sha256 } from '../../../core/hashing.js';
import { installTarget, type RequirementsEntry, readRequirementsFile, type Source } from '../requirements/file.js';
import type { Requirement } from '../requirements/pep508.js';

export type { Source } from '../requirements/file.js';

/** What a requirement is for. The resolver takes runtime and test; dev only where nothing says test. */
export type Group = 'runtime' | 'test' | 'dev' | 'docs' | 'lint' | 'build' | 'extra';

export interface DeclaredRequirement {
  requirement: Requirement;
  group: Group;
  /** What it was declared under: the extra, dependency group, tox or hatch env, nox session, poetry group or workflow job. */
  scope?: string;
  source: Source;
  /** From a constraints file: it bounds versions and asks for nothing. */
  constraint?: true;
}

/** The project itself installed, with the extras asked for (`-e .`, `.[test]`, tox `extras = test`, hatch `features`). */
export interface SelfInstall {
  extras: string[];
  /** PEP 735 dependency groups installed with it (`pip install --group dev`, `uv sync`, `uv run`): `*` for every group. */
  groups?: string[];
  /** `-e`: installed in place, as the pipeline installs it too. */
  editable?: true;
  group: Group;
  source: Source;
}

export interface PytestConfig {
  /** The section's header (or the file, for a pytest.ini without one). */
  source: Source;
  /** `ini`: pytest.ini, tox.ini, setup.cfg and [tool.pytest.ini_options]; `toml`: pytest 9's native [tool.pytest] table, which older pytest ignores. */
  format: 'ini' | 'toml';
  testpaths: string[];
  /** Split as a shell would. */
  addopts: string[];
  required_plugins: string[];
  markers: string[];
  minversion?: string;
  filterwarnings: string[];
  /** Every other key, as written. */
  other: Record<string, string | string[]>;
}

/** A pytest invocation a project's own tooling runs: the arguments after `pytest`. */
export interface TestCommand {
  tool: 'tox' | 'nox' | 'workflow' | 'hatch';
  scope?: string;
  args: string[];
  source: Source;
}

export interface Evidence {
  /** Every file read, with the SHA256 of its text: what this evidence is a function of. */
  files: { path: string; sha256: string }[];
  project: {
    name?: string;
    buildBackend?: string;
    /** Where the version comes from: written (`static`), or computed at build time from git (`scm` names the tool). */
    version: { static?: string; scm?: string; files: { path: string; source: Source }[] };
    /** Where the project says it compiles an extension of its own (C, C++, Cython): its build then needs a compiler. */
    compiled?: Source;
    /** Build programs the project's setup.py runs itself (`subprocess.check_call(["cmake", ...])`), where it runs each first. */
    programs?: { name: string; source: Source }[];
  };
  requirements: DeclaredRequirement[];
  selfInstalls: SelfInstall[];
  requiresPython: { specifier: string; source: Source }[];
  /** Python versions a project names: classifiers, CI matrices, tox envs, nox sessions, Pipfile. */
  pythonVersions: { version: string; from: 'classifier' | 'ci' | 'tox' | 'nox' | 'pipfile'; source: Source }[];
  /** In pytest's order of precedence: the first is the one pytest reads. */
  pytest: PytestConfig[];
  testCommands: TestCommand[];
  /** Environment variables the project's test tooling sets (tox setenv, workflow env, hatch env-vars). */
  vars: { name: string; value: string; scope?: string; source: Source }[];
  /** pip options and unnamed paths or URLs seen in install lines: recorded, not obeyed. */
  options: { option: string; value?: string; source: Source }[];
  /** What was seen and not understood (a dynamic setup.py value, a TOML syntax error). */
  notes: { source: Source; message: string }[];
}

/** Files larger than this are not evidence (a vendored lock file, a generated blob). */
const MAX_BYTES = 1 << 20;

export class Checkout {
  private readonly realRoot: string;
  /** Path -> SHA256 of every file read. */
  readonly files = new Map<string, string>();
  private readonly texts = new Map<string, string | undefined>();

  constructor(readonly root: string) {
    this.realRoot = realpathSync(root);
  }

  /** The real path of `rel` when it is inside the checkout, else undefined. */
  private inside(rel: string): string | undefined {
    const normalized = posix.normalize(rel);
    if (posix.isAbsolute(normalized) || normalized === '..' || normalized.startsWith('../')) return undefined;
    try {
      lstatSync(join(this.root, normalized));
      const real = realpathSync(join(this.root, normalized));
      return real === this.realRoot || real.startsWith(this.realRoot + sep) ? real : undefined;
    } catch {
      return undefined;
    }
  }

  /** A text file's content (recorded with its hash), or undefined when absent or not readable as evidence. */
  read(rel: string): string | undefined {
    const path = posix.normalize(rel);
    if (!this.texts.has(path)) this.texts.set(path, this.readOnce(path));
    return this.texts.get(path);
  }

  private readOnce(path: string): string | undefined {
    const real = this.inside(path);
    if (!real) return undefined;
    const st = statSync(real);
    if (!st.isFile() || st.size > MAX_BYTES) return undefined;
    const text = readFileSync(real, 'utf8');
    this.files.set(path, sha256(text));
    return text;
  }

  /** Names of the regular files in a folder of the checkout, sorted ([] when absent). */
  list(relDir: string): string[] {
    const real = this.inside(relDir);
    if (!real || !statSync(real).isDirectory()) return [];
    return readdirSync(real, { withFileTypes: true })
      .filter((e) => e.isFile() || e.isSymbolicLink())
      .map((e) => e.name)
      .sort();
  }
}

/** The evidence being gathered, with the checkout it is read from. */
export class EvidenceContext {
  readonly evidence: Evidence = {
    files: [],
    project: { version: { files: [] } },
    requirements: [],
    selfInstalls: [],
    requiresPython: [],
    pythonVersions: [],
    pytest: [],
    testCommands: [],
    vars: [],
    options: [],
    notes: [],
  };

  constructor(readonly checkout: Checkout) {}

  note(source: Source, message: string): void {
    this.evidence.notes.push({ source, message });
  }

  /** Entries of a requirements file or install line, as `group` under `scope`. */
  addEntries(entries: RequirementsEntry[], group: Group, scope?: string): void {
    for (const e of entries) {
      if (e.kind === 'requirement')
        this.evidence.requirements.push({
          requirement: e.requirement,
          group,
          ...(scope ? { scope } : {}),
          source: e.source,
          ...(e.constraint ? { constraint: true } : {}),
        });
      else if (e.kind === 'self') {
        this.evidence.selfInstalls.push({
          extras: e.extras,
          ...(e.groups?.length ? { groups: e.groups } : {}),
          ...(e.editable ? { editable: true as const } : {}),
          group,
          source: e.source,
        });
      } else if (e.kind === 'option') this.evidence.options.push({ option: e.option, ...(e.value ? { value: e.value } : {}), source: e.source });
      else this.note(e.source, e.message);
    }
  }

  /** One requirement string of a list (pyproject, setup.cfg, a setup.py literal, a tox deps line). */
  addRequirement(text: string, source: Source, group: Group, scope?: string): void {
    this.addEntries([installTarget(text.trim(), source)], group, scope);
  }

  /** A requirements file of the checkout and what it includes. */
  addRequirementsFile(path: string, group: Group, scope?: string): void {
    this.addEntries(
      readRequirementsFile(path, (f) => this.checkout.read(f)),
      group,
      scope,
    );
  }
}

/** An extra's, a dependency group's, a tox env's, a nox session's or a CI job's name read as a group. First match wins: "test-docs" is test. */
const GROUP_WORDS: [Group, Set<string>][] = [
  ['test', new Set(['test', 'tests', 'testing', 'pytest', 'unittest', 'unit', 'ci', 'coverage', 'cov'])],
  ['docs', new Set(['doc', 'docs', 'documentation', 'sphinx', 'mkdocs'])],
  [
    'lint',
    new Set([
      'lint',
      'linting',
      'linters',
      'typing',
      'types',
      'type',
      'typecheck',
      'mypy',
      'pyright',
      'style',
      'flake8',
      'ruff',
      'black',
      'pylint',
      'format',
      'fmt',
      'commit',
      'precommit',
      'quality',
      'static',
      'pep8',
    ]),
  ],
  ['dev', new Set(['dev', 'develop', 'development', 'devel', 'contributing', 'tox', 'nox', 'release', 'publish', 'packaging'])],
];

export function groupOfName(name: string, otherwise: Group = 'extra'): Group {
  const words = name.toLowerCase().split(/[^a-z0-9]+/);
  for (const [group, set] of GROUP_WORDS) if (words.some((w) => set.has(w))) return group;
  return otherwise;
}
