/**
 * The Debian backend: evidence to an `env` of Debian packages, offline and deterministic.
 * A requirement's name (PEP 503) is looked up in dh-python's own PyPI-to-Debian map, then among
 * the dist-info/egg-info names the suite's packages install, then as python3-<name> (or what
 * Provides it); its bounds are checked against that package's upstream version. Each base
 * (3.9 bullseye, 3.11 bookworm, 3.13 trixie) is tried; the one that meets requires-python and
 * satisfies the most requirements is chosen (ties: a Python the project names, then 3.11, 3.13,
 * 3.9). A package whose version misses the bounds is still installed (the closest the suite has)
 * and reported. Which requirements are taken: runtime and test; dev where nothing says test; the
 * extras asked for (`-e .[tests]`, tox extras, hatch features, the project naming itself with
 * extras). Build-backend requirements are resolved apart, for the install step.
 */
import { hashOf } from '../../../core/hashing.js';
import { DEBIAN_SUITES, DEFAULT_PYTHON, type DebianSuite, PYTHON_VERSIONS, type PythonVersion, type UnitEnv } from '../../runtime/manifest.js';
import type { DeclaredRequirement, Evidence, Group, Source } from '../evidence/context.js';
import { configRequirements, type ExplainedArgs, type Outcome, pytestArgs, testVars } from '../plan/pytest_env.js';
import { linuxMarkerEnv } from '../requirements/markers.js';
import { normalizeName } from '../requirements/names.js';
import { formatSpecifiers, formatVersion, parseSpecifiers, parseVersion, satisfiesAll, type Version } from '../requirements/pep440.js';
import { markerHolds, type Requirement } from '../requirements/pep508.js';
import type { DebianIndex } from './suite_index.js';
import { debianUpstreamVersion } from './version.js';

/** Bump when these rules change: it is part of every resolution's key. */
const RULES = 1;

/** How a requirement found its package ("python3": the interpreter's standard library has it). */
export type Via = 'dh-python' | 'dist-info' | 'python3-name' | 'provides' | 'python3';

export interface Candidate {
  package: string;
  /** The Debian version. */
  version: string;
  /** The upstream version its bounds are checked against (the dist-info folder's, else the Debian version's upstream part). */
  upstream?: string;
  via: Via;
}

interface Asked {
  requirement: string;
  group: Group;
  scope?: string;
  source: Source;
  satisfied: boolean;
}

export interface ResolvedPackage extends Candidate {
  /** Every requirement that asked for it. */
  asked: Asked[];
}

export interface Unresolved {
  requirement: string;
  group: Group;
  scope?: string;
  source: Source;
  reason: 'missing' | 'unsatisfiable';
  detail: string;
}

export interface Skipped {
  requirement: string;
  source: Source;
  reason: string;
}

/** One base tried: what it would satisfy. */
export interface BaseScore {
  python: PythonVersion;
  suite: DebianSuite;
  /** The suite's python3 ("3.11.2"). */
  pythonVersion: string;
  requiresPython: boolean;
  /** Distinct requirement names whose bounds the suite meets, misses, or that it has no package for. */
  satisfied: number;
  unsatisfiable: number;
  missing: number;
  /** Build-backend requirements satisfied: a tie-breaker, the project is installed with them. */
  buildSatisfied: number;
  /** The project names this Python (classifiers, CI matrix, tox, nox, Pipfile). */
  named: boolean;
}

export interface Resolution {
  /** Hash of the evidence, the indexes' keys and these rules: equal keys, equal resolutions. */
  key: string;
  python: PythonVersion;
  suite: DebianSuite;
  env: UnitEnv;
  packages: ResolvedPackage[];
  unresolved: Unresolved[];
  /** The build backend's own requirements, resolved in the same suite. */
  build: { backend?: string; packages: ResolvedPackage[]; unresolved: Unresolved[] };
  skipped: Skipped[];
  /** Requirement groups taken, and the project's extras asked for. */
  groups: Group[];
  extras: string[];
  pytestArgs: ExplainedArgs[];
  varSources: Record<string, Source>;
  /** Every base tried, the chosen one first. */
  bases: BaseScore[];
}

/** Installers and runners: the image runs pytest itself, so a CI's `pip install tox` asks for nothing there. */
const TOOLING = new Set([
  'pip',
  'wheel',
  'build',
  'tox',
  'nox',
  'virtualenv',
  'uv',
  'twine',
  'pip-tools',
  'pipenv',
  'poetry',
  'hatch',
  'pdm',
  'pre-commit',
  'tox-gh-actions',
  'codecov',
  'coveralls',
]);

/** Backports of what every Python 3.9+ has in its standard library: the interpreter satisfies them. */
const STDLIB = new Set([
  'argparse',
  'asyncio',
  'contextvars',
  'dataclasses',
  'enum34',
  'futures',
  'ordereddict',
  'pathlib',
  'typing',
  'importlib',
  'statistics',
]);

const PREFERENCE: PythonVersion[] = [DEFAULT_PYTHON, ...[...PYTHON_VERSIONS].reverse().filter((p) => p !== DEFAULT_PYTHON)];

function upstreamOf(index: DebianIndex, key: string, pkg: string, debian: string): Version | undefined {
  const folder = index.distInfo.get(key)?.find(([p]) => p === pkg)?.[1];
  if (folder) {
    try {
      return parseVersion(folder);
    } catch {
      // a folder version that is no PEP 440 version: use the Debian one
    }
  }
  return debianUpstreamVersion(debian);
}

/** Among packages shipping a name: python3-* first, then the shortest name, then by name. */
function best(packages: string[]): string {
  return [...packages].sort(
    (a, b) => Number(!a.startsWith('python3-')) - Number(!b.startsWith('python3-')) || a.length - b.length || (a < b ? -1 : a > b ? 1 : 0),
  )[0];
}

/**
 * The suite's package for a normalised distribution name. dh-python's map comes first: it is what
 * Debian's own packages depend on, and it sometimes means another package than the one installing
 * the distribution (setuptools -> python3-pkg-resources, what a runtime import needs). A build
 * backend needs the distribution itself: `build` looks at dist-info names first.
 */
export function debianCandidate(index: DebianIndex, key: string, build = false): Candidate | undefined {
  const found = (pkg: string, via: Via): Candidate => {
    const version = index.packages.get(pkg)!;
    const upstream = upstreamOf(index, key, pkg, version);
    return { package: pkg, version, ...(upstream ? { upstream: formatVersion(upstream) } : {}), via };
  };
  const dh = index.dhPython.get(key);
  if (dh === 'python3' || STDLIB.has(key)) return found('python3', 'python3');
  const shipped = (index.distInfo.get(key) ?? []).map(([p]) => p).filter((p) => index.packages.has(p));
  if (build && shipped.length) return found(best(shipped), 'dist-info');
  if (dh && index.packages.has(dh)) return found(dh, 'dh-python');
  if (shipped.length) return found(best(shipped), 'dist-info');
  for (const name of [`python3-${key}`, `python3-${key.replace(/^python-/, '')}`]) {
    if (index.packages.has(name)) return found(name, 'python3-name');
    const providers = (index.provides.get(name) ?? []).filter((p) => index.packages.has(p));
    if (providers.length) return found(best(providers), 'provides');
  }
  return undefined;
}

/** The package that ships an import name (`yaml`, `google.protobuf`), for a `No module named` repair; python3-<name> first. */
export function packageForModule(index: DebianIndex, module: string): { package: string; candidates: string[] } | undefined {
  const parts = module.split('.');
  for (const name of parts.length > 1 ? [parts.slice(0, 2).join('.'), parts[0]] : [parts[0]]) {
    const packages = index.modules.get(name);
    if (!packages?.length) continue;
    const exact = `python3-${normalizeName(name.replace(/^_+/, ''))}`;
    const rank = (p: string) => (p === exact ? 0 : p.startsWith('python3-') ? 1 : /^(lib)?python3\.\d+/.test(p) || p.startsWith('libpython') ? 3 : 2);
    const candidates = [...packages].sort((a, b) => rank(a) - rank(b) || (a < b ? -1 : a > b ? 1 : 0));
    return { package: candidates[0], candidates };
  }
  return undefined;
}

interface Selection {
  taken: DeclaredRequirement[];
  build: DeclaredRequirement[];
  constraints: DeclaredRequirement[];
  skipped: Skipped[];
  groups: Group[];
  extras: string[];
}

const text = (r: Requirement) =>
  `${r.name}${r.extras.length ? `[${r.extras.join(',')}]` : ''}${formatSpecifiers(r.specifiers)}${r.markerText ? ` ; ${r.markerText}` : ''}`;

function select(ev: Evidence): Selection {
  const all = [...ev.requirements, ...configRequirements(ev)];
  // A test job's bare `pip install .` names no test requirements: only one with extras or groups does.
  const hasTest =
    all.some((r) => r.group === 'test' && !r.constraint && r.scope?.startsWith('pytest:') !== true) ||
    ev.selfInstalls.some((s) => s.group === 'test' && (s.extras.length > 0 || !!s.groups?.length));
  const groups: Group[] = hasTest ? ['runtime', 'test'] : ['runtime', 'test', 'dev'];
  const self = ev.project.name ? normalizeName(ev.project.name) : undefined;
  const installs = ev.selfInstalls.filter((s) => groups.includes(s.group));
  const extras = new Set(installs.flatMap((s) => s.extras));
  // PEP 735 groups the test tooling installs (`pip install --group dev`, `uv sync`): whatever they are called.
  const dependencyGroups = new Set(installs.flatMap((s) => (s.groups ?? []).map(normalizeName)));
  const inGroup = (scope: string | undefined) =>
    scope?.startsWith('group:') === true && (dependencyGroups.has('*') || dependencyGroups.has(scope.slice('group:'.length)));
  const wanted = (r: DeclaredRequirement) =>
    groups.includes(r.group) || (r.scope?.startsWith('extra:') === true && (extras.has('*') || extras.has(r.scope.slice('extra:'.length)))) || inGroup(r.scope);
  // The project naming itself with extras (attrs' "tests" extra lists "attrs[tests-no-zope]") asks for those extras: to a fixed point.
  for (let grew = true; grew; ) {
    grew = false;
    for (const r of all) {
      if (r.requirement.key !== self || !wanted(r)) continue;
      for (const e of r.requirement.extras) {
        if (extras.has(e)) continue;
        extras.add(e);
        grew = true;
      }
    }
  }
  const skipped: Skipped[] = [];
  const taken = all.filter((r) => {
    if (r.constraint || r.group === 'build' || !wanted(r)) return false;
    // Tooling is kept only where the project's own metadata needs it at run time (tox's own dependency on virtualenv).
    const metadata = r.group === 'runtime' && r.scope === undefined;
    const why =
      r.requirement.key === self
        ? 'the project itself'
        : TOOLING.has(r.requirement.key) && !metadata
          ? 'an installer or test runner, not needed in the image'
          : undefined;
    if (why) skipped.push({ requirement: text(r.requirement), source: r.source, reason: why });
    return !why;
  });
  return {
    taken,
    build: all.filter((r) => r.group === 'build' && r.requirement.key !== self),
    constraints: all.filter((r) => r.constraint),
    skipped,
    groups,
    extras: [...extras].sort(),
  };
}

interface Resolved {
  packages: ResolvedPackage[];
  unresolved: Unresolved[];
  skipped: Skipped[];
  /** Per distinct requirement name: its bounds met (every time it was asked), a package of another version, or none. */
  outcomes: Map<string, Outcome>;
}

/** Each requirement that holds on this suite's Python, to its package; constraints bound the same packages. */
function resolveIn(index: DebianIndex, requirements: DeclaredRequirement[], constraints: DeclaredRequirement[], build = false): Resolved {
  const env = linuxMarkerEnv(index.python);
  const packages = new Map<string, ResolvedPackage>();
  const unresolved: Unresolved[] = [];
  const skipped: Skipped[] = [];
  const outcomes = new Map<string, Outcome>();
  // A constraints file bounds what was installed beside it: the same requirements file chain, tox env or CI job.
  const bounds = (r: DeclaredRequirement) =>
    constraints
      .filter((c) => c.requirement.key === r.requirement.key && c.scope === r.scope && markerHolds(c.requirement, env))
      .flatMap((c) => c.requirement.specifiers);
  for (const r of requirements) {
    const req = r.requirement;
    if (!markerHolds(req, env)) {
      skipped.push({ requirement: text(req), source: r.source, reason: `its marker is false on Python ${index.python}` });
      continue;
    }
    const where = { group: r.group, ...(r.scope ? { scope: r.scope } : {}), source: r.source };
    const candidate = debianCandidate(index, req.key, build);
    if (!candidate) {
      unresolved.push({ requirement: text(req), ...where, reason: 'missing', detail: `no Debian ${index.suite} package ships ${req.name}` });
      outcomes.set(req.key, 'missing');
      continue;
    }
    const specs = [...req.specifiers, ...bounds(r)];
    const satisfied = !candidate.upstream || satisfiesAll(candidate.upstream, specs);
    if (!satisfied) {
      unresolved.push({
        requirement: text(req),
        ...where,
        reason: 'unsatisfiable',
        detail: `Debian ${index.suite} has ${candidate.package} ${candidate.version} (${candidate.upstream}), outside ${formatSpecifiers(specs)}`,
      });
    }
    if (outcomes.get(req.key) !== 'installed') outcomes.set(req.key, satisfied ? 'satisfied' : 'installed');
    const pkg = packages.get(candidate.package) ?? { ...candidate, asked: [] };
    pkg.asked.push({ requirement: text(req), ...where, satisfied });
    packages.set(candidate.package, pkg);
  }
  return {
    packages: [...packages.values()].sort((a, b) => (a.package < b.package ? -1 : 1)),
    unresolved,
    skipped,
    outcomes,
  };
}

/** Distinct requirement names with this outcome: a name asked for in five places counts once. */
const count = (resolved: Resolved, outcome: Outcome) => [...resolved.outcomes.values()].filter((o) => o === outcome).length;

function score(index: DebianIndex, python: PythonVersion, ev: Evidence, resolved: Resolved, build: Resolved): BaseScore {
  let requiresPython = true;
  for (const r of ev.requiresPython) {
    // "3.7" alone (seen in the wild) means ==3.7.
    const specifier = r.specifier
      .split(',')
      .map((s) => s.trim())
      .map((s) => (/^\d/.test(s) ? `==${s}` : s))
      .join(',');
    try {
      requiresPython &&= satisfiesAll(index.python, parseSpecifiers(specifier));
    } catch {
      // an unreadable requires-python bounds nothing
    }
  }
  return {
    python,
    suite: index.suite,
    pythonVersion: index.python,
    requiresPython,
    satisfied: count(resolved, 'satisfied'),
    unsatisfiable: count(resolved, 'installed'),
    missing: count(resolved, 'missing'),
    buildSatisfied: count(build, 'satisfied'),
    named: ev.pythonVersions.some((p) => p.version === python),
  };
}

function better(a: BaseScore, b: BaseScore): number {
  return (
    Number(b.requiresPython) - Number(a.requiresPython) ||
    b.satisfied - a.satisfied ||
    b.buildSatisfied - a.buildSatisfied ||
    Number(b.named) - Number(a.named) ||
    PREFERENCE.indexOf(a.python) - PREFERENCE.indexOf(b.python)
  );
}

export function resolutionKey(ev: Evidence, indexes: DebianIndex[]): string {
  return hashOf({ rules: RULES, evidence: ev, indexes: indexes.map((i) => [i.suite, i.hash]).sort() });
}

/** The environment for `ev` on the best of the suites given (each a base's). */
export function resolveDebian(ev: Evidence, indexes: DebianIndex[]): Resolution {
  if (!indexes.length) throw new Error('resolveDebian needs at least one suite index');
  const selection = select(ev);
  const pythonOf = (suite: DebianSuite) => PYTHON_VERSIONS.find((p) => DEBIAN_SUITES[p] === suite)!;
  const tried = indexes.map((index) => {
    const resolved = resolveIn(index, selection.taken, selection.constraints);
    const build = resolveIn(index, selection.build, selection.constraints, true);
    return { index, resolved, build, score: score(index, pythonOf(index.suite), ev, resolved, build) };
  });
  tried.sort((a, b) => better(a.score, b.score));
  const [{ index, resolved, build }] = tried;
  const pytestVersion = index.packages.has('python3-pytest') ? debianUpstreamVersion(index.packages.get('python3-pytest')!) : undefined;
  const args = pytestArgs(ev, (r) => resolved.outcomes.get(r.key) ?? 'missing', pytestVersion);
  const { vars, sources } = testVars(ev);
  return {
    key: resolutionKey(ev, indexes),
    python: tried[0].score.python,
    suite: index.suite,
    env: {
      apt: [...new Set(resolved.packages.filter((p) => p.via !== 'python3').map((p) => p.package))].sort(),
      pip: [],
      setup: [],
      vars,
      pytest_args: args.flatMap((a) => a.args),
    },
    packages: resolved.packages,
    unresolved: resolved.unresolved,
    build: { ...(ev.project.buildBackend ? { backend: ev.project.buildBackend } : {}), packages: build.packages, unresolved: build.unresolved },
    skipped: [...selection.skipped, ...resolved.skipped],
    groups: selection.groups,
    extras: selection.extras,
    pytestArgs: args,
    varSources: sources,
    bases: tried.map((t) => t.score),
  };
}
