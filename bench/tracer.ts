/**
 * npm run bench:tracer — our tracer against untraced pytest and a naive tracer (settrace on every
 * file, every local repr'd on every event, as PySnooper does), side by side in one run, on
 * (a) a CPU-bound pure-Python suite, (b) two real corpus suites, (c) a thin wrapper around
 * networkx whose tests spend their time outside the repository. Each suite's variants run
 * interleaved over rounds inside one container; medians are compared, of whole pytest runs and of
 * the time inside tests (so start-up and collection do not hide a tracer's cost). Every tracer stops
 * a test at the same event cap (equal work); beside the slowdowns, raw events and output bytes per
 * second of test time.
 * Options: --python 3.13,3.11 --rounds 5 --budget 600 (seconds a variant may take per run; past it, a
 * lower bound is printed as ">=") --baseline DIR (a tracers/ folder of an earlier revision, e.g. a
 * `git worktree` of main: timed as "before" in the same interleaved rounds; DIR comes first on the
 * path, so the accelerator's modules put in it, built for the image's Python (e.g. copied out of the
 * earlier base image's /usr/lib/python3/dist-packages), are imported instead of the image's own: a
 * change to the C is then measured too, where without them "before" runs the image's)
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { packageRoot } from '../core/package.js';
import { median } from '../core/stats.js';
import { table } from '../core/table.js';
import { runPipeline } from '../pipeline/run.js';
import { Ledger } from '../pipeline/runtime/ledger.js';
import { DEFAULTS } from '../pipeline/runtime/options.js';
import type { BuildRecord, CloneRecord } from '../pipeline/runtime/records.js';
import { runContainer } from '../pipeline/sandbox/sandbox.js';
import { tracersDir } from '../pipeline/sandbox/tracers.js';
import { materializeCorpus } from '../test/corpus.js';

const { values } = parseArgs({
  options: {
    python: { type: 'string', default: '3.13,3.11' },
    rounds: { type: 'string', default: '5' },
    budget: { type: 'string', default: '600' },
    work: { type: 'string', default: '/tmp/worldline-bench-tracer' },
    baseline: { type: 'string' },
  },
});
const rounds = Number(values.rounds);
const work = values.work!;
mkdirSync(work, { recursive: true });

const corpus = await materializeCorpus(['toolz', 'h11'], join(work, 'corpus'));
// naiveToNull: the naive tracer writes to /dev/null, since one test's lines (several GB: every local
// of every frame, networkx's included) outgrow the container's 1 GiB /tmp; that spares it the
// writes ours pays for, so its ratio there understates ours
const suites = [
  { name: '(a) cpuwork: CPU-bound pure Python', repo: join(packageRoot, 'bench/fixtures/cpuwork'), apt: [] as string[], naiveToNull: true },
  { name: '(b) toolz (real corpus)', repo: corpus[0].path, apt: [], naiveToNull: false },
  { name: '(b) h11 (real corpus)', repo: corpus[1].path, apt: [], naiveToNull: false },
  { name: '(c) netwrap: thin wrapper around networkx', repo: join(packageRoot, 'bench/fixtures/netwrap'), apt: ['python3-networkx'], naiveToNull: true },
];

for (const python of values.python!.split(',')) {
  const out = join(work, `out-${python}`);
  const manifest = join(work, `manifest-${python}.jsonl`);
  writeFileSync(manifest, suites.map((s) => JSON.stringify({ repo: s.repo, python, env: { apt: s.apt } })).join('\n') + '\n');
  const run = await runPipeline(manifest, ['clone', 'build'], { ...DEFAULTS, out }, (m) => process.stderr.write(`${m}\n`));
  if (run.exitCode !== 0)
    throw new Error(
      `building the benchmark images failed: ${run.units
        .map((u) => u.reason)
        .filter(Boolean)
        .join('; ')}`,
    );
  const ledger = new Ledger(out);
  const rows: (string | number)[][] = [];
  for (const [i, suite] of suites.entries()) {
    const unit = run.units[i].unit;
    const build = ledger.get<BuildRecord>('build', unit.id)!.record!;
    const clone = ledger.get<CloneRecord>('clone', unit.id)!.record!;
    process.stderr.write(`timing ${suite.name} on ${python} (${rounds} rounds)\n`);
    const res = await runContainer({
      image: build.image_id,
      cmd: ['python3', '/worldline/bench/driver.py', String(rounds), String(Number(values.budget))],
      env: {
        PYTHONPATH: `/worldline/lib:/worldline/bench${clone.src_layout ? ':/repo/src' : ''}`,
        PYTHONHASHSEED: '0',
        PYTHONDONTWRITEBYTECODE: '1',
        ...(suite.naiveToNull ? { NAIVE_OUT: '/dev/null' } : {}),
      },
      binds: [
        `${tracersDir}:/worldline/lib:ro`,
        `${join(packageRoot, 'bench')}:/worldline/bench:ro`,
        ...(values.baseline ? [`${resolve(values.baseline)}:/worldline/baseline:ro`] : []),
      ],
      limits: { memoryBytes: 4 * 1024 ** 3, pids: 512, cpus: 2 },
      timeoutMs: (Number(values.budget) * 5 * rounds + 600) * 1000,
    });
    const line = res.output.split('\n').find((l) => l.startsWith('{'));
    if (!line) throw new Error(`${suite.name}: the driver printed no result: ${res.output.slice(-500)}`);
    const r = JSON.parse(line) as {
      times: Record<string, number[]>;
      in_test: Record<string, number[]>;
      exit_codes: Record<string, number>;
      capped: Record<string, boolean>;
      written: Record<string, [number, number | null]>;
      failed?: Record<string, string>;
      python: string;
    };
    for (const [k, why] of Object.entries(r.failed ?? {})) process.stderr.write(`${suite.name}, ${k}: a round gave no sample (${why})\n`);
    const parity = new Set(Object.values(r.exit_codes)).size === 1 ? 'same' : JSON.stringify(r.exit_codes);
    // a variant whose every round failed has no samples: its cells show '-'
    const medians = (samples: Record<string, number[]>) =>
      Object.fromEntries(
        Object.entries(samples)
          .filter(([, v]) => v.length > 0)
          .map(([k, v]) => [k, median(v)]),
      );
    const inTest = medians(r.in_test);
    // events/s and MB/s of test time, from the variant's last round
    const rate = (k: string) => {
      const w = r.written[k];
      if (!w) return '-';
      const bytes = w[1] === null ? 'to /dev/null' : `${(w[1] / 1e6 / inTest[k]).toFixed(1)} MB/s`;
      return `${Math.round(w[0] / inTest[k])} ev/s, ${bytes}`;
    };
    for (const [what, samples] of [
      ['in tests', r.in_test],
      ['whole run', r.times],
    ] as const) {
      const m = medians(samples);
      const atLeast = (k: string) => (r.capped[k] ? '>= ' : '');
      const cell = (k: string) => (k in m ? `${atLeast(k)}${m[k].toFixed(2)} (${(m[k] / m.untraced).toFixed(1)}x)` : '-');
      rows.push([
        suite.name,
        r.python,
        what,
        m.untraced.toFixed(2),
        cell('ours'),
        cell('ours-settrace'),
        cell('naive'),
        cell('before'),
        // no naive sample (every round failed): no ratio to show
        'naive' in m ? `${atLeast('naive')}${(m.naive / m.ours).toFixed(1)}x` : '-',
        what === 'in tests' ? rate('ours') : '',
        what === 'in tests' ? rate('naive') : '',
        parity,
      ]);
    }
  }
  process.stdout.write(
    `\nTracer overhead, median of ${rounds} interleaved rounds, wall seconds (slowdown vs untraced) of the tests alone (setup, call, teardown: no start-up or collection) and of the whole pytest run; every tracer stops a test at the same event cap\n`,
  );
  process.stdout.write(
    table([
      [
        'suite',
        'python',
        'timed',
        'untraced',
        'ours (auto backend)',
        'ours (settrace)',
        'naive',
        'before (--baseline)',
        'naive / ours',
        'ours: output',
        'naive: output',
        'exit codes',
      ],
      ...rows,
    ]) + '\n',
  );
}
