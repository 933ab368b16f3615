/**
 * `npm run bench:audit`: how long `worldline audit` takes, and how much memory it holds, as the
 * dataset grows. For each size it writes a dataset of about that many GB of Parquet (on disk),
 * mostly traces rows shaped like ours (frames with locals, CWM text) plus repos, tests, tasks and
 * trajectories in proportion, then runs the whole audit (figures, terminal text, HTML) in a child
 * process of its own so its peak RSS (VmHWM; DuckDB's memory is inside the Node process) is the
 * audit's alone.
 *
 *   node dist/bench/audit.js [--gb 0.25,1] [--dir /tmp/worldline-bench-audit] [--keep]
 *
 * Row content comes from SHAKE256 of the row number: deterministic, and about as hard to compress
 * as real locals (hex reprs), so a GB on disk holds a realistic number of rows rather than the
 * millions a repetitive generator would need.
 */
import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { auditDataset } from '../datasets/audit.js';
import { auditHtml } from '../datasets/audit_html.js';
import { formatAudit } from '../datasets/audit_text.js';
import { type DatasetManifest, writeDataset } from '../datasets/dataset_writer.js';
import {
  type RepoRecord,
  reposSchema,
  type TaskRecord,
  type TestRecord,
  type TraceRecord,
  type TrajectoryRecord,
  tasksSchema,
  testsSchema,
  tracesSchema,
  trajectoriesSchema,
} from '../schemas/index.js';

const REPOS = 200;
const SOURCES = [
  '    for item in seq:\n',
  '        result.append(func(item))\n',
  '    if key not in self._cache:\n',
  '    return functools.reduce(binop, seq, initial)\n',
  '    data = bytes(buf[:n])\n',
  '    raise LocalProtocolError("illegal header line")\n',
];
const NAMES = ['self', 'key', 'value', 'result', 'items', 'i', 'n', 'seq', 'func', 'acc'];
const OPERATORS = ['swap_compare', 'off_by_one', 'drop_call', 'negate_if', 'swap_args', 'const_change'];

/** `n` deterministic pseudo-random bytes for `label`. */
const bytes = (label: string, n: number) => createHash('shake256', { outputLength: n }).update(label).digest();

/** Repository `k` of REPOS, skewed (a few large repositories, a long tail) so dominance figures mean something. */
const repoOf = (u: number) => `repo${String(Math.floor(REPOS * u * u)).padStart(3, '0')}`;
const unitOf = (repo: string) => `${repo}-${createHash('sha256').update(repo).digest('hex').slice(0, 8)}`;
const COMMIT = 'b'.repeat(40);

function traceRow(i: number): TraceRecord {
  const r = bytes(`trace:${i}`, 2048);
  const repo = repoOf(r[0] / 256);
  const n = 10 + (r[1] % 50);
  const fn = `${repo}.core.f${r[2]}`;
  const frames = [];
  let text = `<|trace_context_start|>def f${r[2]}():<|frame_sep|>`;
  for (let j = 0; j < n; j++) {
    const kind = j === 0 ? 'call' : j === n - 1 ? 'return' : 'line';
    const at = (16 + j * 24) % 2000;
    const locals = NAMES.slice(0, 2 + (r[at] % 4)).map((name, k) => ({ name, value: r.subarray(at + k * 4, at + k * 4 + 6).toString('hex') }));
    const source = SOURCES[(j + r[3]) % SOURCES.length];
    frames.push({
      kind,
      line: 10 + j,
      depth: r[at + 1] % 3,
      function: fn,
      source,
      locals: kind === 'return' ? [] : locals,
      value: kind === 'return' ? r.subarray(at, at + 8).toString('hex') : null,
    });
    text += `<|${kind}_sep|>${JSON.stringify(Object.fromEntries(locals.map((l) => [l.name, l.value])))}<|frame_sep|>${source}`;
  }
  const task = r[4] < 5 ? `${repo}.bbbbbbbb.${OPERATORS[r[5] % OPERATORS.length]}__${i}` : null;
  return {
    unit_id: unitOf(repo),
    repo,
    commit: COMMIT,
    node_id: `tests/test_m${r[6] % 40}.py::test_${Math.floor(i / 20)}`,
    task_id: task,
    phase: task ? (r[7] % 2 ? 'before' : 'after') : null,
    function: fn,
    file: `${repo}/core.py`,
    line: 10,
    episode_index: i % 20,
    context: `def f${r[2]}():  # << START_OF_TRACE\n    ...\n`,
    frames,
    text,
    frame_count: n,
    line_events: n - 2,
    truncated: r[8] < 8,
    test_episodes_built: 20,
    test_episode_bytes: 20 * text.length,
    test_sampled: null,
    python_version: ['3.11.2', '3.12.8', '3.13.5'][r[9] % 3],
    tracer_version: '1',
    image_id: `sha256:${repo}`,
  };
}

function repoRow(k: number): RepoRecord {
  const repo = `repo${String(k).padStart(3, '0')}`;
  const failed = k % 17 === 0;
  return {
    unit_id: unitOf(repo),
    repo,
    url: `/src/${repo}`,
    ref: null,
    commit: COMMIT,
    python: '3.11',
    history_of: null,
    license: ['MIT', 'Apache-2.0', 'BSD-3-Clause', 'unknown'][k % 4],
    license_file: 'LICENSE',
    size_bytes: 1e6,
    file_count: 100,
    py_file_count: 40,
    src_layout: false,
    env_source: 'manifest',
    env_apt: [],
    env_packages: [],
    env_attempts: 1,
    env_install: null,
    env_index: null,
    env_lock: [],
    image: `worldline/env:${repo}`,
    image_id: `sha256:${repo}`,
    python_version: '3.11.2',
    pytest_version: '8.3.5',
    status: failed ? 'failed' : 'ok',
    failed_stage: failed ? 'build' : null,
    reason: failed ? 'pip install exited 1' : null,
    log: null,
    validate_runs: 2,
    exit_codes: [0, 0],
    collected: 100,
    passed: 100,
    failed: 0,
    error: 0,
    skipped: 0,
    xfailed: 0,
    xpassed: 0,
    flaky: 0,
    unstable_ids: 0,
    stable_passed: 100,
    traceable: true,
    traced_tests: 100,
    trace_episodes: 1000,
    trace_line_events: 10000,
    truncated_tests: 0,
    trace_episode_bytes: 1_000_000,
    trace_sampled_tests: 0,
    trace_determinism_diff: null,
    trace_caps: [1000, 8 << 20, 50_000, 256 << 20],
    plain_compared: 0,
    plain_mismatches: 0,
    parity_mismatches: 0,
    tracer_version: '1',
    build_seconds: 10,
    validate_seconds: 10,
  };
}

function testRow(i: number): TestRecord {
  const r = bytes(`test:${i}`, 8);
  const repo = repoOf(r[0] / 256);
  const flaky = r[1] < 3;
  return {
    unit_id: unitOf(repo),
    repo,
    commit: COMMIT,
    node_id: `tests/test_m${r[2] % 40}.py::test_${i}`,
    file: `tests/test_m${r[2] % 40}.py`,
    outcome: r[3] < 240 ? 'passed' : 'failed',
    run_outcomes: flaky ? ['passed', 'failed'] : ['passed', 'passed'],
    flaky,
    unstable_id: false,
    message: null,
    duration_seconds: r[4] / 100,
    image_id: `sha256:${repo}`,
    python_version: '3.11.2',
    pytest_version: '8.3.5',
  };
}

function taskRow(i: number): TaskRecord {
  const r = bytes(`task:${i}`, 64);
  const repo = repoOf(r[0] / 256);
  const issue = r[1] < 135;
  const operator = issue ? null : OPERATORS[r[2] % OPERATORS.length];
  return {
    instance_id: `${repo}.bbbbbbbb.${operator ?? 'issue'}__${i}`,
    kind: issue ? 'issue_fix' : 'mutation_fix',
    repo,
    unit_id: unitOf(repo),
    base_commit: COMMIT,
    patch: `--- a/x.py\n+++ b/x.py\n@@ -1 +1 @@\n-${r.subarray(8, 24).toString('hex')}\n+${r.subarray(24, 40).toString('hex')}\n`,
    test_patch: '',
    bug_patch: issue ? null : r.subarray(40, 64).toString('hex'),
    problem_statement: `fix ${r.toString('hex')}`,
    hints_text: null,
    FAIL_TO_PASS: [`tests/test_m1.py::test_${i}`],
    PASS_TO_PASS: [`tests/test_m2.py::test_${i}`],
    operator,
    mutated_function: operator ? `${repo}.f${i}` : null,
    fix_commit: issue ? COMMIT : null,
    issue_number: issue ? String(i) : null,
    image_id: `sha256:${repo}`,
    python_version: '3.11.2',
    fix_confidence: issue ? 0.7 : null,
    fix_signals: issue ? ['behavioural_failures:1/1'] : null,
    statement_source: issue ? 'failing_tests' : null,
    aux_patch: null,
  };
}

function trajectoryRow(i: number): TrajectoryRecord {
  const task = taskRow(i >> 1);
  const r = bytes(`trajectory:${i}`, 1024);
  const openai = i % 2 === 1;
  const turns = 1 + (r[0] % 30);
  return {
    trajectory_id: `${task.instance_id}/${i}`,
    task_id: task.instance_id,
    kind: task.kind,
    repo: task.repo,
    policy: openai ? 'openai' : 'oracle',
    model: openai ? 'qwen-32b' : null,
    messages: Array.from({ length: 4 }, (_, k) => ({
      role: k % 2 ? 'assistant' : 'user',
      content: r.subarray(k * 200, k * 200 + 200).toString('hex'),
      name: null,
      tool_call_id: null,
      tool_calls: [],
    })),
    steps: [{ action: 'bash {"cmd": "pytest -x"}', observation: r.subarray(800, 1000).toString('hex'), exit_code: 1, duration_seconds: 1.5 }],
    submission: task.patch,
    resolved: r[1] < 180,
    reward: r[1] < 180 ? 1 : 0,
    exit_status: r[1] < 180 ? 'submitted' : ['max_turns', 'timeout', 'submitted'][r[2] % 3],
    turns,
    prompt_tokens: openai ? turns * 2000 + r[3] * 10 : 0,
    completion_tokens: openai ? turns * 150 + r[4] : 0,
    wall_seconds: turns * 3,
    max_turns: 30,
    max_tokens: 200000,
    max_wall_seconds: 3600,
    image_id: `sha256:${task.repo}`,
    tool_versions: 'worldline 0.1.0; agent_tools 000000000000',
    seed: 0,
    replay_of: null,
    replay_exact: null,
    replay_diffs: [],
  };
}

function* range<T>(n: number, row: (i: number) => T): Generator<T> {
  for (let i = 0; i < n; i++) yield row(i);
}

interface Sizes {
  traces: number;
  tests: number;
  tasks: number;
  trajectories: number;
}

async function writeBench(dir: string, s: Sizes): Promise<DatasetManifest> {
  return writeDataset(dir, [
    { schema: reposSchema, rows: range(REPOS, repoRow) },
    { schema: testsSchema, rows: range(s.tests, testRow) },
    { schema: tracesSchema, rows: range(s.traces, traceRow) },
    { schema: tasksSchema, rows: range(s.tasks, taskRow) },
    { schema: trajectoriesSchema, rows: range(s.trajectories, trajectoryRow) },
  ]);
}

/** Tests, tasks and trajectories in proportion to the traces, as a run of many repositories has them. */
const proportional = (traces: number): Sizes => ({
  traces,
  tests: Math.round(traces / 2),
  tasks: Math.round(traces / 25),
  trajectories: Math.round((2 * traces) / 25),
});

const onDisk = (m: DatasetManifest) => m.shards.reduce((s, x) => s + x.bytes, 0);

/** This process's peak resident set (VmHWM), MB. */
function peakRssMB(): number {
  const m = /^VmHWM:\s+(\d+) kB/m.exec(readFileSync('/proc/self/status', 'utf8'));
  return m ? Number(m[1]) / 1024 : NaN;
}

interface AuditRun {
  seconds: number;
  peakRssMB: number;
  verdict: string;
  episodes: number;
}

/** The child: one whole audit (every figure, the text and the HTML), timed, with its own peak RSS. */
async function child(dataset: string): Promise<AuditRun> {
  const t0 = performance.now();
  const report = await auditDataset(dataset);
  formatAudit(report);
  writeFileSync(join(dataset, '..', 'audit.html'), auditHtml(report));
  return { seconds: (performance.now() - t0) / 1000, peakRssMB: peakRssMB(), verdict: report.mix.verdict, episodes: report.traces.episodes };
}

function arg(name: string, fallback: string): string {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 && process.argv[i + 1] !== undefined ? process.argv[i + 1] : fallback;
}

async function main(): Promise<void> {
  if (process.argv.includes('--child')) {
    console.log(JSON.stringify(await child(arg('child', ''))));
    return;
  }
  const sizes = arg('gb', '0.25,1').split(',').map(Number);
  if (sizes.some((g) => !(g > 0))) throw new Error('--gb takes positive sizes, comma-separated');
  const dir = arg('dir', '/tmp/worldline-bench-audit');
  rmSync(dir, { recursive: true, force: true });
  mkdirSync(dir, { recursive: true });
  // Calibration: Parquet bytes per trace row (with its share of the other configs), from a small dataset.
  const sample = 4000;
  const bytesPerTrace = onDisk(await writeBench(join(dir, 'calibration', 'dataset'), proportional(sample))) / sample;
  rmSync(join(dir, 'calibration'), { recursive: true, force: true });
  console.log(`${(bytesPerTrace / 1024).toFixed(1)} KB of Parquet per trace row (with its share of tests, tasks, trajectories)`);
  const results: { gb: number; rows: Record<string, number>; uncompressed: number; genSeconds: number; runs: AuditRun[] }[] = [];
  for (const gb of sizes) {
    const dataset = join(dir, `${gb}gb`, 'dataset');
    const t0 = performance.now();
    const manifest = await writeBench(dataset, proportional(Math.round((gb * 1e9) / bytesPerTrace)));
    const genSeconds = (performance.now() - t0) / 1000;
    const rows = Object.fromEntries(Object.entries(manifest.configs).map(([c, v]) => [c, v.rows]));
    const uncompressed = Object.values(manifest.configs).reduce((s, c) => s + c.uncompressed_bytes, 0);
    console.log(
      `${gb} GB: ${(onDisk(manifest) / 1e9).toFixed(2)} GB of Parquet (${(uncompressed / 1e9).toFixed(2)} GB uncompressed), ${manifest.shards.length} shards, written in ${genSeconds.toFixed(0)} s`,
    );
    // Two runs, to show the spread.
    const runs: AuditRun[] = [];
    for (let k = 0; k < 2; k++) {
      const res = spawnSync(process.execPath, [fileURLToPath(import.meta.url), '--child', dataset], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'] });
      if (res.status !== 0) throw new Error(`audit of ${dataset} failed (exit ${res.status ?? res.signal})`);
      const run = JSON.parse(res.stdout.trim().split('\n').at(-1)!) as AuditRun;
      if (run.episodes !== rows.traces) throw new Error(`the audit counted ${run.episodes} episodes, the manifest says ${rows.traces}`);
      runs.push(run);
      console.log(`  audit ${k + 1}: ${run.seconds.toFixed(2)} s, peak RSS ${run.peakRssMB.toFixed(0)} MB; ${run.verdict}`);
    }
    results.push({ gb: onDisk(manifest) / 1e9, rows, uncompressed, genSeconds, runs });
  }
  console.log('\n| Parquet GB | uncompressed GB | traces rows | tests | tasks | trajectories | audit s (two runs) | peak RSS MB (two runs) |');
  console.log('|---|---|---|---|---|---|---|---|');
  for (const r of results) {
    console.log(
      `| ${r.gb.toFixed(2)} | ${(r.uncompressed / 1e9).toFixed(2)} | ${r.rows.traces} | ${r.rows.tests} | ${r.rows.tasks} | ${r.rows.trajectories} | ${r.runs.map((x) => x.seconds.toFixed(2)).join(', ')} | ${r.runs.map((x) => x.peakRssMB.toFixed(0)).join(', ')} |`,
    );
  }
  if (!process.argv.includes('--keep')) rmSync(dir, { recursive: true, force: true });
}

await main();
