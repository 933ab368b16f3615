/**
 * Runs a unit's pytest suite N times, one run after another, in one sandboxed container (no
 * network; memory, pids and CPU limits; a wall timeout per run) with our Python on the import
 * path and an output folder outside /repo. Validate, trace and grading all run suites this way.
 */
import { randomBytes } from 'node:crypto';
import { mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { outLayout } from '../runtime/layout.js';
import type { Unit } from '../runtime/manifest.js';
import type { PipelineOptions } from '../runtime/options.js';
import { redactText, unitRedactor } from '../runtime/part_redaction.js';
import { takesNext } from '../runtime/pytest_options.js';
import { OUR_PYTHON } from './our_python.js';
import { firstErrorLine } from './pytest_output.js';
import { foldReport, OUT_OF_MEMORY, type SuiteRun, signedLines } from './pytest_report.js';
import { LineCounter, readLogTail, readResult } from './results.js';
import { claimWork, freshWork, runSandboxed } from './sandbox.js';

/** Exit status `timeout(1)` returns when the time limit hit. */
export const TIMEOUT_EXIT = 124;

/**
 * The pytest command line every Worldline run uses, plus the unit's own arguments: pytest started
 * by worldline_pytest.py under -S, so the plugin holds the runner's report pipe before any `.pth`
 * file of the repository's build runs. What pytest itself sees is `python3 -m pytest` with the
 * unit's arguments and nothing of ours (the plugins are handed over in-process, not as `-p`), save
 * the per-test timeout, an ini override so a suite's own `--timeout` still wins (the runner's
 * watchdog bounds every test from outside whatever it says). Callers may append test paths.
 */
export function pytestCommand(pytestArgs: string[], testTimeoutS: number, hasTimeoutPlugin: boolean, plugins: string[] = []): string[] {
  return [
    'python3',
    '-S',
    '/worldline/lib/worldline_pytest.py',
    '--plugins',
    plugins.join(','),
    '--',
    ...suiteArgs(pytestArgs, testTimeoutS, hasTimeoutPlugin),
  ];
}

/** What pytest is given, ours or plain: the per-test timeout as an ini override (when pytest-timeout is there), then the unit's arguments. */
export function suiteArgs(pytestArgs: string[], testTimeoutS: number, hasTimeoutPlugin: boolean): string[] {
  return [...(hasTimeoutPlugin && testTimeoutS > 0 ? ['-o', `timeout=${testTimeoutS}`] : []), ...pytestArgs];
}

/**
 * The unit's pytest arguments without its positional test paths, for a run that names its own
 * test files or node ids: with `tests` left in, every named test would run twice (and the whole
 * suite beside it).
 */
export function withoutTestPaths(pytestArgs: string[]): string[] {
  return pytestArgs.filter((a, i) => a.startsWith('-') || (i > 0 && takesNext(pytestArgs[i - 1], a)));
}

/** A run's output kept on disk: the rest is counted, not written (`worldline_runs.py`). */
export const OUTPUT_CAP = 16 << 20;

/**
 * The runner's hard bound on one test, from outside the test process: twice pytest-timeout's,
 * so pytest-timeout gets the first chance (with a traceback) and a test that ignores SIGALRM is
 * still killed long before the suite timeout. 0 (no per-test timeout) turns it off.
 */
export function testWallLimitS(testTimeoutS: number): number {
  return testTimeoutS * 2;
}

/**
 * The container's command: our runner (on our own interpreter, none of the build's: our_python.ts)
 * runs the suite `runs` times under a timeout each, kills a test past `testLimitS`, caps its
 * output, and signs the plugin's records into the report with a key the tests cannot read (only
 * it holds it).
 */
export function runnerCommand(runs: number, suiteTimeoutS: number, testLimitS: number, pytest: string[]): string[] {
  return [
    OUR_PYTHON,
    '/worldline/lib/worldline_runs.py',
    '/worldline/out',
    String(runs),
    String(suiteTimeoutS),
    String(testLimitS),
    String(OUTPUT_CAP),
    '--',
    ...pytest,
  ];
}

/** A fresh report key, written where only the runner reads it (it deletes the file first thing). */
export function writeReportKey(work: string): string {
  const key = randomBytes(32).toString('hex');
  writeFileSync(join(work, 'key'), key, { mode: 0o600 });
  claimWork(join(work, 'key'));
  return key;
}

/**
 * What the runner wrote for run `i`: its exit code (null when it never finished), the report
 * text, the bytes of output dropped, and the test its watchdog killed (null when none).
 */
export function readRunFiles(work: string, i: number): { exitCode: number | null; report: string | null; capped: number; testTimedOut: string | null } {
  const exitText = readResult(work, `exit-${i}`);
  return {
    exitCode: exitText === null ? null : Number(exitText.trim()),
    report: readResult(work, `report-${i}.jsonl`),
    capped: Number(readResult(work, `capped-${i}`)?.trim() ?? 0),
    testTimedOut: readResult(work, `test-timeout-${i}`),
  };
}

/** Why a run ended early, as the runner saw it; null when it ran to its end. */
export function runnerProblem(files: { capped: number; testTimedOut: string | null }, testLimitS: number): string | null {
  if (files.testTimedOut !== null) return `test timed out: ${files.testTimedOut} (per-test limit: ${testLimitS} s, killed by the runner)`;
  if (files.capped) return `output capped: the suite printed ${files.capped} bytes past the ${OUTPUT_CAP}-byte cap`;
  return null;
}

/** One step of a runner's list (`worldline_runs.py --steps`): a script of ours, or a pytest run. */
export type Step = { name: string; sh: string } | { name: string; run: string[]; timeoutS: number; testLimitS: number; env?: Record<string, string> };

/** What the runner signed for a step: exit status, a script's output, a run's capped bytes and timed-out test, wall clock (s). */
export interface StepOutcome {
  name: string;
  exit: number;
  output?: string;
  capped?: number;
  test_timeout?: string | null;
  started: number;
  ended: number;
}

/** The runner's command: the same for every step list (the list is a file of the work folder). */
export const STEPS_RUNNER_CMD = [OUR_PYTHON, '/worldline/lib/worldline_runs.py', '/worldline/out', '--steps', '/worldline/out/steps.json'];

/**
 * Writes `steps` for the runner and a fresh key; returns the container's command and the key.
 * `cap` bounds each run's output on disk and each script's output kept.
 */
export function stepsRunner(work: string, steps: Step[], cap: number): { cmd: string[]; key: string } {
  const plan = steps.map((s) => ('sh' in s ? s : { name: s.name, run: s.run, timeout: s.timeoutS, test_limit: s.testLimitS, env: s.env }));
  writeFileSync(join(work, 'steps.json'), JSON.stringify({ cap, steps: plan }));
  return {
    cmd: STEPS_RUNNER_CMD,
    key: writeReportKey(work),
  };
}

/** The steps the runner finished, by name, checked against `key`; throws when a line is not the runner's. */
export function readSteps(work: string, key: string): Map<string, StepOutcome> {
  const { lines, tampered } = signedLines<StepOutcome>(readResult(work, 'steps.jsonl') ?? '', { key, file: 'steps.jsonl' }, 'the step results', 'the runner');
  if (tampered) throw new Error(tampered);
  return new Map(lines.map((l) => [l.name, l]));
}

/** A pytest step's run: its signed report folded, with the runner's reason when it stopped it. */
export function stepRun(work: string, step: StepOutcome | undefined, key: string, testLimitS: number): SuiteRun | null {
  if (!step) return null;
  // 137: SIGKILL (the runner's own, or the out-of-memory killer's): the run did not finish either.
  const timedOut = step.exit === TIMEOUT_EXIT || step.exit === 137;
  const file = `report-${step.name}.jsonl`;
  const run = foldReport(readResult(work, file) ?? '', timedOut ? null : step.exit, timedOut, { key, file });
  const stopped = runnerProblem({ capped: step.capped ?? 0, testTimedOut: step.test_timeout ?? null }, testLimitS);
  if (stopped && !run.problem?.startsWith('the report was tampered')) run.problem = stopped;
  return run;
}

export interface SuiteSpec {
  unit: Unit;
  imageId: string;
  srcLayout: boolean;
  options: PipelineOptions;
  stage: 'validate' | 'trace';
  runs: number;
  suiteTimeoutS: number;
  /** pytest-timeout's per-test limit for this run; the runner's hard bound derives from it. */
  testTimeoutS: number;
  pytest: string[];
  env?: Record<string, string>;
  /** Node ids to run, the rest deselected after collection (the tests a suite cut short by its timeout finished). */
  select?: string[];
  /** Told, about once a second while the suite runs, how many lines result file `rel` has (tests done). */
  watch?: { rel: string; onLines: (lines: number) => void };
}

export interface SuiteOutcome {
  runs: SuiteRun[];
  containerExit: number | null;
  containerOutput: string;
  /** The output folder (as the container saw /worldline/out); the caller removes it. */
  work: string;
  seconds: number;
}

export async function runSuite(spec: SuiteSpec): Promise<SuiteOutcome> {
  const { unit, options } = spec;
  const work = freshWork(outLayout.work(options.out, spec.stage, unit.id));
  const key = writeReportKey(work);
  if (spec.select) writeFileSync(join(work, 'select'), `${spec.select.join('\n')}\n`, { mode: 0o644 });
  const started = Date.now();
  const counter = spec.watch && new LineCounter(work, spec.watch.rel);
  const ticker = counter && setInterval(() => spec.watch?.onLines(counter.count()), 1000);
  const testLimitS = testWallLimitS(spec.testTimeoutS);
  const result = await runSandboxed({
    image: spec.imageId,
    cmd: runnerCommand(spec.runs, spec.suiteTimeoutS, testLimitS, spec.pytest),
    work,
    vars: unit.env.vars,
    srcLayout: spec.srcLayout,
    env: spec.select ? { ...spec.env, WORLDLINE_SELECT: '/worldline/out/select' } : spec.env,
    limits: options,
    // Each run has its own limit inside; this one catches a container that will not die.
    timeoutMs: (spec.suiteTimeoutS + 30) * spec.runs * 1000,
    labels: { 'worldline.unit': unit.id, 'worldline.stage': spec.stage },
  })
    .catch((e) => {
      rmSync(work, { recursive: true, force: true });
      throw e;
    })
    .finally(() => clearInterval(ticker));
  if (counter) spec.watch?.onLines(counter.count()); // the last count: a quick suite may end before a tick
  const seconds = (Date.now() - started) / 1000;
  const runs: SuiteRun[] = [];
  const logParts: string[] = [result.output];
  try {
    readRuns();
  } catch (e) {
    // A refused result file: the folder may hold a link a test planted; it goes now, not later.
    rmSync(work, { recursive: true, force: true });
    throw e;
  }
  mkdirSync(outLayout.logDir(options.out, spec.stage), { recursive: true });
  writeFileSync(outLayout.log(options.out, spec.stage, unit.id), redactText(unitRedactor(options, unit), logParts.join('\n')));
  return { runs, containerExit: result.exitCode, containerOutput: result.output, work, seconds };

  function readRuns(): void {
    for (let i = 1; i <= spec.runs; i++) {
      const files = readRunFiles(work, i);
      const { exitCode, report } = files;
      const output = readLogTail(work, `output-${i}.log`);
      logParts.push(`==== run ${i} ====\n${output ?? '(no output)'}`);
      if (exitCode === null && report === null) break;
      const timedOut = exitCode === null || exitCode === TIMEOUT_EXIT;
      const outOfMemory = exitCode === 137 && result.oomKilled;
      const run = foldReport(report ?? '', timedOut ? null : exitCode, timedOut, { key, file: `report-${i}.jsonl` }, outOfMemory);
      const stopped = runnerProblem(files, testLimitS);
      const tampered = run.problem?.startsWith('the report was tampered') ?? false;
      if (files.testTimedOut !== null && !tampered) run.problem = stopped;
      else if (exitCode === null && !result.timedOut) {
        // No exit file and no timeout of ours: something killed the runner (a test may kill its parent).
        run.problem = `the runner was killed before the suite finished (container exit ${result.exitCode}${result.oomKilled ? ', out of memory' : ''})`;
      } else if (timedOut) run.problem = `${run.problem} (suite timeout: ${spec.suiteTimeoutS} s)`;
      else if (stopped) run.problem = stopped;
      else if (exitCode === 137) {
        run.problem = result.oomKilled ? `${OUT_OF_MEMORY} ${options.memoryMb} MB limit)` : 'killed (exit 137: SIGKILL, not by the out-of-memory killer)';
      } else if (run.problem && !tampered) run.problem = withErrorLine(run.problem, output ?? '');
      runs.push(run);
    }
  }
}

/** A run's problem with the first real error of its output after it, when the problem does not say it already. */
function withErrorLine(problem: string, output: string): string {
  const line = firstErrorLine(output);
  // The collection error's own message may be in the problem already, without the file after it.
  return line && !problem.includes(line.replace(/ \([^()]*\)$/, '')) ? `${problem}: ${line}` : problem;
}

/** The first run's problem, prefixed with its run number, or null. */
export function firstProblem(runs: SuiteRun[]): string | null {
  return runs.map((r, i) => (r.problem ? `run ${i + 1}: ${r.problem}` : null)).find((p) => p) ?? null;
}
