/**
 * The repair loop's two halves, on text alone: what stopped a collect-only pytest run in a built
 * image (its console output), and how the environment changes for the next try. A module the
 * tests import but no file declared becomes the Debian package that ships it; a marker, option,
 * ini key or required plugin pytest does not know becomes the plugin's package; code the image's
 * Python cannot run (a syntax error, a name the standard library lacks, pytest too old) moves the
 * unit to the newest base; a file an installed package writes beside itself at import is linked to
 * the container's scratch space. The suite is never edited: the environment is. Each change says why.
 */
import { DEBIAN_SUITES, type PythonVersion, type UnitEnv } from '../../runtime/manifest.js';
import { pluginFor } from '../../runtime/pytest_options.js';
import { debianCandidate, packageForModule } from '../debian/resolve.js';
import type { DebianIndex } from '../debian/suite_index.js';
import { normalizeName } from '../requirements/names.js';

export type Problem =
  | { kind: 'module'; module: string; line: string }
  | { kind: 'plugin'; plugin: string; line: string }
  | { kind: 'python'; line: string }
  /** An installed package writes a file in its own folder (nnsight's log at import): the runs' root file system is read-only. */
  | { kind: 'writable'; path: string; line: string }
  /** Collection stopped at a module nothing else here repairs: the rest of the suite can still run. */
  | { kind: 'collection'; line: string }
  | { kind: 'other'; line: string };

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
    (m, line) =>
      m[1]
        .split(/,\s*/)
        .map((spec) => spec.split(/[<>=!~ ]/)[0])
        .map((plugin) => [`plugin:${plugin}`, { kind: 'plugin', plugin, line }] as [string, Problem]),
  ],
  [
    // As the runs' user the build sees Errno 13 (the folder is root's); the runs see Errno 30.
    /(?:PermissionError: \[Errno 13\] Permission denied|OSError: \[Errno 30\] Read-only file system): '(\/usr\/(?:local\/)?lib\/python3[\d.]*\/(?:site|dist)-packages\/[\w.+/-]+)'/,
    (m, line) => (m[1].split('/').includes('..') ? [] : [[`writable:${m[1]}`, { kind: 'writable', path: m[1], line }]]),
  ],
  [/Interrupted: \d+ errors? during collection/, (_m, line) => [['collection', { kind: 'collection', line }]]],
  [
    /requires pytest-[\d.]+, actual pytest-|Not a homogeneous array|^SyntaxError: |ImportError: cannot import name '\w+' from '(typing|collections|asyncio|enum|functools|itertools|os|sys)'/,
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

/** The missing modules no package of the suite ships: the Python index's to find (index.ts), when the unit has one. */
export function modulesDebianLacks(problems: Problem[], index: DebianIndex): Extract<Problem, { kind: 'module' }>[] {
  return problems.filter((p): p is Extract<Problem, { kind: 'module' }> => p.kind === 'module' && !packageForModule(index, p.module));
}

const CONTINUE = '--continue-on-collection-errors';

/**
 * The setup step that makes an installed package's file writable in every run: a link from its
 * path to one in /tmp, each container's own scratch (the path's characters are diagnose's, no shell's).
 */
export const scratchLink = (path: string) => `ln -sfn /tmp/${path.slice(1).replace(/\//g, '_')} ${path}`;

export interface Repair {
  env: UnitEnv;
  python: PythonVersion;
  /** What changed and why, one line each. */
  changes: string[];
}

/** What a repair may use: the current base's suite and the newest's, and whether the line leaves its Python to us. */
export interface RepairContext {
  index: DebianIndex;
  newest: DebianIndex;
  /** The manifest line names no Python of its own. */
  canMovePython: boolean;
  /** The collect-only run ended before it collected anything (pytest's internal or usage error, a crash at start-up). */
  stoppedAtStart: boolean;
}

/** Whether a collect-only run's output shows it got as far as collecting. */
export function reachedCollection(output: string): boolean {
  return /\b\d+ tests? collected|no tests collected|collected \d+ items?/.test(output);
}

const NEWEST = (Object.keys(DEBIAN_SUITES) as PythonVersion[]).at(-1)!;

/**
 * The next environment for `problems` by the rules, or null when they know nothing more. In
 * order: packages for what is missing; else the newest base, when the code needs a newer Python, a
 * plugin that is installed is too old for the configuration, or pytest could not even start on
 * this one (an old pytest's TOML reader, say).
 */
export function repair(env: UnitEnv, python: PythonVersion, problems: Problem[], ctx: RepairContext): Repair | null {
  const apt = new Set(env.apt);
  const changes: string[] = [];
  let tooOld: string | null = null;
  for (const p of problems) {
    if (p.kind !== 'module' && p.kind !== 'plugin') continue;
    const pkg = p.kind === 'module' ? packageForModule(ctx.index, p.module)?.package : debianCandidate(ctx.index, normalizeName(p.plugin))?.package;
    if (!pkg || pkg === 'python3') continue;
    if (apt.has(pkg)) tooOld ??= p.line;
    else {
      apt.add(pkg);
      changes.push(`+${pkg}${p.kind === 'plugin' ? ` (${p.plugin})` : ''}: ${p.line}`);
    }
  }
  const setup = [...env.setup];
  for (const p of problems) {
    if (p.kind !== 'writable' || setup.includes(scratchLink(p.path))) continue;
    setup.push(scratchLink(p.path));
    changes.push(`${scratchLink(p.path)}: ${p.line}`);
  }
  if (changes.length) return { env: { ...env, apt: [...apt].sort(), setup }, python, changes };
  const why = problems.find((p) => p.kind === 'python')?.line ?? tooOld ?? (ctx.stoppedAtStart ? (problems[0]?.line ?? 'pytest did not start') : null);
  if (why && ctx.canMovePython && python !== NEWEST) {
    // The packages the newest suite does not have are left out, and said so.
    const kept = env.apt.filter((p) => ctx.newest.packages.has(p));
    const dropped = env.apt.filter((p) => !ctx.newest.packages.has(p));
    return {
      env: { ...env, apt: kept },
      python: NEWEST,
      changes: [
        `python ${python} -> ${NEWEST} (${DEBIAN_SUITES[NEWEST]}): ${why}`,
        ...(dropped.length ? [`-${dropped.join(' -')}: not in ${DEBIAN_SUITES[NEWEST]}`] : []),
      ],
    };
  }
  return null;
}

/**
 * The last resort, once nothing else (rules, the environment agent) changes anything: a module that
 * does not collect (a data file, a package Debian lacks, the suite's own warnings turned errors)
 * costs its own tests, not the whole suite's.
 */
export function lastResort(env: UnitEnv, python: PythonVersion, problems: Problem[]): Repair | null {
  const collection = problems.find((p) => p.kind === 'collection');
  if (!collection || env.pytest_args.includes(CONTINUE)) return null;
  return { env: { ...env, pytest_args: [...env.pytest_args, CONTINUE] }, python, changes: [`${CONTINUE}: ${collection.line}`] };
}
