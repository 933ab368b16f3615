/**
 * pytest's options and plugins, one table: which options take the next word as their value (so
 * that word is no test path), and which plugin owns an option, a marker, an ini key or a fixture.
 * Read where a run names its own tests (sandbox/suite_run.ts), where a project's addopts and its
 * own pytest invocation are read (envs/plan/addopts.ts, envs/plan/pytest_env.ts) and where a
 * collect-only run's "unknown" names are mended (envs/repair/rules.ts). Checked against pytest
 * 9.0.3's and the plugins' own --help.
 */

/** Whether an option takes the next word as its value: always, never, or when it does not start with "-" (argparse's nargs="?"). */
export type Arity = 'value' | 'flag' | 'optional';

/**
 * What a traced run does with a plugin a project's addopts uses: `strip` its options (it changes
 * what a traced run means: coverage and other tracers fight ours for sys.settrace /
 * sys.monitoring, xdist moves tests into worker processes, randomly reorders them with a fresh
 * seed, lint plugins add items that are no tests), or `install` it (its options are taken out
 * only when the suite has no package for it).
 */
export type Traced = 'strip' | 'install';

interface Plugin {
  /** The package that provides it. */
  package: string;
  traced: Traced;
  /** Its options by arity; a name ending in "*" is a prefix, matched after every whole name. */
  options: Partial<Record<Arity, string[]>>;
  /** Markers, ini keys and fixtures it defines: what its absence looks like besides an option. */
  names?: string[];
  /** The modules `-p` names it by. */
  modules?: string[];
}

/** pytest's own options whose value is the next word. */
const PYTEST_VALUE =
  '-k -m -p -c -o -W -r --deselect --ignore --ignore-glob --rootdir --confcutdir --basetemp --durations --maxfail --tb --import-mode --log-level --log-cli-level --log-file --log-format --junitxml --junit-xml --override-ini --capture --doctest-glob --color'.split(
    ' ',
  );

const PLUGINS: Plugin[] = [
  {
    package: 'pytest-cov',
    traced: 'strip',
    options: {
      optional: ['--cov'],
      value: ['--cov-report', '--cov-config', '--cov-fail-under', '--cov-context'],
      flag: ['--no-cov', '--no-cov-on-fail', '--cov-append', '--cov-branch', '--cov-reset', '--cov-*'],
    },
    names: ['no_cover'],
    modules: ['pytest_cov'],
  },
  {
    package: 'pytest-xdist',
    traced: 'strip',
    options: { value: ['-n', '--numprocesses', '--dist', '--maxprocesses', '--max-worker-restart', '--tx', '--rsyncdir'], flag: ['--looponfail', '--boxed'] },
    modules: ['xdist', 'xdist.plugin'],
  },
  {
    package: 'pytest-randomly',
    traced: 'strip',
    options: { value: ['--randomly-seed'], flag: ['--randomly-dont-reorganize', '--randomly-dont-reset-seed', '--randomly-*'] },
    modules: ['randomly', 'pytest_randomly'],
  },
  { package: 'pytest-random-order', traced: 'strip', options: { value: ['--random-order-bucket', '--random-order-seed'], flag: ['--random-order'] } },
  { package: 'pytest-flake8', traced: 'strip', options: { flag: ['--flake8'] } },
  { package: 'pytest-mypy', traced: 'strip', options: { flag: ['--mypy', '--mypy*'] }, names: ['mypy'] },
  { package: 'pytest-black', traced: 'strip', options: { flag: ['--black'] } },
  { package: 'pytest-isort', traced: 'strip', options: { flag: ['--isort'] } },
  { package: 'pytest-pylint', traced: 'strip', options: { flag: ['--pylint'] } },
  { package: 'pytest-ruff', traced: 'strip', options: { flag: ['--ruff', '--ruff-format'] } },
  { package: 'pytest-pycodestyle', traced: 'strip', options: { flag: ['--pycodestyle', '--codestyle'] } },
  { package: 'pytest-html', traced: 'strip', options: { value: ['--html', '--css'], flag: ['--self-contained-html'] } },
  { package: 'pytest-sugar', traced: 'strip', options: { flag: ['--old-summary'] } },
  { package: 'pytest-instafail', traced: 'strip', options: { flag: ['--instafail'] } },
  {
    package: 'pytest-timeout',
    traced: 'install',
    options: { value: ['--timeout', '--timeout_method', '--timeout-method'], flag: ['--timeout*'] },
    names: ['timeout', 'timeout_method', 'timeout_func_only'],
  },
  {
    package: 'pytest-asyncio',
    traced: 'install',
    options: { value: ['--asyncio-mode'] },
    names: ['asyncio', 'asyncio_mode', 'asyncio_default_fixture_loop_scope'],
  },
  {
    package: 'pytest-benchmark',
    traced: 'install',
    options: {
      value: [
        '--benchmark-min-time',
        '--benchmark-max-time',
        '--benchmark-min-rounds',
        '--benchmark-timer',
        '--benchmark-calibration-precision',
        '--benchmark-warmup-iterations',
        '--benchmark-save',
        '--benchmark-json',
        '--benchmark-compare-fail',
        '--benchmark-cprofile',
        '--benchmark-cprofile-loops',
        '--benchmark-cprofile-top',
        '--benchmark-cprofile-dump',
        '--benchmark-storage',
        '--benchmark-netrc',
        '--benchmark-sort',
        '--benchmark-group-by',
        '--benchmark-columns',
        '--benchmark-name',
        '--benchmark-time-unit',
      ],
      optional: ['--benchmark-warmup', '--benchmark-compare', '--benchmark-histogram'],
      flag: ['--benchmark-*'],
    },
    names: ['benchmark'],
  },
  {
    package: 'pytest-rerunfailures',
    traced: 'install',
    options: { value: ['--reruns', '--reruns-delay', '--only-rerun'], flag: ['--reruns*'] },
    names: ['flaky', 'reruns'],
  },
  {
    package: 'pytest-doctestplus',
    traced: 'install',
    options: { flag: ['--doctest-plus', '--doctest-rst', '--doctest-only', '--text-file-format'] },
    names: ['doctest_plus', 'doctest_optionflags_plus'],
  },
  { package: 'pytest-mpl', traced: 'install', options: { flag: ['--mpl', '--mpl-*'] } },
  { package: 'pytest-remotedata', traced: 'install', options: { optional: ['--remote-data'] } },
  { package: 'pytest-socket', traced: 'install', options: { flag: ['--disable-socket', '--allow-unix-socket'], value: ['--allow-hosts'] } },
  {
    package: 'hypothesis',
    traced: 'install',
    options: { value: ['--hypothesis-profile', '--hypothesis-seed', '--hypothesis-verbosity'], flag: ['--hypothesis-show-statistics', '--hypothesis-*'] },
    names: ['hypothesis'],
  },
  {
    package: 'pytest-django',
    traced: 'install',
    options: { value: ['--ds', '--dc'], flag: ['--reuse-db', '--create-db', '--nomigrations', '--migrations'] },
    names: ['django_db', 'DJANGO_SETTINGS_MODULE'],
  },
  { package: 'syrupy', traced: 'install', options: { flag: ['--snapshot-update', '--snapshot-warn-unused'] } },
  { package: 'pytest-forked', traced: 'install', options: { flag: ['--forked'] } },
  { package: 'pytest-trio', traced: 'install', options: {}, names: ['trio', 'trio_mode'] },
  { package: 'anyio', traced: 'install', options: {}, names: ['anyio'] },
  { package: 'pytest-env', traced: 'install', options: {}, names: ['env'] },
  { package: 'pytest-freezer', traced: 'install', options: {}, names: ['freeze_time'] },
  { package: 'pytest-mock', traced: 'install', options: {}, names: ['mock', 'mocker'] },
  { package: 'pytest-httpserver', traced: 'install', options: {}, names: ['httpserver'] },
  { package: 'pytest-lazy-fixtures', traced: 'install', options: {}, names: ['lazy_fixture'] },
  { package: 'pytest-subtests', traced: 'install', options: {}, names: ['subtests'] },
];

/** One option of the table: the plugin that owns it (none for pytest's own) and its arity. */
export interface PytestOption {
  arity: Arity;
  plugin?: string;
  traced?: Traced;
}

const ARITIES: Arity[] = ['value', 'optional', 'flag'];
const WHOLE = new Map<string, PytestOption>(PYTEST_VALUE.map((name) => [name, { arity: 'value' }]));
const PREFIXES: [string, PytestOption][] = [];
for (const p of PLUGINS)
  for (const arity of ARITIES)
    for (const name of p.options[arity] ?? []) {
      const opt = { arity, plugin: p.package, traced: p.traced };
      if (name.endsWith('*')) PREFIXES.push([name.slice(0, -1), opt]);
      else WHOLE.set(name, opt);
    }
const NAMES = new Map(PLUGINS.flatMap((p) => (p.names ?? []).map((n) => [n, p.package] as const)));
const MODULES = new Map(PLUGINS.flatMap((p) => (p.modules ?? []).map((m) => [m, p] as const)));

/** An option by its name (without "=value"): a whole name first, then the prefixes in the table's order. */
export function pytestOption(name: string): PytestOption | undefined {
  return WHOLE.get(name) ?? PREFIXES.find(([prefix]) => name.startsWith(prefix))?.[1];
}

/** Whether `next` is the value of option word `word` (an option written "--name=value" has its value already). */
export function takesNext(word: string, next: string | undefined): boolean {
  if (next === undefined || (word.startsWith('--') && word.includes('='))) return false;
  const arity = pytestOption(word)?.arity;
  return arity === 'value' || (arity === 'optional' && !next.startsWith('-'));
}

/** The plugin a `-p module` names, among those a traced run strips. */
export function strippedModule(module: string): string | undefined {
  const p = MODULES.get(module);
  return p?.traced === 'strip' ? p.package : undefined;
}

/** A name pytest did not know (an option, marker, ini key or fixture), as the plugin that would define it (null when none is known). */
export function pluginFor(name: string): string | null {
  return NAMES.get(name) ?? pytestOption(name)?.plugin ?? null;
}
