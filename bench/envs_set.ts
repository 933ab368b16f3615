/**
 * `npm run bench:envs -- --set bench/fixtures/envs-index`: issue 41's comparison over a set of
 * recent GitHub repositories (repos.tsv: name, commit, date, torch or transformers, held out).
 * Each mode is a real `worldline run` of the set's bare manifest through validate, into a folder
 * of its own: `none` (Debian alone, offline) and `auto` (this host's pip configuration: its index,
 * certificate, proxy, find-links, constraints), `all` (the same index for every Python requirement,
 * --index-for all); the plain script's figures come from the file
 * `npm run bench:plain-env` wrote (--plain). Per repository: mode, Python, resolve and build
 * seconds, bytes downloaded, files the host's cache already had, image bytes, the collect result
 * and passing tests; then the totals of each mode, the held-out repositories apart.
 *
 *   node dist/bench/envs.js --set DIR [--modes none,auto] [--only a,b] [--torch yes|no]
 *     [--plain bench/plain_env.jsonl] [--dir /var/cache/worldline-bench/envs] [--concurrency 2] [--validate-runs 1] [--suite-timeout 1800] [--report-only]
 *
 * Output folders are kept: a rerun with the same --dir reuses what each ledger holds (remove the
 * folder, or the env images, for cold figures).
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { packageRoot } from '../core/package.js';
import { median } from '../core/stats.js';
import { table } from '../core/table.js';
import { Ledger, type LedgerEntry, type StageName } from '../pipeline/runtime/ledger.js';
import type { BuildRecord, ResolveRecord, ValidateRecord } from '../pipeline/runtime/records.js';

interface SetRepo {
  name: string;
  commit: string;
  torch: boolean;
  heldOut: boolean;
}

/** One repository under one mode: what the issue asks to see side by side. */
interface Row {
  repo: SetRepo;
  mode: string;
  python: string;
  resolveS: number | null;
  buildS: number | null;
  downloadedBytes: number | null;
  cacheHits: number | null;
  imageBytes: number | null;
  collectOk: boolean;
  collect: string;
  passed: number;
}

/** The plain script's line (bench/plain_env.ts writes them). */
interface PlainLine {
  repo: string;
  install_s: number;
  install_ok: boolean;
  cache_growth_bytes: number;
  venv_bytes: number;
  collect_ok: boolean;
  collect_error: string | null;
  passed: number | null;
}

const CLI = join(packageRoot, 'dist/bin/worldline.js');
const slugOf = (name: string) => name.replace('/', '__');

function readSet(dir: string): SetRepo[] {
  const [, ...lines] = readFileSync(join(dir, 'repos.tsv'), 'utf8').trim().split('\n');
  return lines.map((l) => {
    const [name, commit, , torch, held] = l.split('\t');
    return { name, commit, torch: torch === 'yes', heldOut: held === 'yes' };
  });
}

const byRepo = <R>(out: string, stage: StageName): Map<string, LedgerEntry<R>> =>
  existsSync(out) ? new Map(new Ledger(out).all<R>(stage).map((e) => [e.unit.url.split('/').at(-1) ?? '', e])) : new Map();

function imageBytes(ref: string | undefined): number | null {
  if (!ref) return null;
  try {
    return Number(execFileSync('docker', ['image', 'inspect', '--format', '{{.Size}}', ref], { encoding: 'utf8' }));
  } catch {
    return null;
  }
}

function runMode(manifest: string, out: string, mode: string, run: { concurrency: number; validateRuns: number; suiteTimeoutS: number }): number {
  const started = Date.now();
  const res = spawnSync(
    process.execPath,
    [
      CLI,
      'run',
      '--manifest',
      manifest,
      '--out',
      out,
      '--stages',
      'clone,resolve,build,validate',
      '--licenses',
      '*',
      // `all`: the host's index for every Python requirement (--index-for all), Debian for what it lacks.
      ...(mode === 'all' ? ['--pip-index', 'auto', '--index-for', 'all'] : ['--pip-index', mode]),
      '--concurrency',
      String(run.concurrency),
      '--validate-runs',
      String(run.validateRuns),
      '--suite-timeout',
      String(run.suiteTimeoutS),
      // Whether a test passes in the offline container is this bench's question; how our runs
      // compare with plain pytest is validate's own (and would run every suite twice).
      '--no-plain-parity',
      '--progress',
      'json',
    ],
    { stdio: ['ignore', 'ignore', 'inherit'] },
  );
  if (res.status !== 0 && res.status !== 1) process.stderr.write(`bench: worldline run (${mode}) exited ${res.status}\n`);
  return (Date.now() - started) / 1000;
}

function rowsOf(repos: SetRepo[], out: string, mode: string): Row[] {
  const resolved = byRepo<ResolveRecord>(out, 'resolve');
  const built = byRepo<BuildRecord>(out, 'build');
  const validated = byRepo<ValidateRecord>(out, 'validate');
  return repos.map((repo) => {
    const r = resolved.get(slugOf(repo.name));
    const b = built.get(slugOf(repo.name));
    const v = validated.get(slugOf(repo.name));
    const collectOk = v?.status === 'ok' && !(v.record?.collect_errors ?? 0);
    const failedAt = [r, b, v].find((e) => e && e.status !== 'ok');
    return {
      repo,
      mode,
      python: r?.record?.python ?? '-',
      resolveS: r?.seconds ?? null,
      buildS: b?.seconds ?? null,
      downloadedBytes: b?.record?.index?.downloaded_bytes ?? (b?.record ? 0 : null),
      cacheHits: b?.record?.index?.cached ?? null,
      imageBytes: imageBytes(b?.record?.image),
      collectOk,
      collect: collectOk
        ? v?.record?.unfinished
          ? `ok (${v.record.unfinished} tests unfinished at the suite timeout or memory limit)`
          : 'ok'
        : failedAt
          ? `${failedAt.stage}: ${failedAt.reason ?? ''}`
          : v
            ? `${v.record?.collect_errors} module(s) did not collect`
            : 'not run',
      passed: v?.status === 'ok' ? (v.record?.passed ?? 0) : 0,
    };
  });
}

function plainRows(repos: SetRepo[], file: string): Row[] {
  const lines = new Map(
    readFileSync(file, 'utf8')
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as PlainLine)
      .map((p) => [p.repo, p]),
  );
  return repos.map((repo) => {
    const p = lines.get(slugOf(repo.name));
    return {
      repo,
      mode: 'plain',
      python: '3.11',
      resolveS: null,
      buildS: p?.install_s ?? null,
      downloadedBytes: p?.cache_growth_bytes ?? null,
      cacheHits: null,
      imageBytes: p?.venv_bytes ?? null,
      collectOk: !!p?.collect_ok,
      collect: p ? (p.collect_ok ? 'ok' : (p.collect_error ?? 'install failed')) : 'not run',
      passed: p?.passed ?? 0,
    };
  });
}

const s1 = (x: number | null) => (x === null ? '-' : x.toFixed(1));
const gb = (x: number | null) => (x === null ? '-' : `${(x / 1e9).toFixed(2)} GB`);
const pct = (n: number, of: number) => `${n} of ${of} (${of ? Math.round((100 * n) / of) : 0}%)`;

/** The kind of cause a row's collect result names, first match wins (issue 41 asks each kind counted). */
const KINDS: [string, RegExp][] = [
  ['not run yet', /^not run$/],
  ['clone', /^clone:/],
  ['index not trusted', /certificate|UnknownIssuer/i],
  ['no wheel for its Python', /no wheels with a matching Python|does not satisfy Python|requires-python/i],
  ['no lock', /gives no lock/],
  ['Debian package', /Unable to locate package|apt-get/],
  ['compiler', /gcc|compil|Failed building wheel/i],
  ['CUDA', /CUDA_HOME|nvcc|libcuda|CUDA driver/i],
  [
    'hub download',
    /huggingface\.co|hf_hub|HF_HUB_OFFLINE|offline mode|LocalEntryNotFound|urlopen|Name or service not known|Temporary failure in name resolution/i,
  ],
  ['time limit', /timed out|within \d+ ?s|timeout/i],
  ['module missing', /No module named|ModuleNotFoundError|ImportError/],
  ['modules did not collect', /module\(s\) did not collect/],
  ['no test passed', /no test passed/],
];

export const kindOf = (collect: string) => KINDS.find(([, re]) => re.test(collect))?.[0] ?? 'other';

/** Rows that did not collect cleanly, counted by kind of cause. */
function whyNot(rows: Row[]): string {
  const counts = new Map<string, number>();
  for (const r of rows.filter((r) => !r.collectOk)) counts.set(kindOf(r.collect), (counts.get(kindOf(r.collect)) ?? 0) + 1);
  return (
    [...counts]
      .sort((a, b) => b[1] - a[1] || a[0].localeCompare(b[0]))
      .map(([k, n]) => `${k} ${n}`)
      .join(', ') || 'none'
  );
}

function totals(rows: Row[]): string {
  const builds = rows.map((r) => r.buildS).filter((x): x is number => x !== null);
  const downloaded = rows.reduce((a, r) => a + (r.downloadedBytes ?? 0), 0);
  return [
    `collect with no error ${pct(rows.filter((r) => r.collectOk).length, rows.length)}`,
    `pass a test ${pct(rows.filter((r) => r.passed > 0).length, rows.length)}`,
    `tests passed ${rows.reduce((a, r) => a + r.passed, 0)}`,
    `median build ${builds.length ? s1(median(builds)) : '-'} s`,
    `downloaded ${gb(downloaded)}`,
  ].join('; ');
}

export async function benchSet(args: {
  set: string;
  modes: string;
  only?: string;
  torch?: string;
  plain: string;
  dir: string;
  concurrency: number;
  validateRuns: number;
  suiteTimeoutS: number;
  reportOnly?: boolean;
}): Promise<void> {
  const setDir = resolve(args.set);
  const only = args.only?.split(',');
  const repos = readSet(setDir).filter(
    (r) => (!only || only.some((o) => r.name.toLowerCase().includes(o.toLowerCase()))) && (!args.torch || r.torch === (args.torch === 'yes')),
  );
  const dir = resolve(args.dir);
  mkdirSync(dir, { recursive: true });
  const lines = readFileSync(join(setDir, 'manifest.jsonl'), 'utf8').trim().split('\n');
  const manifest = join(dir, 'manifest.jsonl');
  writeFileSync(manifest, `${lines.filter((l) => repos.some((r) => l.includes(r.commit))).join('\n')}\n`);
  const modes = args.modes.split(',');
  const rows: Row[] = [];
  const walls: string[] = [];
  for (const mode of modes) {
    const out = join(dir, `out-${mode}`);
    if (!args.reportOnly) walls.push(`${mode} ${s1(runMode(manifest, out, mode, args))} s`);
    rows.push(...rowsOf(repos, out, mode));
  }
  if (existsSync(args.plain)) rows.push(...plainRows(repos, args.plain));
  const report: string[] = [`wall: ${walls.join(', ') || 'not run here (--report-only)'}; plain script from ${args.plain}`, ''];
  for (const [label, held] of [
    ['tuning set', false],
    ['held out (not used for tuning)', true],
  ] as const) {
    const part = rows.filter((r) => r.repo.heldOut === held);
    if (!part.length) continue;
    report.push(`${label}: ${new Set(part.map((r) => r.repo.name)).size} repositories`);
    for (const mode of [...modes, 'plain']) {
      const m = part.filter((r) => r.mode === mode);
      if (m.length) report.push(`  ${mode.padEnd(6)} ${totals(m)}`, `         did not collect: ${whyNot(m)}`);
    }
    report.push(
      '',
      table([
        ['repository', 'mode', 'python', 'resolve s', 'build s', 'downloaded', 'cache hits', 'image', 'collect', 'passed'],
        ...part
          .sort((a, b) => a.repo.name.localeCompare(b.repo.name) || a.mode.localeCompare(b.mode))
          .map((r) => [
            r.repo.name,
            r.mode,
            r.python,
            s1(r.resolveS),
            s1(r.buildS),
            gb(r.downloadedBytes),
            r.cacheHits ?? '-',
            gb(r.imageBytes),
            r.collect.replace(/\s+/g, ' ').slice(0, 70),
            r.passed,
          ]),
      ]),
      '',
    );
  }
  process.stdout.write(`${report.join('\n')}\n`);
}
