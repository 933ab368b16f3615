/**
 * Budgets earned from measurements, through the CLI: a mutant that loops in several FAIL_TO_PASS
 * tests is traced and graded inside budgets derived from the timeouts the mutant check measured
 * (never to a product of options); `--unit-budget` stops a unit mid-forage with the reason, and a
 * rerun with a larger budget continues from the finished pieces; the demo's history repository
 * (examples/make-history-repo.sh) gives an issue-fix task, oracle-resolved and traced around its fix.
 */
import { execFileSync } from 'node:child_process';
import { cpSync, existsSync, mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { packageRoot } from '../core/package.js';
import { readRows } from '../datasets/reader.js';
import { type GradeEnv, gradeSubmission, isGoldChange } from '../pipeline/agent/grading.js';
import type { LedgerEntry } from '../pipeline/runtime/ledger.js';
import { DEFAULTS } from '../pipeline/runtime/options.js';
import type { ForageRecord } from '../pipeline/runtime/records.js';
import { TIMEOUT_EXIT } from '../pipeline/sandbox/suite_run.js';
import type { TaskRecord } from '../schemas/tasks.js';
import type { TraceRecord } from '../schemas/traces.js';
import type { TrajectoryRecord } from '../schemas/trajectories.js';
import { type CliResult, cli, tempDir } from './helpers.js';

/** count_up's first seeded mutant (binary_op, `k += 1` -> `k -= 1`) never returns for n > 0. */
const LOOPY = {
  'loopy/__init__.py': `def count_up(n):
    """Steps from 0 to n, one at a time."""
    k = 0
    steps = 0
    while k < n:
        k += 1
        steps += 1
    return steps
`,
  'tests/test_loopy.py': `from loopy import count_up


def test_small():
    assert count_up(3) == 3


def test_zero():
    assert count_up(0) == 0


def test_larger():
    assert count_up(50) == 50


def test_ten():
    assert count_up(10) == 10
`,
};
const LOOPING = ['tests/test_loopy.py::test_larger', 'tests/test_loopy.py::test_small', 'tests/test_loopy.py::test_ten'];

const forageEntry = (out: string) => {
  const dir = join(out, 'ledger', 'forage');
  return JSON.parse(readFileSync(join(dir, readdirSync(dir)[0]), 'utf8')) as LedgerEntry<ForageRecord>;
};

async function rows<T>(out: string, config: string): Promise<T[]> {
  const all: T[] = [];
  for await (const r of readRows(join(out, 'dataset'), { config })) all.push(r as unknown as T);
  return all;
}

describe('budgets earned from measurements', () => {
  let dir: string;
  let manifest: string;
  let out: string;
  let cut: CliResult;
  let rerun: CliResult;
  // The loopy repository has no licence file: `--licenses '*'` keeps its rows (unknown licences are left out by default).
  const args = () => ['--manifest', manifest, '--out', out, '--validate-runs', '1', '--mutation-tries', '3', '--mutations-per-unit', '3', '--licenses', '*'];

  beforeAll(async () => {
    dir = tempDir('throughput');
    for (const [path, text] of Object.entries(LOOPY)) {
      mkdirSync(join(dir, 'loopy', path, '..'), { recursive: true });
      writeFileSync(join(dir, 'loopy', path), text);
    }
    manifest = join(dir, 'manifest.jsonl');
    writeFileSync(manifest, JSON.stringify({ repo: join(dir, 'loopy') }) + '\n');
    out = join(dir, 'out');
    const first = await cli(['run', '--stages', 'clone,build,validate,trace', ...args()]);
    expect(first.code, first.stderr).toBe(0);
    // The mutant check alone takes longer than 10 s: its first mutant loops in three tests, each
    // stopped only by its (earned, at least 5 s) per-test timeout. So 10 s is spent inside it.
    cut = await cli(['run', '--unit-budget', '10', ...args()]);
    rerun = await cli(['run', '--unit-budget', '900', ...args()]);
  }, 900_000);

  it('--unit-budget stops the unit mid-forage with the reason, and a rerun continues without redoing finished work', () => {
    expect(cut.code, cut.stderr).toBe(1);
    // The cut comes after the mutant check (it outlasts the budget), before anything after it.
    expect(cut.stdout).toMatch(/unit budget of 10 s spent; skipped issue mining and every task/);
    const status = execFileSync(process.execPath, [join(packageRoot, 'dist/bin/worldline.js'), 'status', '--out', out], { encoding: 'utf8' });
    // The rerun finished it; the cut was recorded while it stood (its stdout above) and its
    // pieces were kept: the rerun says so instead of running them again.
    expect(status).not.toMatch(/unit budget/);
    expect(rerun.code, rerun.stderr).toBe(0);
    expect(rerun.stderr).toMatch(/the mutant check done in an earlier run; kept/);
    expect(rerun.stderr).not.toMatch(/trying up to \d+ mutations/);
    // Only forage ran now: clone..trace answered from the ledger.
    expect(rerun.stdout).toMatch(/ ok\s+forage\n/);
    const entry = forageEntry(out);
    expect(entry.status).toBe('ok');
    expect(entry.budget_cut).toBeUndefined();
    expect(existsSync(join(out, 'progress', 'forage'))).toBe(true);
    expect(readdirSync(join(out, 'progress', 'forage'))).toEqual([]);
    expect(status).toMatch(/forage cost \(\d+ tasks\)/);
    for (const phase of ['mutant_check', 'rollout', 'grading', 'container', 'patch_apply', 'pytest_startup', 'tracer_around_tests', 'traced_tests'])
      expect(status).toContain(phase);
  });

  it('a mutant looping in several FAIL_TO_PASS tests is traced and graded inside budgets from its measured timeouts; the task records what was cut', async () => {
    const record = forageEntry(out).record!;
    // The per-test timeout was earned from validate's durations (milliseconds), not the 20 s default.
    expect(record.mutant_test_timeout_s).toBeLessThan(20);
    const tasks = await rows<TaskRecord>(out, 'tasks');
    const loop = tasks.find((t) => t.operator === 'binary_op')!;
    expect(loop, JSON.stringify(tasks.map((t) => t.instance_id))).toBeDefined();
    expect([...loop.FAIL_TO_PASS].sort()).toEqual(LOOPING);
    // Each looping test was traced to the cap, then stopped: recorded, with why.
    const cuts = record.trace_cuts!.filter((c) => c.task_id === loop.instance_id);
    expect(cuts.map((c) => `${c.phase} ${c.node_id}`).sort()).toEqual(LOOPING.map((id) => `before ${id}`));
    for (const c of cuts) expect(c.reason).toMatch(/^trace cap reached by a test known to time out$/);
    const traces = (await rows<TraceRecord>(out, 'traces')).filter((t) => t.task_id === loop.instance_id);
    for (const id of LOOPING) {
      // Before the fix the test's own episode ends where it was stopped (count_up's endless call,
      // past the episode frame cap, is not an episode); after it, count_up returns.
      const before = traces.filter((t) => t.node_id === id && t.phase === 'before');
      expect(
        before.map((t) => t.function),
        id,
      ).toEqual([id.split('::')[1]]);
      expect(before[0].text, id).toContain('count_up(');
      expect(
        traces.some((t) => t.node_id === id && t.phase === 'after' && t.function === 'count_up'),
        id,
      ).toBe(true);
    }
    // Graded, and its cost recorded phase by phase.
    const trajectories = await rows<TrajectoryRecord>(out, 'trajectories');
    expect(trajectories.find((t) => t.task_id === loop.instance_id)?.resolved).toBe(true);
    const cost = record.task_seconds!.find((c) => c.task_id === loop.instance_id)!;
    for (const phase of ['rollout', 'grading', 'pytest_startup', 'traced_tests'] as const) expect(cost[phase], phase).toBeGreaterThan(0);
  });

  it("the oracle's gold submissions are traced in their grading containers, with the rows a fresh trace container makes", async () => {
    const record = forageEntry(out).record!;
    expect(record.task_seconds!.length).toBeGreaterThan(0);
    // No trace container of their own: their container time is grading's.
    for (const c of record.task_seconds!) expect(c.container, c.task_id).toBe(0);
    // With no policy there is no grading container: each task is traced in a fresh one.
    const fresh = join(dir, 'fresh');
    cpSync(out, fresh, { recursive: true });
    const res = await cli(['run', '--stages', 'forage,shard', ...args().map((a) => (a === out ? fresh : a)), '--policy', 'none']);
    expect(res.code, res.stderr).toBe(0);
    for (const c of forageEntry(fresh).record!.task_seconds!) expect(c.container, c.task_id).toBeGreaterThan(0);
    const taskRows = async (o: string) =>
      (await rows<TraceRecord>(o, 'traces'))
        .filter((t) => t.task_id !== null)
        .map((t) => JSON.stringify([t.task_id, t.phase, t.node_id, t.text]))
        .sort();
    const folded = await taskRows(out);
    expect(folded.length).toBeGreaterThan(0);
    expect(await taskRows(fresh)).toEqual(folded);
  }, 900_000);
});

describe('tasks of a unit worked at once', () => {
  let dir: string;
  let manifest: string;
  const args = (out: string) => ['--manifest', manifest, '--out', out, '--validate-runs', '1', '--mutation-tries', '10', '--mutations-per-unit', '3'];

  beforeAll(() => {
    dir = tempDir('task-concurrency');
    manifest = join(dir, 'manifest.jsonl');
    writeFileSync(manifest, JSON.stringify({ repo: join(packageRoot, 'examples/repos/textstats'), env: { vars: { TEXTSTATS_MODE: 'strict' } } }) + '\n');
  });

  it('two at a time (the default) give the rows one at a time gives', async () => {
    const out = join(dir, 'out');
    const first = await cli(['run', ...args(out)]);
    expect(first.code, first.stderr).toBe(0);
    const record = forageEntry(out).record!;
    expect(DEFAULTS.taskConcurrency).toBe(2);
    expect(record.task_seconds!.length).toBeGreaterThanOrEqual(2);
    expect(record.tasks_in_flight_max).toBe(2);
    // The same clone..trace, its forage and shard done again with one task at a time.
    const serial = join(dir, 'serial');
    cpSync(out, serial, { recursive: true });
    for (const stage of ['forage', 'shard']) rmSync(join(serial, 'ledger', stage), { recursive: true, force: true });
    rmSync(join(serial, 'dataset'), { recursive: true, force: true });
    const res = await cli(['run', '--stages', 'forage,shard', ...args(serial), '--task-concurrency', '1']);
    expect(res.code, res.stderr).toBe(0);
    expect(forageEntry(serial).record!.tasks_in_flight_max).toBe(1);
    const tasks = async (o: string) => (await rows<TaskRecord>(o, 'tasks')).map((t) => JSON.stringify(t));
    expect((await tasks(out)).length).toBeGreaterThan(0);
    expect(await tasks(serial)).toEqual(await tasks(out));
    const taskTraces = async (o: string) =>
      (await rows<TraceRecord>(o, 'traces')).filter((t) => t.task_id !== null).map((t) => JSON.stringify([t.task_id, t.phase, t.node_id, t.text]));
    const traced = await taskTraces(out);
    expect(traced.length).toBeGreaterThan(0);
    expect(await taskTraces(serial)).toEqual(traced);
    // Trajectories: the same tool calls and grades. Their observations hold pytest's timings, and so
    // their ids (a hash of the messages) and the shard's order of them differ between any two runs.
    const worked = async (o: string) =>
      (await rows<TrajectoryRecord>(o, 'trajectories'))
        .map((t) => JSON.stringify([t.task_id, t.resolved, t.exit_status, t.steps.map((s) => [s.action, s.exit_code])]))
        .sort();
    expect(await worked(serial)).toEqual(await worked(out));
  }, 900_000);
});

describe("the demo's history repository", () => {
  let repo: string;
  let out: string;
  let res: CliResult;

  beforeAll(async () => {
    const dir = tempDir('demo-history');
    repo = join(dir, 'ledger');
    execFileSync('bash', [join(packageRoot, 'examples', 'make-history-repo.sh'), repo], { stdio: 'ignore' });
    const manifest = join(dir, 'manifest.jsonl');
    writeFileSync(manifest, JSON.stringify({ repo }) + '\n');
    out = join(dir, 'out');
    res = await cli(['run', '--manifest', manifest, '--out', out, '--validate-runs', '1', '--mutation-tries', '4', '--mutations-per-unit', '1']);
  }, 900_000);

  it('gives an issue-fix task: mined, resolved by the oracle, traced before and after its fix', async () => {
    expect(res.code, res.stderr).toBe(0);
    const fixCommit = execFileSync('git', ['-C', repo, 'log', '--format=%H', '--grep', '^Fix apply_discount'], { encoding: 'utf8' }).trim();
    // The history's one commit that changes code and tests together, and it is a bug fix.
    const issues = (await rows<TaskRecord>(out, 'tasks')).filter((t) => t.kind === 'issue_fix');
    expect(issues.map((t) => t.fix_commit)).toEqual([fixCommit]);
    const issue = issues[0];
    expect(issue.FAIL_TO_PASS).toEqual(['tests/test_money.py::test_discount_reduces_the_total']);
    expect(issue.patch).toContain('+    return cents - discount');
    const trajectory = (await rows<TrajectoryRecord>(out, 'trajectories')).find((t) => t.task_id === issue.instance_id);
    expect(trajectory?.resolved).toBe(true);
    const traces = (await rows<TraceRecord>(out, 'traces')).filter((t) => t.task_id === issue.instance_id && t.function === 'apply_discount');
    expect(new Set(traces.map((t) => t.phase))).toEqual(new Set(['before', 'after']));
    // Before the fix the traced call returns the discount (100); after, the discounted total (900).
    const returned = (phase: string) => traces.filter((t) => t.phase === phase).flatMap((t) => t.frames.filter((f) => f.kind === 'return').map((f) => f.value));
    expect(returned('before')).toContain('100');
    expect(returned('after')).toContain('900');
  });

  it('a grading run stopped by its earned budget is graded again under --suite-timeout: load never decides a grade', async () => {
    expect(res.code, res.stderr).toBe(0);
    const task = (await rows<TaskRecord>(out, 'tasks'))[0];
    const env = (suiteTimeoutS: number): GradeEnv => ({
      options: { ...DEFAULTS, out, suiteTimeoutS },
      srcLayout: false,
      vars: {},
      pytestArgs: [],
      hasTimeoutPlugin: false,
      work: join(out, 'work', 'grade-budget', String(suiteTimeoutS)),
      // No pytest starts in a millisecond: this budget always stops the first run.
      suiteBudgetS: 0.001,
      timing: { gradingS: 0 },
    });
    // Where the budget is all there is, it stops the gold patch's run: unresolved, timed out.
    const stopped = await gradeSubmission(task, task.patch, env(0.001));
    expect(stopped.resolved).toBe(false);
    expect(stopped.exit_code).toBe(TIMEOUT_EXIT);
    // With --suite-timeout above it, the stopped run is graded again in a fresh container.
    const regraded = env(DEFAULTS.suiteTimeoutS);
    const gold = await gradeSubmission(task, task.patch, regraded);
    expect(gold.resolved, JSON.stringify(gold.fail_to_pass)).toBe(true);
    expect(regraded.timing!.gradingS).toBeGreaterThan(0);
  }, 300_000);
});

describe('a submission that is the gold fix', () => {
  // h11's `_obsolete_line_fold` mutant (two statements swapped): git's diff (the oracle's
  // submission) and difflib (the gold patch) align the moved line on opposite sides.
  const before = ['            last = bytearray(last)', '            last += line[match.end() :]', '            last += b" "', '        else:'];
  const gitDiff = `diff --git a/h11/_readers.py b/h11/_readers.py
index 2785c13..1348565 100644
--- a/h11/_readers.py
+++ b/h11/_readers.py
@@ -51,4 +51,4 @@ def _obsolete_line_fold(lines):
 ${before[0]}
-${before[1]}
 ${before[2]}
+${before[1]}
 ${before[3]}
`;
  const difflib = `--- a/h11/_readers.py
+++ b/h11/_readers.py
@@ -51,4 +51,4 @@
 ${before[0]}
+${before[2]}
 ${before[1]}
-${before[2]}
 ${before[3]}
`;

  it('is told by its change, not by how a tool wrote the diff; anything else is not', () => {
    expect(isGoldChange(gitDiff, difflib)).toBe(true);
    expect(isGoldChange(difflib, difflib)).toBe(true);
    // Another change at the same place, the same change elsewhere, or nothing at all.
    expect(isGoldChange(gitDiff.replace('+            last += line', '+            last += line[1:]  #'), difflib)).toBe(false);
    expect(isGoldChange(gitDiff.replace('@@ -51,4 +51,4 @@', '@@ -61,4 +61,4 @@'), difflib)).toBe(false);
    expect(isGoldChange(gitDiff.replaceAll('h11/_readers.py', 'h11/_writers.py'), difflib)).toBe(false);
    expect(isGoldChange(null, difflib)).toBe(false);
    expect(isGoldChange('', difflib)).toBe(false);
  });
});
