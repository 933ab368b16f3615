/**
 * Issue-fix tasks mined from a repository's own git history (SWE-bench's recipe, on our images):
 * the candidates of issue_candidates.ts, each run in a fresh container of the unit's image.
 * FAIL_TO_PASS and PASS_TO_PASS come from running the touched test modules before the
 * fix (task state) and after it (task state + gold patch) in the unit's image, each touched module
 * once per state; a candidate is kept only when at least one test goes fail -> pass for a
 * behavioural reason (fix_evidence.ts: a test failing only on a name the fix adds is a feature).
 * Every candidate's fate (kept, dropped or skipped, why, and its seconds) is in the outcome.
 */
import { createHash } from 'node:crypto';
import { existsSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { git } from '../../core/git.js';
import type { TaskRecord } from '../../schemas/tasks.js';
import { type Measured, measuredFailing } from '../runtime/budgets.js';
import { mirrorPath, outLayout } from '../runtime/layout.js';
import type { BuildRecord, CandidateFate, CloneRecord } from '../runtime/records.js';
import { type StageContext, UnitFailure } from '../runtime/stage.js';
import type { SuiteRun } from '../sandbox/pytest_report.js';
import { readLogTail } from '../sandbox/results.js';
import { freshWork, runSandboxed } from '../sandbox/sandbox.js';
import { pytestCommand, readSteps, type Step, type StepOutcome, stepRun, stepsRunner, testWallLimitS, withoutTestPaths } from '../sandbox/suite_run.js';
import { collectionErrorText, judgeFix, loadTimeouts, messageSignals, patchSignals } from './fix_evidence.js';
import { type CandidateOptions, candidatePatches, findIssueCandidates } from './issue_candidates.js';
import { type IssueText, matchIssue } from './issue_export.js';
import { chooseStatement } from './issue_statement.js';
import type { StatementInput } from './statement_model.js';

interface IssueMiningOptions extends CandidateOptions {
  /** The issue export, by number (see readIssueExport); without it the statement is written from the failing tests. */
  issues?: Map<number, IssueText>;
  /** Per-test timeout (pytest-timeout) while running; the code before a fix may hang. Default: options.mutantTestTimeoutS. */
  testTimeoutS?: number;
  /** Runs after the fix; a test must pass in every one to count (flaky ones drop out). Default 1: grading reruns them. */
  afterRuns?: number;
  /** A candidate whose gold and test patches (the code) exceed this many bytes is dropped. Default 1 MB. */
  maxPatchBytes?: number;
  /**
   * A candidate whose bug patch (the unit's commit back to the fix's parent) exceeds this many
   * bytes is dropped: an old parent far below the unit's commit; dataset rows have a size cap. Default 8 MB.
   */
  maxBugPatchBytes?: number;
  /** Writes a statement where no issue is linked (statement_model.ts); null or a failure falls back to the failing tests. */
  writeStatement?: (input: StatementInput) => Promise<string | null>;
}

export interface IssueMiningOutcome {
  tasks: TaskRecord[];
  /** Candidates found in history and run. */
  candidates: number;
  /** Candidates dropped, each with why. */
  dropped: { fix_commit: string; reason: string }[];
  /** Every candidate and skipped commit: kept, dropped or skipped, why, and the seconds it took. */
  fates: CandidateFate[];
  /** By task: what each FAIL_TO_PASS test did before the fix (its traces' budgets there). */
  measured: Record<string, Record<string, Measured>>;
}

interface CandidateRun {
  failed: string | null;
  /** Every test passed before the fix (pytest's exit status 0): the steps after it were not run. */
  allPassedBefore: boolean;
  index: string;
  before: SuiteRun | null;
  /** The before run's collection errors in full, by module (see collectionErrorText). */
  beforeCollection: Map<string, string>;
  after: SuiteRun[];
}

/** A step's output in a drop reason: its first lines. */
const firstLines = (text: string | undefined) => (text ?? '').trim().split('\n').slice(0, 2).join(' | ');

/**
 * The candidate's steps for the runner: the task state (bug and test patches, the index as
 * staged), the touched modules before the fix, the gold patch, and the runs after it. A script
 * that fails ends the list; `why` says what its failure means.
 */
function candidateSteps(pytest: string[], modules: string[], suiteTimeoutS: number, testLimitS: number, afterRuns: number): Step[] {
  const O = '/worldline/out';
  const run = (name: string): Step => ({ name, run: [...pytest, ...modules], timeoutS: suiteTimeoutS, testLimitS });
  return [
    { name: 'bug', sh: `if [ -s ${O}/bug.patch ]; then git apply --whitespace=nowarn ${O}/bug.patch; fi` },
    // Stage exactly the paths the bug patch touched, so the index can be checked against the parent's tree.
    { name: 'stage', sh: `if [ -s ${O}/changed.z ]; then git --literal-pathspecs add -A -f --pathspec-from-file=${O}/changed.z --pathspec-file-nul; fi` },
    { name: 'index', sh: 'git ls-files -s -z' },
    { name: 'test', sh: `git apply --whitespace=nowarn ${O}/test.patch` },
    run('before'),
    // pytest exits 0 only when every test it collected passed: then no test can go from fail to
    // pass, and the gold patch and the runs after it are not needed (the list ends here).
    { name: 'gate', sh: `test "$(cat ${O}/exit-before 2>/dev/null)" != 0` },
    { name: 'fix', sh: `git apply --whitespace=nowarn ${O}/fix.patch` },
    ...Array.from({ length: afterRuns }, (_, k) => run(`after-${k + 1}`)),
  ];
}

const STEP_FAILURE: Record<string, string> = {
  bug: 'the bug patch (unit commit -> fix parent) does not apply',
  stage: 'cannot stage the task state',
  index: 'cannot list the task state',
  test: 'the test patch does not apply on the fix parent',
  fix: 'the gold patch does not apply on the task state',
};

/** A candidate's index listing is as long as its repository's: the runner keeps this much of a step's output. */
const STEP_OUTPUT_CAP = 64 << 20;

/**
 * Checks, from the container's index after the bug patch, that every path the patch touched now
 * has the parent's exact mode and blob (or is gone where the parent has no such path).
 */
async function checkParentTree(gitDir: string, parent: string, changed: string[], indexZ: string): Promise<string | null> {
  if (!changed.length) return null;
  const index = new Map<string, string>();
  for (const entry of indexZ.split('\0').filter(Boolean)) {
    const tab = entry.indexOf('\t');
    const [mode, sha] = entry.slice(0, tab).split(' ');
    index.set(entry.slice(tab + 1), `${mode} ${sha}`);
  }
  const expected = new Map<string, string>();
  const tree = await git(['--literal-pathspecs', '--git-dir', gitDir, 'ls-tree', '-r', '-z', '--full-tree', parent, '--', ...changed]);
  for (const entry of tree.split('\0').filter(Boolean)) {
    const tab = entry.indexOf('\t');
    const [mode, , sha] = entry.slice(0, tab).split(' ');
    expected.set(entry.slice(tab + 1), `${mode} ${sha}`);
  }
  const wrong = changed.filter((p) => index.get(p) !== expected.get(p));
  return wrong.length ? `the task state differs from the fix parent's tree at ${wrong.length} path(s), first: ${wrong[0]}` : null;
}

/** Mines issue-fix tasks for a unit: candidates from history, each run in a fresh container of the unit's image. */
export async function mineIssueTasks(ctx: StageContext, clone: CloneRecord, build: BuildRecord, opts: IssueMiningOptions = {}): Promise<IssueMiningOutcome> {
  const { unit, options } = ctx;
  const gitDir = mirrorPath(unit);
  const outcome: IssueMiningOutcome = { tasks: [], candidates: 0, dropped: [], fates: [], measured: {} };
  if (!existsSync(join(gitDir, 'HEAD'))) return outcome;
  const { candidates, skipped } = await findIssueCandidates(gitDir, clone.commit, opts);
  outcome.candidates = candidates.length;
  for (const s of skipped) outcome.fates.push({ fix_commit: s.fix_commit, shape: null, fate: 'skipped', reason: s.reason, seconds: 0, fix_confidence: null });
  const afterRuns = Math.max(1, opts.afterRuns ?? 1);
  const testTimeoutS = opts.testTimeoutS ?? options.mutantTestTimeoutS;
  // An explicit rootdir keeps node ids relative to /repo whatever files are named on the command line.
  // Test paths in pytest_args would run every module a second time beside the ones named here.
  // A module that cannot be imported before the fix must not stop pytest from running the others.
  const pytest = pytestCommand(
    ['--rootdir=/repo', '--continue-on-collection-errors', ...withoutTestPaths(unit.env.pytest_args)],
    testTimeoutS,
    build.pytest_timeout,
  );
  const testLimitS = testWallLimitS(testTimeoutS);
  const suiteTimeoutS = Math.min(options.suiteTimeoutS, 900);
  const seen = new Set<string>();
  for (const [i, cand] of candidates.entries()) {
    const started = performance.now();
    const seconds = () => Math.round((performance.now() - started) / 10) / 100;
    const fate = (f: CandidateFate['fate'], reason: string | null, fix_confidence: number | null = null) =>
      outcome.fates.push({ fix_commit: cand.fix_commit, shape: cand.shape, fate: f, reason, seconds: seconds(), fix_confidence });
    const drop = (reason: string) => {
      outcome.dropped.push({ fix_commit: cand.fix_commit, reason });
      fate('dropped', reason);
    };
    const patches = await candidatePatches(gitDir, clone.commit, cand);
    if (!patches.patch.trim() || !patches.test_patch.trim()) {
      drop('empty gold or test patch');
      continue;
    }
    const codeBytes = Buffer.byteLength(patches.test_patch) + Buffer.byteLength(patches.patch);
    const maxCode = opts.maxPatchBytes ?? 1 << 20;
    if (codeBytes > maxCode) {
      drop(`the gold and test patches take ${codeBytes} bytes, over the limit of ${maxCode}`);
      continue;
    }
    const maxBug = opts.maxBugPatchBytes ?? 8 << 20;
    if (Buffer.byteLength(patches.bug_patch) > maxBug) {
      drop(`the bug patch (unit commit back to the fix's parent) takes ${Buffer.byteLength(patches.bug_patch)} bytes, over the limit of ${maxBug}`);
      continue;
    }
    const work = freshWork(outLayout.work(options.out, 'issues', unit.id, String(i)));
    let result: CandidateRun;
    try {
      writeFileSync(join(work, 'bug.patch'), patches.bug_patch);
      writeFileSync(join(work, 'test.patch'), patches.test_patch);
      writeFileSync(join(work, 'fix.patch'), patches.patch);
      writeFileSync(join(work, 'changed.z'), patches.changed.map((p) => `${p}\0`).join(''));
      // The runner holds the key that signs the reports and its steps' outcomes, as in validate.
      const { cmd, key } = stepsRunner(work, candidateSteps(pytest, cand.test_modules, suiteTimeoutS, testLimitS, afterRuns), STEP_OUTPUT_CAP);
      await runSandboxed({
        image: build.image_id,
        cmd,
        work,
        vars: unit.env.vars,
        srcLayout: clone.src_layout,
        limits: options,
        timeoutMs: ((suiteTimeoutS + 30) * (1 + afterRuns) + 60) * 1000,
        labels: { 'worldline.unit': unit.id, 'worldline.stage': 'forage', 'worldline.issue': cand.fix_commit },
      });
      let steps: Map<string, StepOutcome>;
      try {
        steps = readSteps(work, key);
      } catch (e) {
        throw new UnitFailure(`issue-fix verification of ${cand.fix_commit}: ${(e as Error).message}`);
      }
      const failedStep = [...steps.values()].find((st) => st.name in STEP_FAILURE && st.exit !== 0);
      result = {
        failed: failedStep ? `${STEP_FAILURE[failedStep.name]}${failedStep.output?.trim() ? `: ${firstLines(failedStep.output)}` : ''}` : null,
        allPassedBefore: steps.get('gate')?.exit !== undefined && steps.get('gate')?.exit !== 0,
        index: steps.get('index')?.output ?? '',
        before: stepRun(work, steps.get('before'), key, testLimitS),
        beforeCollection: collectionErrorText(readLogTail(work, 'output-before.log') ?? ''),
        after: Array.from({ length: afterRuns }, (_, k) => stepRun(work, steps.get(`after-${k + 1}`), key, testLimitS)).filter(
          (r): r is SuiteRun => r !== null,
        ),
      };
    } finally {
      rmSync(work, { recursive: true, force: true });
    }
    if (result.failed) {
      drop(result.failed);
      continue;
    }
    const mismatch = await checkParentTree(gitDir, cand.parent, patches.changed, result.index);
    if (mismatch) {
      drop(mismatch);
      continue;
    }
    if (!result.before || result.before.timedOut) {
      drop('the run before the fix did not finish in time');
      continue;
    }
    // The signed report, not the exit status the gate read, decides: every test it holds passed.
    if (
      result.allPassedBefore &&
      result.before.problem === null &&
      !result.before.collectErrors.length &&
      result.before.tests.every((t) => t.outcome === 'passed')
    ) {
      drop('no test fails before the fix and passes after it (every test passed before it)');
      continue;
    }
    if (result.after.length < afterRuns || result.after.some((r) => r.problem !== null)) {
      drop(`the run after the fix cannot be trusted: ${result.after.find((r) => r.problem)?.problem ?? 'it did not finish'}`);
      continue;
    }
    const inModules = (id: string) => cand.test_modules.includes(id.split('::')[0]);
    const before = new Map(result.before.tests.map((t) => [t.nodeid, t.outcome]));
    const afterIds = [...new Set(result.after.flatMap((r) => r.tests.map((t) => t.nodeid)))].filter(inModules).sort();
    const passAfter = afterIds.filter((id) => result.after.every((r) => r.tests.find((t) => t.nodeid === id)?.outcome === 'passed'));
    // A test that only timed out before, and that the test patch does not touch, says more about the
    // machine's load than about the fix: it is neither FAIL_TO_PASS nor PASS_TO_PASS.
    const beforeMessages = new Map(result.before.tests.map((t) => [t.nodeid, t.message]));
    const loadTimeout = loadTimeouts(patches.test_patch);
    const F2P = passAfter.filter((id) => before.get(id) !== 'passed' && !loadTimeout(id, beforeMessages.get(id) ?? null));
    const P2P = passAfter.filter((id) => before.get(id) === 'passed');
    if (!F2P.length) {
      drop('no test fails before the fix and passes after it');
      continue;
    }
    // How each FAIL_TO_PASS test fails on the task state: its own message, or its module's collection error.
    const collectError = (id: string) => {
      const module = id.split('::')[0];
      return result.beforeCollection.get(module) ?? result.before!.collectErrors.find((e) => e.nodeid === module)?.message ?? null;
    };
    const failures = F2P.map((id) => ({ nodeid: id, message: beforeMessages.get(id) ?? collectError(id) }));
    const { number, issue } = matchIssue(cand.messages, opts.issues);
    const verdict = judgeFix(failures, patches.patch, [...messageSignals(cand.messages, number, issue), ...patchSignals(patches.patch)]);
    if (verdict.feature) {
      drop(verdict.feature);
      continue;
    }
    const hash = createHash('sha256').update(`${cand.fix_commit}\0${cand.tests_commit}`).digest('hex').slice(0, 8);
    const instanceId = `${unit.slug}.${clone.commit.slice(0, 8)}.issue__${hash}`;
    if (seen.has(instanceId)) {
      drop(`the same task as another candidate (${instanceId})`);
      continue;
    }
    seen.add(instanceId);
    const { statement, source } = await chooseStatement(issue, failures, patches, opts.writeStatement, (m) =>
      ctx.log(`forage ${unit.id}: ${cand.fix_commit.slice(0, 12)}: ${m}`),
    );
    fate('kept', null, verdict.fix_confidence);
    const beforeById = new Map(result.before.tests.map((t) => [t.nodeid, t]));
    outcome.measured[instanceId] = Object.fromEntries(F2P.map((id) => [id, measuredFailing(beforeById.get(id), testTimeoutS)]));
    outcome.tasks.push({
      instance_id: instanceId,
      kind: 'issue_fix',
      repo: unit.repo,
      unit_id: unit.id,
      base_commit: cand.parent,
      patch: patches.patch,
      test_patch: patches.test_patch,
      bug_patch: patches.bug_patch,
      problem_statement: statement,
      hints_text: null,
      FAIL_TO_PASS: F2P,
      PASS_TO_PASS: P2P,
      operator: null,
      mutated_function: null,
      fix_commit: cand.fix_commit,
      issue_number: number === null ? null : String(number),
      image_id: build.image_id,
      python_version: build.python_version,
      fix_confidence: verdict.fix_confidence,
      fix_signals: verdict.signals,
      statement_source: source,
      aux_patch: patches.aux_patch || null,
    });
  }
  return outcome;
}
