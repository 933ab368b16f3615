/**
 * The repair loop's two halves, on text alone: what stopped a collect-only pytest run in a built
 * image (its console output), and how the environment changes for the next try. A module the
 * tests import but no file declared becomes the Debian package that ships it; a marker, option,
 * ini key or required plugin pytest does not know becomes the plugin's package; code the image's
 * Python cannot run (a syntax error, a name the standard library lacks, pytest too old) moves the
 * unit to the newest base. The suite is never edited: the environment is. Each change says why.
 */
import { DEBIAN_SUITES, type PythonVersion, type UnitEnv } from '../runtime/manifest.js';
import type { DebianIndex } from './debian_index.js';
import { normalizeName } from './names.js';
import { debianCandidate, packageForModule } from './resolve_debian.js';

export type Problem =
  | { kind: 'module'; module: string; line: string }
  | { kind: 'plugin'; plugin: string; line: string }
  | { kind: 'python'; line: string }
  /** Collection stopped at a module nothing else here repairs: the rest of the suite can still run. */
  | { kind: 'collection'; line: string }
  | { kind: 'other'; line: string };

/** Markers, options and ini keys that belong to a plugin: what its absence looks like. */
const PLUGIN_OF: [RegExp, string][] = [
  [/^(--cov\b.*|no_cover)$/, 'pytest-cov'],
  [/^(-n|--numprocesses|--dist|--maxprocesses)$/, 'pytest-xdist'],
  [/^(--timeout.*|timeout|timeout_method|timeout_func_only)$/, 'pytest-timeout'],
  [/^(--asyncio-mode.*|asyncio|asyncio_mode|asyncio_default_fixture_loop_scope)$/, 'pytest-asyncio'],
  [/^(--benchmark-.*|benchmark)$/, 'pytest-benchmark'],
  [/^(--reruns.*|flaky|reruns)$/, 'pytest-rerunfailures'],
  [/^(trio|trio_mode)$/, 'pytest-trio'],
  [/^(anyio)$/, 'anyio'],
  [/^(--randomly-.*|-p randomly)$/, 'pytest-randomly'],
  [/^(--mypy.*|mypy)$/, 'pytest-mypy'],
  [/^(django_db|DJANGO_SETTINGS_MODULE|--ds)$/, 'pytest-django'],
  [/^(--doctest-plus|doctest_plus|doctest_optionflags_plus)$/, 'pytest-doctestplus'],
  [/^(env)$/, 'pytest-env'],
  [/^(freeze_time)$/, 'pytest-freezer'],
  [/^(mock|mocker)$/, 'pytest-mock'],
  [/^(--hypothesis-.*|hypothesis)$/, 'hypothesis'],
  [/^(httpserver)$/, 'pytest-httpserver'],
  [/^(lazy_fixture)$/, 'pytest-lazy-fixtures'],
  [/^(subtests)$/, 'pytest-subtests'],
];

/** A name pytest did not know, as the plugin that would define it (null when none is known). */
export function pluginFor(name: string): string | null {
  return PLUGIN_OF.find(([pattern]) => pattern.test(name))?.[1] ?? null;
}

/** A problem for a name pytest did not know: its plugin's, or one nothing repairs. */
const unknownName = (name: string, line: string): [string, Problem] => {
  const plugin = pluginFor(name);
  return plugin ? [`plugin:${plugin}`, { kind: 'plugin', plugin, line }] : [`other:${name}`, { kind: 'other', line }];
};

/** Each line pytest prints for a problem, and the problems it names (keyed, so each counts once). */
const RULES: [RegExp, (m: RegExpExecArray, line: string) => [string, Problem][]][] = [
  [/ModuleNotFoundError: No module named '([\w.]+)'/, (m, line) => [[`module:${m[1]}`, { kind: 'module', module: m[1], line }]]],
  [
    /unrecognized arguments: (.+)$/,
    (m, line) =>
      m[1]
        .split(/\s+/)
        .filter((w) => w.startsWith('-'))
        .map((w) => unknownName(w.split('=')[0], line)),
  ],
  [/'([\w-]+)' not found in `markers` configuration option/, (m, line) => [unknownName(m[1], line)]],
  [/Unknown pytest\.mark\.([\w-]+)/, (m, line) => [unknownName(m[1], line)]],
  [/Unknown config option: ([\w-]+)/, (m, line) => [unknownName(m[1], line)]],
  [
    /Missing required plugins: (.+)$/,
    (m, line) => m[1].split(/,\s*/).map((p) => [`plugin:${p}`, { kind: 'plugin', plugin: p.split(/[<>=!~ ]/)[0], line }] as [string, Problem]),
  ],
  [/Interrupted: \d+ errors? during collection/, (_m, line) => [['collection', { kind: 'collection', line }]]],
  [
    /requires pytest-[\d.]+, actual pytest-|^SyntaxError: |ImportError: cannot import name '\w+' from '(typing|collections|asyncio|enum|functools|itertools|os|sys)'/,
    (_m, line) => [['python', { kind: 'python', line }]],
  ],
];

/** What stopped a collect-only run, from its output: every problem once, in order. */
export function diagnose(output: string): Problem[] {
  const found = new Map<string, Problem>();
  for (const raw of output.split('\n')) {
    const line = raw.replace(/^(E|INTERNALERROR>)\s+/, '').trim();
    for (const [pattern, problems] of RULES) {
      const m = pattern.exec(line);
      if (!m) continue;
      for (const [key, p] of problems(m, line)) if (!found.has(key)) found.set(key, p);
      break;
    }
  }
  return [...found.values()];
}

const CONTINUE = '--continue-on-collection-errors';

export interface Repair {
  env: UnitEnv;
  python: PythonVersion;
  /** What changed and why, one line each. */
  changes: string[];
}

/**
 * The next environment for `problems`, or null when nothing more can be done. `index` is the
 * current base's suite; `canMovePython`: the manifest line names no Python of its own.
 */
export function repair(env: UnitEnv, python: PythonVersion, problems: Problem[], index: DebianIndex, canMovePython: boolean): Repair | null {
  const apt = new Set(env.apt);
  const changes: string[] = [];
  for (const p of problems) {
    if (p.kind === 'module') {
      const pkg = packageForModule(index, p.module)?.package;
      if (pkg && pkg !== 'python3' && !apt.has(pkg)) {
        apt.add(pkg);
        changes.push(`+${pkg}: ${p.line}`);
      }
    } else if (p.kind === 'plugin') {
      const pkg = debianCandidate(index, normalizeName(p.plugin))?.package;
      if (pkg && pkg !== 'python3' && !apt.has(pkg)) {
        apt.add(pkg);
        changes.push(`+${pkg} (${p.plugin}): ${p.line}`);
      }
    }
  }
  const newest = (Object.keys(DEBIAN_SUITES) as PythonVersion[]).at(-1)!;
  const pythonProblem = problems.find((p) => p.kind === 'python');
  if (!changes.length && pythonProblem && canMovePython && python !== newest) {
    return { env, python: newest, changes: [`python ${python} -> ${newest} (${DEBIAN_SUITES[newest]}): ${pythonProblem.line}`] };
  }
  // Last: a module that does not collect (a data file, a package Debian lacks, the suite's own
  // warnings turned errors) costs its own tests, not the whole suite's.
  const collection = problems.find((p) => p.kind === 'collection');
  if (!changes.length && collection && !env.pytest_args.includes(CONTINUE)) {
    return { env: { ...env, pytest_args: [...env.pytest_args, CONTINUE] }, python, changes: [`${CONTINUE}: ${collection.line}`] };
  }
  return changes.length ? { env: { ...env, apt: [...apt].sort() }, python, changes } : null;
}
