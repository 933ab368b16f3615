/**
 * pytest options that belong to a plugin, as they appear in a project's `addopts`. Some plugins
 * change what a traced run means and are taken out: coverage and other tracers fight ours for
 * sys.settrace / sys.monitoring, xdist moves tests into worker processes, randomly reorders them
 * with a fresh seed, lint plugins add items that are no tests. The others are installed, and their
 * options taken out only when the suite has no package for them. An option no plugin here owns is
 * kept: a conftest.py may define it.
 */

type Action = 'strip' | 'install';
/** Whether the option takes the next word as its value: always, never, or when it does not start with "-" (argparse's nargs="?"). */
type Arity = 'value' | 'flag' | 'optional';

interface PluginOption {
  /** The option, or a prefix ending in "*". */
  name: string;
  plugin: string;
  action: Action;
  arity: Arity;
}

const o = (plugin: string, action: Action, arity: Arity, ...names: string[]): PluginOption[] => names.map((name) => ({ name, plugin, action, arity }));

const OPTIONS: PluginOption[] = [
  ...o('pytest-cov', 'strip', 'optional', '--cov'),
  ...o('pytest-cov', 'strip', 'value', '--cov-report', '--cov-config', '--cov-fail-under', '--cov-context'),
  ...o('pytest-cov', 'strip', 'flag', '--no-cov', '--no-cov-on-fail', '--cov-append', '--cov-branch', '--cov-reset'),
  ...o('pytest-xdist', 'strip', 'value', '-n', '--numprocesses', '--dist', '--maxprocesses', '--max-worker-restart', '--tx', '--rsyncdir'),
  ...o('pytest-xdist', 'strip', 'flag', '--looponfail', '--boxed'),
  ...o('pytest-randomly', 'strip', 'value', '--randomly-seed'),
  ...o('pytest-randomly', 'strip', 'flag', '--randomly-dont-reorganize', '--randomly-dont-reset-seed'),
  ...o('pytest-random-order', 'strip', 'value', '--random-order-bucket', '--random-order-seed'),
  ...o('pytest-random-order', 'strip', 'flag', '--random-order'),
  ...o('pytest-flake8', 'strip', 'flag', '--flake8'),
  ...o('pytest-mypy', 'strip', 'flag', '--mypy'),
  ...o('pytest-black', 'strip', 'flag', '--black'),
  ...o('pytest-isort', 'strip', 'flag', '--isort'),
  ...o('pytest-pylint', 'strip', 'flag', '--pylint'),
  ...o('pytest-ruff', 'strip', 'flag', '--ruff', '--ruff-format'),
  ...o('pytest-pycodestyle', 'strip', 'flag', '--pycodestyle', '--codestyle'),
  ...o('pytest-html', 'strip', 'value', '--html', '--css'),
  ...o('pytest-html', 'strip', 'flag', '--self-contained-html'),
  ...o('pytest-sugar', 'strip', 'flag', '--old-summary'),
  ...o('pytest-instafail', 'strip', 'flag', '--instafail'),
  ...o('pytest-timeout', 'install', 'value', '--timeout', '--timeout_method', '--timeout-method'),
  ...o('pytest-asyncio', 'install', 'value', '--asyncio-mode'),
  ...o('pytest-benchmark', 'install', 'flag', '--benchmark-*'),
  ...o('pytest-rerunfailures', 'install', 'value', '--reruns', '--reruns-delay', '--only-rerun'),
  ...o('pytest-doctestplus', 'install', 'flag', '--doctest-plus', '--doctest-rst', '--doctest-only', '--text-file-format'),
  ...o('pytest-mpl', 'install', 'flag', '--mpl', '--mpl-*'),
  ...o('pytest-remotedata', 'install', 'value', '--remote-data'),
  ...o('pytest-socket', 'install', 'flag', '--disable-socket', '--allow-unix-socket'),
  ...o('pytest-socket', 'install', 'value', '--allow-hosts'),
  ...o('hypothesis', 'install', 'value', '--hypothesis-profile', '--hypothesis-seed', '--hypothesis-verbosity'),
  ...o('hypothesis', 'install', 'flag', '--hypothesis-show-statistics'),
  ...o('pytest-django', 'install', 'value', '--ds', '--dc'),
  ...o('pytest-django', 'install', 'flag', '--reuse-db', '--create-db', '--nomigrations', '--migrations'),
  ...o('syrupy', 'install', 'flag', '--snapshot-update', '--snapshot-warn-unused'),
  ...o('pytest-forked', 'install', 'flag', '--forked'),
];

/** Plugins named by `-p module` whose run we cannot trace faithfully. */
const STRIPPED_MODULES: Record<string, string> = {
  xdist: 'pytest-xdist',
  'xdist.plugin': 'pytest-xdist',
  pytest_cov: 'pytest-cov',
  randomly: 'pytest-randomly',
  pytest_randomly: 'pytest-randomly',
};

/** One option of addopts with its value words, and what to do with it. */
export interface AddoptsItem {
  words: string[];
  action: Action | 'keep';
  plugin?: string;
}

function owner(name: string): PluginOption | undefined {
  return OPTIONS.find((opt) => (opt.name.endsWith('*') ? name.startsWith(opt.name.slice(0, -1)) : name === opt.name));
}

export function readAddopts(words: string[]): AddoptsItem[] {
  const items: AddoptsItem[] = [];
  for (let i = 0; i < words.length; i++) {
    const word = words[i];
    const [name, inline] = word.startsWith('--') && word.includes('=') ? [word.slice(0, word.indexOf('=')), true] : [word, false];
    if (name === '-p' && i + 1 < words.length) {
      const plugin = STRIPPED_MODULES[words[i + 1]];
      items.push({ words: [word, words[i + 1]], ...(plugin ? { action: 'strip', plugin } : { action: 'keep' }) });
      i++;
      continue;
    }
    // "-n4" and "-nauto": xdist's short option with its value attached.
    const short = /^-n(\d+|auto|logical)$/.exec(word) ? owner('-n') : undefined;
    const opt = short ?? owner(name);
    if (!opt) {
      items.push({ words: [word], action: 'keep' });
      continue;
    }
    const next = words[i + 1];
    const takesNext = !inline && !short && next !== undefined && (opt.arity === 'value' || (opt.arity === 'optional' && !next.startsWith('-')));
    items.push({ words: takesNext ? [word, words[++i]] : [word], action: opt.action, plugin: opt.plugin });
  }
  return items;
}
