/**
 * Mutation-fix tasks (CWM's mutate-fix, SWE-smith's procedural bugs): mutate a function that
 * passing, non-flaky tests reach (known from the traces), run those tests, and keep the mutant
 * only when at least one goes pass -> fail. The gold fix is the reverse of the bug patch.
 */
import { createHash } from 'node:crypto';
import { existsSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { readLines } from '../../core/jsonl.js';
import type { TaskRecord } from '../../schemas/tasks.js';
import type { TestRecord } from '../../schemas/tests.js';
import type { TraceRecord } from '../../schemas/traces.js';
import { earnedS, type Measured, measuredFailing, measuredStartupS, validatedDurations } from '../runtime/budgets.js';
import { outLayout } from '../runtime/layout.js';
import type { BuildRecord, CloneRecord } from '../runtime/records.js';
import { type StageContext, UnitFailure } from '../runtime/stage.js';
import { OUR_PYTHON } from '../sandbox/our_python.js';
import { foldReport, signedLines } from '../sandbox/pytest_report.js';
import { readResult } from '../sandbox/results.js';
import { freshWork, runSandboxed } from '../sandbox/sandbox.js';
import { pytestCommand, testWallLimitS, withoutTestPaths, writeReportKey } from '../sandbox/suite_run.js';

/** Must match the operators of tracers/worldline_mutate. */
export const OPERATORS = [
  'remove_body_part',
  'remove_body',
  'remove_param',
  'reorder_call_args',
  'swap_variables',
  'remove_import',
  'remove_return',
  'binary_op',
  'unary_op',
  'bool_op',
  'compare_op',
  'invert_if',
  'remove_loop',
  'remove_assign',
  'shuffle_statements',
  'change_constant',
] as const;

const TEST_FILE = /(^|\/)(tests?|testing)\/|(^|\/)test_[^/]*\.py$|_test\.py$|(^|\/)conftest\.py$/;
/** Tests run per candidate at most, so a widely used helper does not make every try slow. */
const MAX_TESTS_PER_CANDIDATE = 25;

export interface Candidate {
  file: string;
  qualname: string;
  operator: string;
  seed: number;
  tests: string[];
}

const rank = (seed: number, ...parts: string[]) =>
  createHash('sha256')
    .update([seed, ...parts].join('\0'))
    .digest('hex');

/** Functions of the repository's own (non-test) code, with the stable passing tests that reach them. */
export function reachedFunctions(out: string, unitId: string): Map<string, { file: string; qualname: string; tests: Set<string> }> {
  const stable = new Set<string>();
  for (const line of readLines(outLayout.part(out, 'tests', unitId))) {
    const t = JSON.parse(line) as TestRecord;
    if (!t.flaky && t.run_outcomes.every((o) => o === 'passed')) stable.add(t.node_id);
  }
  const reached = new Map<string, { file: string; qualname: string; tests: Set<string> }>();
  const part = outLayout.part(out, 'traces', unitId);
  if (!existsSync(part)) return reached;
  for (const line of readLines(part)) {
    const ep = JSON.parse(line) as TraceRecord;
    if (
      !stable.has(ep.node_id) ||
      TEST_FILE.test(ep.file) ||
      ep.file.startsWith('/') ||
      /<(lambda|listcomp|dictcomp|setcomp|genexpr|module)>/.test(ep.function)
    )
      continue;
    const key = `${ep.file}::${ep.function}`;
    let entry = reached.get(key);
    if (!entry) {
      entry = { file: ep.file, qualname: ep.function, tests: new Set() };
      reached.set(key, entry);
    }
    entry.tests.add(ep.node_id);
  }
  return reached;
}

/** A seeded, deterministic order over (function, operator) pairs; the first `tries` are tried. */
export function planCandidates(reached: ReturnType<typeof reachedFunctions>, seed: number, tries: number): Candidate[] {
  const pairs: (Candidate & { order: string })[] = [];
  for (const { file, qualname, tests } of reached.values()) {
    const sorted = [...tests].sort();
    const chosen =
      sorted.length > MAX_TESTS_PER_CANDIDATE
        ? sorted
            .sort((a, b) => rank(seed, a).localeCompare(rank(seed, b)))
            .slice(0, MAX_TESTS_PER_CANDIDATE)
            .sort()
        : sorted;
    for (const operator of OPERATORS) {
      const order = rank(seed, file, qualname, operator);
      pairs.push({ file, qualname, operator, seed: parseInt(order.slice(0, 8), 16), tests: chosen, order });
    }
  }
  return pairs
    .sort((a, b) => a.order.localeCompare(b.order))
    .slice(0, tries)
    .map(({ order: _order, ...c }) => c);
}

/** A mutant's output is never read: the cap bounds it while written, and the driver deletes it after each run. */
const MUTANT_OUTPUT_CAP = 1 << 20;

interface DriverResult {
  index: number;
  status: 'applied' | 'no_site' | 'error';
  error?: string;
  description?: string;
  bug_patch?: string;
  fix_patch?: string;
  exit_code?: number | null;
  timed_out?: boolean;
  report?: string;
  /** Files under /repo this candidate's tests changed, put back by the driver before the next one. */
  tree_restored?: string[];
}

export interface MutationOutcome {
  tasks: TaskRecord[];
  /** What each kept task's tests did on its task state in the mutant check, by task id. */
  measured: Record<string, Record<string, Measured>>;
  /** The per-test timeout the mutant check earned from validate's durations. */
  testTimeoutS: number;
  /** The mutant check's container wall seconds. */
  seconds: number;
  tried: number;
  applied: number;
  noSite: number;
  /** Applied mutants no reaching test noticed. */
  survived: number;
  /** Candidates whose tests changed /repo (restored before the next), with the files: a hostile or careless suite. */
  treeRestored: { index: number; files: string[] }[];
  byOperator: Record<string, number>;
}

export function problemStatement(failures: { nodeid: string; message: string | null }[]): string {
  const lines = failures.slice(0, 10).map((f) => `- ${f.nodeid}${f.message ? `: ${f.message.split('\n')[0].slice(0, 300)}` : ''}`);
  const more = failures.length > 10 ? [`- ... and ${failures.length - 10} more`] : [];
  return [
    'These tests fail, and they passed before a recent change to the code:',
    '',
    ...lines,
    ...more,
    '',
    'Find the cause in the code and fix it. Do not change the tests.',
  ].join('\n');
}

/** Runs the candidates in one container of the unit's image and builds the kept tasks. */
export async function mutationTasks(ctx: StageContext, clone: CloneRecord, build: BuildRecord): Promise<MutationOutcome> {
  const { unit, options } = ctx;
  const candidates = planCandidates(reachedFunctions(options.out, unit.id), options.forageSeed, options.mutationTries);
  // A mutant's tests get the time validate measured for the slowest of them, earned, never more
  // than --mutant-test-timeout; a candidate's run pytest's measured start-up (earned) plus the sum
  // of its tests' timeouts, so pytest-timeout names the test that looped before the run is killed.
  const validated = validatedDurations(options.out, unit.id);
  const slowest = Math.max(0, ...candidates.flatMap((c) => c.tests.map((t) => validated.get(t)?.seconds ?? options.mutantTestTimeoutS)));
  const testTimeoutS = Math.min(options.mutantTestTimeoutS, earnedS(slowest));
  const outcome: MutationOutcome = {
    tasks: [],
    measured: {},
    testTimeoutS,
    seconds: 0,
    tried: candidates.length,
    applied: 0,
    noSite: 0,
    survived: 0,
    treeRestored: [],
    byOperator: {},
  };
  if (!candidates.length) return outcome;
  const work = freshWork(outLayout.work(options.out, 'forage', unit.id));
  try {
    const pytest = pytestCommand(withoutTestPaths(unit.env.pytest_args), testTimeoutS, build.pytest_timeout);
    const startupS = earnedS(measuredStartupS(ctx));
    const timed = candidates.map((c) => ({ ...c, timeout: startupS + testTimeoutS * c.tests.length }));
    const containerS = timed.reduce((s, c) => s + c.timeout, 60);
    writeFileSync(
      join(work, 'plan.json'),
      JSON.stringify({
        pytest,
        timeout: testTimeoutS * MAX_TESTS_PER_CANDIDATE + 60,
        test_limit: testWallLimitS(testTimeoutS),
        output_cap: MUTANT_OUTPUT_CAP,
        max_failing: options.mutationsPerUnit,
        candidates: timed,
      }),
    );
    const key = writeReportKey(work);
    const started = Date.now();
    await runSandboxed({
      image: build.image_id,
      // On our own interpreter like validate's runner: it holds the key that signs the results and the reports.
      cmd: [OUR_PYTHON, '/worldline/lib/forage_mutations.py', '/worldline/out/plan.json', '/worldline/out'],
      work,
      vars: unit.env.vars,
      srcLayout: clone.src_layout,
      limits: options,
      timeoutMs: containerS * 1000,
      labels: { 'worldline.unit': unit.id, 'worldline.stage': 'forage' },
    });
    outcome.seconds = (Date.now() - started) / 1000;
    const { lines: results, tampered } = signedLines<DriverResult>(
      readResult(work, 'results.jsonl') ?? '',
      { key, file: 'results.jsonl' },
      'the mutant results',
      'the mutant driver',
    );
    if (tampered) throw new UnitFailure(`mutant checks: ${tampered}`);
    const seen = new Set<string>();
    for (const r of results) {
      const cand = candidates[r.index];
      if (r.tree_restored?.length) outcome.treeRestored.push({ index: r.index, files: r.tree_restored });
      if (r.status !== 'applied') {
        if (r.status === 'no_site') outcome.noSite += 1;
        continue;
      }
      outcome.applied += 1;
      // The candidate's own report (the driver runs candidate i as run i), checked like every result and signed for that name.
      const file = `report-${r.index}.jsonl`;
      const run = foldReport(readResult(work, file) ?? '', r.timed_out ? null : (r.exit_code ?? null), Boolean(r.timed_out), { key, file });
      // A conftest that rewrites a mutant's report would make tasks of mutants no test catches.
      if (run.problem?.startsWith('the report was tampered')) throw new UnitFailure(`mutant check ${r.index}: ${run.problem}`);
      const byId = new Map(run.tests.map((t) => [t.nodeid, t]));
      const failing = cand.tests.filter((id) => byId.get(id)?.outcome !== 'passed');
      const passing = cand.tests.filter((id) => byId.get(id)?.outcome === 'passed');
      if (!failing.length) {
        outcome.survived += 1;
        continue;
      }
      const hash = createHash('sha256').update(r.bug_patch!).digest('hex').slice(0, 8);
      const instanceId = `${unit.slug}.${clone.commit.slice(0, 8)}.${cand.operator}__${hash}`;
      if (seen.has(instanceId)) continue;
      seen.add(instanceId);
      outcome.byOperator[cand.operator] = (outcome.byOperator[cand.operator] ?? 0) + 1;
      outcome.measured[instanceId] = Object.fromEntries(failing.map((id) => [id, measuredFailing(byId.get(id), testTimeoutS)]));
      outcome.tasks.push({
        instance_id: instanceId,
        kind: 'mutation_fix',
        repo: unit.repo,
        unit_id: unit.id,
        base_commit: clone.commit,
        patch: r.fix_patch!,
        test_patch: '',
        bug_patch: r.bug_patch!,
        problem_statement: problemStatement(
          failing.map((id) => ({ nodeid: id, message: byId.get(id)?.message ?? (r.timed_out ? 'timed out' : 'did not run') })),
        ),
        hints_text: null,
        FAIL_TO_PASS: failing,
        PASS_TO_PASS: passing,
        operator: cand.operator,
        mutated_function: cand.qualname,
        fix_commit: null,
        issue_number: null,
        image_id: build.image_id,
        python_version: build.python_version,
        fix_confidence: null,
        fix_signals: null,
        statement_source: null,
        aux_patch: null,
      });
      if (outcome.tasks.length >= options.mutationsPerUnit) break;
    }
    return outcome;
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
}
