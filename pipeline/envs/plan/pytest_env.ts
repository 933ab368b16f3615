/**
 * How a resolved environment runs pytest, from the project's own configuration and tooling:
 *  - what the configuration itself requires (required_plugins, minversion, plugins its addopts use);
 *  - pytest arguments: addopts without the options of plugins we take out or could not install,
 *    required_plugins and minversion the suite cannot meet overridden, pytest 9's native
 *    [tool.pytest] table passed as `-o` to an older pytest (which ignores it), and where the
 *    configuration names no testpaths, the paths and selection the project's tox / CI / nox / hatch
 *    run pytest with;
 *  - environment variables the project's test tooling sets.
 * Each argument comes with why and from where, for the person who reviews the environment.
 */
import { shQuote } from '../../../core/shell.js';
import { pytestOption, takesNext } from '../../runtime/pytest_options.js';
import type { DeclaredRequirement, Evidence, PytestConfig, Source } from '../evidence/context.js';
import { compareVersions, formatVersion, parseVersion, type Version } from '../requirements/pep440.js';
import { parseRequirement, type Requirement } from '../requirements/pep508.js';
import { type AddoptsItem, readAddopts } from './addopts.js';

export interface ExplainedArgs {
  args: string[];
  why: string;
  source: Source;
}

/** What the suite gives a requirement: its bounds met, a package of another version, or nothing. */
export type Outcome = 'satisfied' | 'installed' | 'missing';

const scopeOf = (config: PytestConfig) => `pytest:${config.source.file}`;

function declared(text: string, config: PytestConfig): DeclaredRequirement[] {
  try {
    return [{ requirement: parseRequirement(text), group: 'test', scope: scopeOf(config), source: config.source }];
  } catch {
    return [];
  }
}

/** Requirements the configuration pytest reads makes by itself. */
export function configRequirements(ev: Evidence): DeclaredRequirement[] {
  const config = ev.pytest[0];
  if (!config) return [];
  const plugins = [...new Set(readAddopts(config.addopts).flatMap((i) => (i.action === 'install' && i.plugin ? [i.plugin] : [])))];
  return [
    ...config.required_plugins.flatMap((r) => declared(r, config)),
    ...(config.minversion ? declared(`pytest>=${config.minversion}`, config) : []),
    ...plugins.flatMap((p) => declared(p, config)),
  ];
}

const WHY_STRIPPED: Record<string, string> = {
  'pytest-cov': 'coverage traces the run itself',
  'pytest-xdist': 'xdist runs tests in worker processes',
  'pytest-randomly': 'randomly reorders tests with a new seed each run',
  'pytest-random-order': 'random-order reorders tests each run',
  'pytest-html': 'a report file nobody reads',
  'pytest-sugar': 'terminal output only',
  'pytest-instafail': 'terminal output only',
};

function describeDropped(items: AddoptsItem[]): string {
  return items
    .map(
      (i) =>
        `${i.words.join(' ')} (${i.action === 'strip' ? (WHY_STRIPPED[i.plugin ?? ''] ?? 'adds lint items that are no tests') : `${i.plugin}: no package in this suite`})`,
    )
    .join(', ');
}

/** An INI value of `key` as `-o` writes it: lists as pytest's ini types read them back. */
function iniValue(key: string, value: string | string[]): string {
  if (typeof value === 'string') return value;
  return key === 'markers' || key === 'filterwarnings' ? value.join('\n') : value.map(shQuote).join(' ');
}

/** What of a project's own pytest command line we take: where the tests are and which are selected. */
const KEPT = new Set(['-m', '-k', '-p', '--ignore', '--ignore-glob', '--deselect', '--import-mode', '--doctest-modules', '--doctest-glob']);

/** Test paths and selection options of one invocation's arguments. */
function pathsAndSelection(args: string[]): string[] {
  const out: string[] = [];
  for (let i = 0; i < args.length; i++) {
    const word = args[i];
    if (!word.startsWith('-')) {
      if (!/[{}$]/.test(word) && !word.startsWith('/')) out.push(word);
      continue;
    }
    const name = word.includes('=') ? word.slice(0, word.indexOf('=')) : word;
    // An option pytest does not know is a conftest's own (`--device cpu`, nnsight): a word after it
    // that names no path is taken for its value, never for a test path pytest would not find.
    const next = args[i + 1];
    const ownValue = !pytestOption(name) && !word.includes('=') && next !== undefined && !next.startsWith('-') && !/[/:]|\.py$/.test(next);
    const value = takesNext(word, next) || ownValue ? args[++i] : undefined;
    // Which files are test modules (unittest discovery's pattern, read as pytest's python_files) selects too.
    const selects = KEPT.has(name) || (name === '-o' && /^python_(files|classes|functions)=/.test(value ?? ''));
    if (selects && !(name === '-p' && !value?.startsWith('no:'))) out.push(word, ...(value !== undefined ? [value] : []));
  }
  return out;
}

const TOOL_ORDER = ['tox', 'workflow', 'nox', 'hatch'] as const;

/**
 * How little of the suite an invocation runs: 0 with no paths (the whole suite, maybe less what it
 * ignores), 1 with folders, 2 with single modules or tests (a job for one file: lm-evaluation-harness's
 * new-tasks workflow runs tests/test_tasks.py alone, its unit tests job the rest).
 */
function narrowness(args: string[]): number {
  const paths = pathsAndSelection(args).filter((w, i, all) => !w.startsWith('-') && !(i > 0 && (KEPT.has(all[i - 1]) || all[i - 1] === '-o')));
  return paths.some((p) => /\.py($|::)|::/.test(p)) ? 2 : paths.length ? 1 : 0;
}

/** The pytest arguments for a suite whose pytest is `pytestVersion`, given what it gives each requirement. */
export function pytestArgs(ev: Evidence, outcome: (r: Requirement) => Outcome, pytestVersion: Version | undefined): ExplainedArgs[] {
  const out: ExplainedArgs[] = [];
  const config = ev.pytest[0];
  if (config) {
    const items = readAddopts(config.addopts);
    const keep = (i: AddoptsItem) => i.action === 'keep' || (i.action === 'install' && outcome(parseRequirement(i.plugin!)) !== 'missing');
    const addopts = items.filter(keep).flatMap((i) => i.words);
    const plugins = config.required_plugins.filter((p) => {
      try {
        return outcome(parseRequirement(p)) === 'satisfied';
      } catch {
        return true;
      }
    });
    const minversion =
      config.minversion && pytestVersion && compareVersions(pytestVersion, parseVersion(config.minversion)) < 0 ? formatVersion(pytestVersion) : undefined;
    if (config.format === 'toml' && (!pytestVersion || pytestVersion.release[0] < 9)) {
      const values: [string, string | string[]][] = [
        ['testpaths', config.testpaths],
        ['addopts', addopts.map(shQuote).join(' ')],
        ['markers', config.markers],
        ['filterwarnings', config.filterwarnings],
        ['required_plugins', plugins],
        ['minversion', minversion ?? config.minversion ?? ''],
        // pytest 9's strict mode: pytest 8 only warns about a key it does not know.
        ...Object.entries(config.other).filter(([k]) => !k.startsWith('strict')),
      ];
      const args = values.filter(([, v]) => v.length).flatMap(([k, v]) => ['-o', `${k}=${iniValue(k, v)}`]);
      if (args.length)
        out.push({
          args,
          why: `pytest ${pytestVersion ? formatVersion(pytestVersion) : ''} does not read the native [tool.pytest] table (pytest 9 does)`.replace('  ', ' '),
          source: config.source,
        });
    } else {
      const dropped = items.filter((i) => !keep(i));
      if (dropped.length)
        out.push({ args: ['-o', `addopts=${addopts.map(shQuote).join(' ')}`], why: `addopts without ${describeDropped(dropped)}`, source: config.source });
      if (plugins.length < config.required_plugins.length) {
        out.push({
          args: ['-o', `required_plugins=${plugins.join(' ')}`],
          why: `required_plugins the suite cannot meet: ${config.required_plugins.filter((p) => !plugins.includes(p)).join(', ')}`,
          source: config.source,
        });
      }
      if (minversion)
        out.push({
          args: ['-o', `minversion=${minversion}`],
          why: `the suite's pytest ${minversion} is older than minversion ${config.minversion}`,
          source: config.source,
        });
    }
  }
  // pytest-randomly reorders and reseeds on import alone (its entry point), with no option in sight.
  if (outcome(parseRequirement('pytest-randomly')) !== 'missing') {
    out.push({
      args: ['-p', 'no:randomly'],
      why: 'pytest-randomly is installed: it would reorder tests with a new seed each run',
      source: config?.source ?? { file: '', line: 0 },
    });
  }
  if (!config?.testpaths.length) {
    // The broadest of them, the first in the tools' order among equals.
    const command = TOOL_ORDER.flatMap((tool) => ev.testCommands.filter((c) => c.tool === tool))
      .filter((c) => pathsAndSelection(c.args).length)
      .reduce<(typeof ev.testCommands)[number] | undefined>((best, c) => (!best || narrowness(c.args) < narrowness(best.args) ? c : best), undefined);
    if (command)
      out.push({
        args: pathsAndSelection(command.args),
        why: `the paths and selection ${command.tool} (${command.scope}) runs pytest with`,
        source: command.source,
      });
  } else {
    // Configured testpaths, and CI runs the tests with unittest's discovery (pyvene: its *TestCase.py
    // files match no python_files of its pytest table): the files the project's own run collects.
    const discovery = ev.testCommands.flatMap((c) => {
      const at = c.args.findIndex((w, i) => w === '-o' && /^python_files=/.test(c.args[i + 1] ?? ''));
      return at >= 0 ? [{ c, args: c.args.slice(at, at + 2) }] : [];
    })[0];
    if (discovery)
      out.push({ args: discovery.args, why: `the test files ${discovery.c.tool} (${discovery.c.scope}) discovers with unittest`, source: discovery.c.source });
  }
  return out;
}

/** Variables the runner or CI service owns, credentials, and what only changes output. */
const NOT_TEST_VARS =
  /^(GITHUB_|RUNNER_|CI$|PIP_|TOX_|UV_|POETRY_|COVERAGE|COV_|CODECOV|PY_COLORS$|FORCE_COLOR$|NO_COLOR$|TERM$|HOME$|PATH$|PYTEST_ADDOPTS$)|TOKEN|SECRET|PASSWORD|KEY$/i;

/** Variables the project's test tooling sets for its test runs (tox's test env, the CI job that runs pytest, a hatch env with a test script); the first setting wins. */
export function testVars(ev: Evidence): { vars: Record<string, string>; sources: Record<string, Source> } {
  const scopes = ev.testCommands.map((c) => c.scope ?? '');
  const vars: Record<string, string> = {};
  const sources: Record<string, Source> = {};
  for (const v of ev.vars) {
    const scope = v.scope ?? '';
    const forTests = scopes.some((s) => s === scope || s.startsWith(`${scope}:`));
    if (!forTests || NOT_TEST_VARS.test(v.name) || /[{}$`]/.test(v.value) || Object.hasOwn(vars, v.name)) continue;
    vars[v.name] = v.value;
    sources[v.name] = v.source;
  }
  return { vars, sources };
}
