/**
 * `npm run bench:plain-env`: the plain script issue 41's environments are measured against. For
 * each line of a bare manifest (repo and commit), on the host, what a person types first:
 *
 *   uv venv --python 3.11; uv pip install -e .[test] (or -e . when that fails); each
 *   requirements*.txt of the top folder; pytest; then pytest --collect-only and a full pytest run
 *
 * recording install seconds, the first error, venv bytes, what collects and what passes. The uv
 * cache is shared by every repository (as a person's would be); the venv is measured and deleted.
 * Collection and the test run have no network (`unshare -n`, so root): a suite that downloads model
 * weights or data at test time fails here as it would in a sealed image. uv takes the host's Python
 * 3.11 (/usr/bin/python3.11) and never downloads one; it reads none of pip's configuration, so it
 * resolves from PyPI alone (pip's find-links, extra indexes and torch cap do not apply to it).
 *
 *   node dist/bench/plain_env.js [--manifest bench/fixtures/envs-index/manifest.jsonl] [--results bench/plain_env.jsonl]
 *     [--only owner__name,...] [--install-limit 600] [--test-limit 600] [--fresh] [--table]
 *
 * Results are JSON Lines, one per repository, appended as each finishes: a rerun skips those already
 * there (--fresh starts over; --table prints the table of what is there and runs nothing). Repositories
 * marked held out in repos.tsv (beside the manifest) are reported apart: they were kept out of tuning.
 * The manifest names local git folders: bench/fixtures/make-manifest.sh bench/fixtures/envs-index writes it from
 * repos.tsv on a machine (from snapshots the `fetch` tool brought, or clones where GitHub is reachable).
 */
import { spawnSync } from 'node:child_process';
import { appendFileSync, existsSync, mkdirSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { parseArgs, stripVTControlCharacters } from 'node:util';
import { dirBytes, gb } from '../core/disk.js';
import { git } from '../core/git.js';
import { readLines } from '../core/jsonl.js';
import { median } from '../core/stats.js';
import { table } from '../core/table.js';
import { readManifest, type Unit } from '../pipeline/runtime/manifest.js';

const { values: args } = parseArgs({
  options: {
    manifest: { type: 'string', default: 'bench/fixtures/envs-index/manifest.jsonl' },
    results: { type: 'string', default: 'bench/plain_env.jsonl' },
    only: { type: 'string' },
    // Where the uv tool, its cache and the scratch work trees live (the cache is kept between runs).
    cache: { type: 'string', default: '/var/cache/worldline-bench' },
    python: { type: 'string', default: '/usr/bin/python3.11' },
    'install-limit': { type: 'string', default: '600' },
    'test-limit': { type: 'string', default: '600' },
    fresh: { type: 'boolean', default: false },
    table: { type: 'boolean', default: false },
  },
});

interface PlainResult {
  repo: string;
  commit: string;
  held_out: boolean;
  /** `-e .[test]`, or `-e .` when that failed. */
  install_spec: string;
  install_s: number;
  install_ok: boolean;
  install_error: string | null;
  /** requirements*.txt files of the top folder that uv could not install. */
  requirements_failed: string[];
  /** Growth of the shared uv cache during this repository's install: what it downloaded (and unpacked) that no earlier one had. */
  cache_growth_bytes: number;
  venv_bytes: number;
  collect_ok: boolean;
  collect_error: string | null;
  collected: number | null;
  test_s: number | null;
  test_exit: number | null;
  passed: number | null;
  failed: number | null;
  errors: number | null;
  skipped: number | null;
}

interface Step {
  code: number;
  seconds: number;
  out: string;
}

const uvDir = join(args.cache, 'tools/uv');
const uv = join(uvDir, 'bin/uv');
const uvCache = join(args.cache, 'uv-cache');
const baseEnv = { ...process.env, UV_CACHE_DIR: uvCache, UV_PYTHON_DOWNLOADS: 'never', UV_NO_PROGRESS: '1', NO_COLOR: '1' };

/**
 * One command under `timeout` (which signals its whole process group) with its output capped: past
 * the cap Node stops `timeout`, which passes the signal on. Exit 124/137 is a timeout.
 */
function step(argv: string[], cwd: string, limitS: number, env: NodeJS.ProcessEnv = baseEnv): Step {
  const started = Date.now();
  const res = spawnSync('timeout', ['-k', '10', String(Math.max(1, Math.round(limitS))), ...argv], {
    cwd,
    env,
    encoding: 'utf8',
    maxBuffer: 64 << 20,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  // Colour codes some tools print despite NO_COLOR (litgpt's import errors) would end up in the error column.
  const out = stripVTControlCharacters(`${res.stdout ?? ''}\n${res.stderr ?? ''}`);
  return { code: res.status ?? 137, seconds: (Date.now() - started) / 1000, out };
}

/** The line a person reads first when a step fails: uv's `error:`/`×` line, pytest's reason (`ERROR x - why`, `E why`), else the last line. */
function firstError(s: Step): string {
  if (s.code === 124 || s.code === 137) return `timed out after ${s.seconds.toFixed(0)} s`;
  const lines = s.out.split('\n').map((l) => l.trim());
  const hit =
    lines.find((l) => /^(error:|×)/.test(l)) ??
    lines.find((l) => /^ERROR .* - /.test(l)) ??
    lines.find((l) => /^E\s+\S/.test(l)) ??
    lines.find((l) => /^ERROR\b/.test(l)) ??
    lines.find((l) => /error/i.test(l)) ??
    lines.filter(Boolean).at(-1);
  return (hit ?? `exit ${s.code}`).slice(0, 240);
}

/** pytest's summary counts ("3 failed, 120 passed, 2 errors in 4.2s"), or its progress so far; null where it printed neither. */
function summary(out: string): Record<'passed' | 'failed' | 'errors' | 'skipped', number> | null {
  const line = out
    .split('\n')
    .reverse()
    .find((l) => /\bin [\d.]+s\b/.test(l) && /\d+ (passed|failed|errors?|skipped|deselected|xfailed|xpassed)|no tests ran/.test(l));
  if (line) {
    const count = (word: string) => Number(new RegExp(`(\\d+) ${word}`).exec(line)?.[1] ?? 0);
    return { passed: count('passed'), failed: count('failed'), errors: count('errors?'), skipped: count('skipped') };
  }
  // A run stopped by the time limit prints no summary: its progress lines ("..F.s [ 40%]", the last one unfinished) count what ran.
  const progress = out
    .split('\n')
    .filter((l) => /^[.FEsxX]+\s*(\[\s*\d+%\])?$/.test(l.trim()))
    .join('');
  if (!progress) return null;
  const chars = (c: string) => progress.split(c).length - 1;
  return { passed: chars('.'), failed: chars('F'), errors: chars('E'), skipped: chars('s') };
}

/**
 * What `--collect-only` found: its "N tests collected" line, or, where the project's addopts add
 * another -q (vit-pytorch), the per-file "path.py: N" lines that replace it.
 */
function collectedCount(out: string): number | null {
  const line = /(\d+)(?:\/\d+)? tests? collected/.exec(out);
  if (line) return Number(line[1]);
  if (/no tests collected/.test(out)) return 0;
  const perFile = [...out.matchAll(/^\S+\.py: (\d+)$/gm)];
  return perFile.length ? perFile.reduce((s, m) => s + Number(m[1]), 0) : null;
}

/** repos.tsv beside the manifest: which local folder names (owner__name) are held out. */
function heldOut(): Set<string> {
  const tsv = join(dirname(resolve(args.manifest)), 'repos.tsv');
  if (!existsSync(tsv)) return new Set();
  const rows = readFileSync(tsv, 'utf8')
    .trim()
    .split('\n')
    .slice(1)
    .map((l) => l.split('\t'));
  return new Set(rows.filter((r) => r[4] === 'yes').map((r) => r[0].replace('/', '__')));
}

async function measure(unit: Unit, held: boolean): Promise<PlainResult> {
  const scratch = join(args.cache, 'plain-work', unit.id);
  rmSync(scratch, { recursive: true, force: true });
  mkdirSync(scratch, { recursive: true });
  const src = join(scratch, 'src');
  const venv = join(scratch, 'venv');
  // A clone, not an archive: setuptools-scm and hatch-vcs read the version from .git, as they do in a person's checkout.
  await git(['clone', '-q', '--shared', '--no-checkout', unit.location, src], { timeoutMs: 300_000 });
  await git(['-C', src, 'checkout', '-q', '--detach', unit.commit ?? 'HEAD'], { timeoutMs: 300_000 });

  const installLimit = Number(args['install-limit']);
  const cacheBefore = dirBytes(uvCache);
  const vpy = join(venv, 'bin/python');
  const steps: Step[] = [];
  const left = () => installLimit - steps.reduce((s, x) => s + x.seconds, 0);
  const install = (...what: string[]) => {
    const s = step([uv, 'pip', 'install', '--python', vpy, ...what], src, left());
    steps.push(s);
    return s;
  };
  let error: string | null = null;
  const mk = step([uv, 'venv', '--python', args.python, venv], src, 120);
  steps.push(mk);
  let spec = '-e .[test]';
  const requirementsFailed: string[] = [];
  if (mk.code !== 0) error = firstError(mk);
  else {
    let editable = install('-e', '.[test]');
    if (editable.code !== 0 && left() > 0) {
      spec = '-e .';
      editable = install('-e', '.');
    }
    if (editable.code !== 0) error = firstError(editable);
    for (const req of readdirSync(src)
      .filter((f) => /^requirements.*\.txt$/.test(f))
      .sort()) {
      if (left() <= 0) break;
      const r = install('-r', req);
      if (r.code !== 0) {
        requirementsFailed.push(req);
        error ??= `${req}: ${firstError(r)}`;
      }
    }
    if (left() > 0) {
      const p = install('pytest');
      if (p.code !== 0) error ??= firstError(p);
    } else error ??= `install limit of ${installLimit} s reached`;
  }
  const installS = steps.reduce((s, x) => s + x.seconds, 0);
  const cacheGrowth = dirBytes(uvCache) - cacheBefore;

  // The venv as a person who activated it has it (console scripts on PATH), with no network.
  // Unbuffered: a run the time limit stops dies without flushing, and its progress lines are its only counts.
  const runEnv = { ...baseEnv, VIRTUAL_ENV: venv, PATH: `${join(venv, 'bin')}:${process.env.PATH}`, PYTHONUNBUFFERED: '1' };
  const pytest = (extra: string[], limit: number) => step(['unshare', '-n', vpy, '-m', 'pytest', '-q', '-p', 'no:cacheprovider', ...extra], src, limit, runEnv);
  const haveVenv = existsSync(vpy);
  const collect = haveVenv ? pytest(['--collect-only'], 300) : null;
  const collected = collect ? collectedCount(collect.out) : null;
  const test = haveVenv ? pytest([], Number(args['test-limit'])) : null;
  const counts = test ? summary(test.out) : null;
  const venvBytes = dirBytes(venv);
  rmSync(scratch, { recursive: true, force: true });
  return {
    repo: unit.repo,
    commit: unit.commit ?? '',
    held_out: held,
    install_spec: spec,
    install_s: Math.round(installS * 10) / 10,
    install_ok: error === null,
    install_error: error,
    requirements_failed: requirementsFailed,
    cache_growth_bytes: Math.max(0, cacheGrowth),
    venv_bytes: venvBytes,
    collect_ok: collect?.code === 0,
    collect_error: collect && collect.code !== 0 ? firstError(collect) : haveVenv ? null : 'no venv',
    collected,
    test_s: test ? Math.round(test.seconds * 10) / 10 : null,
    test_exit: test?.code ?? null,
    passed: counts?.passed ?? null,
    failed: counts?.failed ?? null,
    errors: counts?.errors ?? null,
    skipped: counts?.skipped ?? null,
  };
}

const num = (x: number | null) => (x === null ? '-' : String(x));

function report(results: PlainResult[]): string {
  const part = (title: string, rs: PlainResult[]) => {
    if (!rs.length) return [];
    const rows = rs.map((r) => [
      r.repo,
      r.install_spec,
      r.install_s.toFixed(1),
      r.install_ok ? 'ok' : (r.install_error ?? '').slice(0, 70),
      gb(r.cache_growth_bytes),
      gb(r.venv_bytes),
      r.collect_ok ? 'ok' : (r.collect_error ?? '').slice(0, 70),
      num(r.collected),
      num(r.passed),
      num(r.failed),
      r.test_s === null ? '-' : r.test_s.toFixed(1),
    ]);
    const collectedOk = rs.filter((r) => r.collect_ok).length;
    const passing = rs.filter((r) => (r.passed ?? 0) > 0).length;
    return [
      `${title}: ${rs.length} repositories; install ok ${rs.filter((r) => r.install_ok).length}; collect with no error ${collectedOk}; pass at least one test ${passing}; median install ${median(rs.map((r) => r.install_s)).toFixed(1)} s; tests passed ${rs.reduce((s, r) => s + (r.passed ?? 0), 0)}; venvs ${gb(rs.reduce((s, r) => s + r.venv_bytes, 0))}; uv cache growth ${gb(rs.reduce((s, r) => s + r.cache_growth_bytes, 0))}`,
      '',
      table([['repository', 'install', 'install s', 'install result', 'uv cache +', 'venv', 'collect', 'collected', 'passed', 'failed', 'test s'], ...rows]),
      '',
    ];
  };
  return [
    ...part(
      'tuning set',
      results.filter((r) => !r.held_out),
    ),
    ...part(
      'held out (not used for tuning)',
      results.filter((r) => r.held_out),
    ),
  ].join('\n');
}

const resultsFile = resolve(args.results);
if (args.fresh) rmSync(resultsFile, { force: true });
const done = (): PlainResult[] => (existsSync(resultsFile) ? [...readLines(resultsFile)].map((l) => JSON.parse(l) as PlainResult) : []);

if (!args.table) {
  if (!existsSync(uv)) {
    process.stderr.write(`bench: no uv at ${uv}: python3.11 -m venv ${uvDir} && ${uvDir}/bin/pip install uv\n`);
    process.exit(2);
  }
  const manifest = readManifest(resolve(args.manifest));
  if (manifest.errors.length) throw new Error(`manifest: ${manifest.errors.map((e) => `line ${e.line}: ${e.message}`).join('; ')}`);
  // --only also sets the order: with a deadline, the repositories that matter first.
  const units = args.only ? args.only.split(',').map((name) => manifest.units.find((u) => u.repo === name) ?? name) : manifest.units;
  const missing = units.filter((u) => typeof u === 'string');
  if (missing.length) throw new Error(`not in the manifest: ${missing.join(', ')}`);
  const held = heldOut();
  const have = new Set(done().map((r) => `${r.repo}@${r.commit}`));
  for (const unit of units as Unit[]) {
    if (have.has(`${unit.repo}@${unit.commit}`)) continue;
    process.stderr.write(`bench: ${unit.repo} ...\n`);
    const r = await measure(unit, held.has(unit.repo));
    appendFileSync(resultsFile, `${JSON.stringify(r)}\n`);
    process.stderr.write(
      `bench: ${unit.repo}: install ${r.install_s} s ${r.install_ok ? 'ok' : r.install_error}; collect ${r.collect_ok ? r.collected : r.collect_error}; passed ${r.passed}\n`,
    );
  }
}
process.stdout.write(report(done()));
