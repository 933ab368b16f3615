/**
 * Grading a submission for a task, as SWE-bench does: in a fresh container of the unit's image,
 * bring /repo to the task state (base + bug patch + test patch), apply the submission, put every
 * test file back to the task's version, run FAIL_TO_PASS and PASS_TO_PASS with our reporting
 * plugin, and count a test missing from the report as failed. Resolved = every one passed.
 *
 * The submission is hostile until proven otherwise. Printed "PASSED" lines mean nothing (outcomes
 * come from the plugin's hooks); test files, conftests and pytest's configuration files go back to
 * the task's version and new ones are deleted, as are interpreter start-up hooks (sitecustomize,
 * .pth) that would run before the plugin; the plugin sends its records down a pipe to the runner
 * (tracers/worldline_runs.py), which alone holds the key and signs the report, so a rewritten or
 * injected report is caught. Code that deliberately writes to that pipe from inside the same
 * interpreter could still lie about its own outcomes (never read the key): the residual risk.
 */
import { rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { TaskRecord } from '../../schemas/tasks.js';
import type { PipelineOptions } from '../runtime/options.js';
import { foldReport, type Outcome } from '../sandbox/pytest_report.js';
import { readResult } from '../sandbox/results.js';
import { freshWork, type HeldRun, holdSandboxed, runSandboxed } from '../sandbox/sandbox.js';
import {
  OUTPUT_CAP,
  pytestCommand,
  readSteps,
  STEPS_RUNNER_CMD,
  type Step,
  type StepOutcome,
  stepsRunner,
  TIMEOUT_EXIT,
  testWallLimitS,
  withoutTestPaths,
} from '../sandbox/suite_run.js';
import { hunksOf } from './policy.js';

export interface Grade {
  resolved: boolean;
  /** Whether the submission applied; an unappliable patch grades as unresolved. */
  applied: boolean;
  fail_to_pass: { passed: string[]; failed: string[] };
  pass_to_pass: { passed: string[]; failed: string[] };
  outcomes: Record<string, Outcome>;
  exit_code: number | null;
  /** Why the run's report cannot be trusted (e.g. it disagrees with pytest's exit code), or null. */
  problem: string | null;
}

export interface GradeEnv {
  options: PipelineOptions;
  srcLayout: boolean;
  vars: Record<string, string>;
  pytestArgs: string[];
  hasTimeoutPlugin: boolean;
  /** Where the work folder goes: a fresh folder is made under this name, removed when grading ends. */
  work: string;
  /** Wall seconds the graded tests earned from their measured durations (else --suite-timeout); a run it stops is graded again under --suite-timeout. */
  suiteBudgetS?: number;
  /** Adds the grading containers' wall seconds, for the task's cost by phase. */
  timing?: { gradingS: number };
  /**
   * More steps for the grading container, made in its work folder (the task's traces before and
   * after its fix): run after the graded run when the submission is the gold fix (the code that
   * ran there is then the code they run; grading itself stays first in a fresh container), else
   * not at all.
   */
  afterGold?: (work: string) => AfterGrading;
}

/** Steps run in the grading container after the graded run, and how their results are read. */
export interface AfterGrading {
  steps: Step[];
  /** Wall seconds the steps may take. */
  limitS: number;
  /** Reads their results (the folder, the runner's key, the container's wall seconds); returns the seconds they took there. */
  read(work: string, key: string, containerS: number): Promise<number>;
}

/** Test files: the submission may never change or add them. */
const TEST_FILES = String.raw`(^|/)(tests?/|test_[^/]*\.py$|[^/]*_test\.py$|conftest\.py$)`;
/**
 * What decides how pytest or Python starts: protected too, except a file the gold fix itself
 * changes (a real fix may touch pyproject.toml or setup.cfg; reverting it would fail the fix).
 */
const STARTUP_FILES = String.raw`(^|/)(pytest\.ini|tox\.ini|setup\.cfg|pyproject\.toml|sitecustomize\.py|usercustomize\.py|[^/]*\.pth)$`;

const APPLY = (file: string) => `git apply --whitespace=nowarn ${file} 2>/dev/null || patch -p1 --batch --forward --silent < ${file} >/dev/null 2>&1`;

/**
 * A patch's change: each hunk's file, line ranges and text before and after. Two tools that make
 * the same change may align its lines differently (git's diff and difflib put a moved line on
 * either side); the blocks before and after are the same.
 */
function changeOf(patch: string): string {
  const ranges = patch.split('\n').flatMap((l) => /^@@ (-\S+ \+\S+) @@/.exec(l)?.[1] ?? []);
  return JSON.stringify([ranges, hunksOf(patch)]);
}

/** Whether the submission makes exactly the gold patch's change (as the oracle's does). */
export function isGoldChange(submission: string | null, gold: string): boolean {
  return submission !== null && submission.trim() !== '' && changeOf(submission) === changeOf(gold);
}

/** Grading's first container, made and started ahead (while the rollout runs) and held until the submission is in. */
export interface HeldGrading {
  work: string;
  run: HeldRun;
}

const gradeLabels = (task: TaskRecord) => ({ 'worldline.stage': 'grade', 'worldline.task': task.instance_id });

/** Makes and starts grading's container ahead: it is fresh all the same (holdSandboxed). */
export async function holdGrading(task: TaskRecord, env: GradeEnv): Promise<HeldGrading> {
  const work = freshWork(env.work);
  try {
    const run = await holdSandboxed({
      image: task.image_id,
      cmd: STEPS_RUNNER_CMD,
      work,
      vars: env.vars,
      srcLayout: env.srcLayout,
      limits: env.options,
      labels: gradeLabels(task),
    });
    return { work, run };
  } catch (e) {
    rmSync(work, { recursive: true, force: true });
    throw e;
  }
}

/** Grades `submission`; in `held`'s container when given (then the caller lets go of it here, whatever happens). */
export async function gradeSubmission(task: TaskRecord, submission: string | null, env: GradeEnv, held?: HeldGrading): Promise<Grade> {
  const grade = await gradeOnce(task, submission, env, env.suiteBudgetS ?? env.options.suiteTimeoutS, held);
  const timedOut = grade.exit_code === null || grade.exit_code === TIMEOUT_EXIT;
  // An earned budget was measured at another moment of a shared machine: a run stopped by it may
  // have met load, not a slow submission. It must not decide the grade (an oracle's task would be
  // dropped as unsolvable), so one more fresh container under --suite-timeout does.
  if (timedOut && env.suiteBudgetS !== undefined && env.suiteBudgetS < env.options.suiteTimeoutS)
    return gradeOnce(task, submission, env, env.options.suiteTimeoutS);
  return grade;
}

async function gradeOnce(task: TaskRecord, submission: string | null, env: GradeEnv, suiteS: number, held?: HeldGrading): Promise<Grade> {
  const work = held?.work ?? freshWork(env.work);
  let letGo = false;
  try {
    writeFileSync(join(work, 'bug.patch'), task.bug_patch ?? '');
    writeFileSync(join(work, 'test.patch'), task.test_patch);
    writeFileSync(join(work, 'submission.patch'), submission ?? '');
    writeFileSync(join(work, 'gold-paths'), [...new Set(hunksOf(task.patch).map((h) => `${h.path}\n`))].join(''));
    const tests = [...task.FAIL_TO_PASS, ...task.PASS_TO_PASS];
    const pytest = pytestCommand(withoutTestPaths(env.pytestArgs), env.options.testTimeoutS, env.hasTimeoutPlugin);
    const prepare = [
      'set -e',
      '[ -s /worldline/out/bug.patch ] && git apply /worldline/out/bug.patch',
      '[ -s /worldline/out/test.patch ] && git apply /worldline/out/test.patch',
      'git add -A && git -c user.name=w -c user.email=w@localhost commit -qm task --allow-empty',
      'set +e',
      'applied=1',
      `if [ -s /worldline/out/submission.patch ]; then ${APPLY('/worldline/out/submission.patch')} || applied=0; fi`,
      'echo $applied > /worldline/out/applied',
      // Protected files go back to the task's version, whatever the submission did to them.
      `{ git diff --name-only HEAD | grep -E '${TEST_FILES}'; git diff --name-only HEAD | grep -E '${STARTUP_FILES}' | grep -vxF -f /worldline/out/gold-paths; } | xargs -r git checkout HEAD -- 2>/dev/null`,
      `{ git ls-files --others | grep -E '${TEST_FILES}'; git ls-files --others | grep -E '${STARTUP_FILES}' | grep -vxF -f /worldline/out/gold-paths; } | xargs -r rm -rf`,
      'exit 0',
    ].join('\n');
    const after = env.afterGold && isGoldChange(submission, task.patch) ? env.afterGold(work) : null;
    // The runner takes the key off the file system before any step runs, and holds it where the
    // tests cannot read it (no shell of ours keeps it on a descriptor).
    const { cmd, key } = stepsRunner(
      work,
      [
        { name: 'prepare', sh: prepare },
        { name: 'graded', run: [...pytest, ...tests], timeoutS: suiteS, testLimitS: testWallLimitS(env.options.testTimeoutS) },
        ...(after?.steps ?? []),
      ],
      OUTPUT_CAP,
    );
    const started = Date.now();
    const timeoutMs = (suiteS + (after?.limitS ?? 0) + 60) * 1000;
    letGo = true;
    if (held) await held.run.go(timeoutMs);
    else
      await runSandboxed({
        image: task.image_id,
        cmd,
        work,
        vars: env.vars,
        srcLayout: env.srcLayout,
        limits: env.options,
        timeoutMs,
        labels: gradeLabels(task),
      });
    const containerS = (Date.now() - started) / 1000;
    const read = (f: string) => {
      try {
        // A refused file (a symlink, say) reads as empty: the submission is then not resolved.
        return readResult(work, f) ?? '';
      } catch {
        return '';
      }
    };
    let graded: StepOutcome | undefined;
    try {
      graded = readSteps(work, key).get('graded');
    } catch {
      graded = undefined; // a step list not the runner's: no exit status to trust
    }
    const exitCode = graded ? graded.exit : null;
    const run = foldReport(read('report-graded.jsonl'), exitCode, exitCode === null || exitCode === TIMEOUT_EXIT, { key, file: 'report-graded.jsonl' });
    const outcomes = Object.fromEntries(run.tests.map((t) => [t.nodeid, t.outcome])) as Record<string, Outcome>;
    const split = (ids: string[]) => ({ passed: ids.filter((id) => outcomes[id] === 'passed'), failed: ids.filter((id) => outcomes[id] !== 'passed') });
    const fail_to_pass = split(task.FAIL_TO_PASS);
    const pass_to_pass = split(task.PASS_TO_PASS);
    const applied = read('applied').trim() === '1';
    // The later steps' share of the container is theirs, not grading's.
    const afterS = after ? await after.read(work, key, containerS) : 0;
    if (env.timing) env.timing.gradingS += containerS - afterS;
    return {
      // A report that disagrees with pytest's exit code is never a resolution.
      resolved: applied && run.problem === null && fail_to_pass.failed.length === 0 && pass_to_pass.failed.length === 0 && task.FAIL_TO_PASS.length > 0,
      applied,
      fail_to_pass,
      pass_to_pass,
      outcomes,
      exit_code: exitCode,
      problem: run.problem,
    };
  } finally {
    if (held && !letGo) await held.run.cancel();
    rmSync(work, { recursive: true, force: true });
  }
}
