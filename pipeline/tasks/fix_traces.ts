/**
 * Traces around a fix: one task's FAIL_TO_PASS tests traced on the task state (phase `before`)
 * and again with the gold fix applied (phase `after`), in one container, written as `traces` rows
 * marked with the task id and phase. The container is a fresh one, or the one that graded a
 * submission making the gold fix's change (the oracle's): after the graded run, /repo is put
 * back to the task state and traced there, so the code that runs is the code a fresh container
 * would run, one container start sooner.
 *
 * Every test is traced inside a budget earned from what it did when last run on that state (the
 * mutant check timed it on the task state, validate on the fixed one): a test that timed out
 * there is traced to the event cap and then stopped (`timed_out_under_trace`), never run to a
 * product of options; the container's own limit is the sum of those budgets.
 */
import { rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { writeJsonl } from '../../core/jsonl.js';
import type { TaskRecord } from '../../schemas/tasks.js';
import type { TraceRecord } from '../../schemas/traces.js';
import { earnedS, type Measured, measuredStartupS } from '../runtime/budgets.js';
import type { BuildRecord, CloneRecord, TaskCost, TraceCut } from '../runtime/records.js';
import { type StageContext, UnitFailure } from '../runtime/stage.js';
import { freshWork, runSandboxed } from '../sandbox/sandbox.js';
import { OUTPUT_CAP, pytestCommand, readSteps, type Step, type StepOutcome, stepRun, stepsRunner, withoutTestPaths } from '../sandbox/suite_run.js';
import { traceRows } from '../sandbox/tracer_output.js';
import { traceCapsEnv } from '../sandbox/tracers.js';

const PHASES = ['before', 'after'] as const;
/** pytest's start-up with the tracer plugin loaded (its imports, the scope) against validate's. */
const TRACER_STARTUP_SLOWDOWN = 1.5;
type Phase = (typeof PHASES)[number];

/** Seconds of one task's trace container, by phase of the work. */
type TraceSeconds = Pick<TaskCost, 'container' | 'patch_apply' | 'pytest_startup' | 'tracer_around_tests' | 'traced_tests'>;

export interface TaskTraceOutcome {
  cuts: TraceCut[];
  seconds: TraceSeconds;
}

/** Per-test budgets for one state: what the tracer plugin reads from WORLDLINE_TRACE_BUDGETS. */
export function traceBudgets(
  tests: string[],
  measured: Map<string, Measured>,
  o: { traceSlowdown: number; mutantTestTimeoutS: number },
): Record<string, { seconds: number; stop_at_cap: boolean }> {
  const out: Record<string, { seconds: number; stop_at_cap: boolean }> = {};
  for (const id of tests) {
    const m = measured.get(id);
    // Timed out on this state: its trace to the cap is all there is to have, and the timeout it
    // was measured hitting bounds a loop the tracer cannot see. Never measured: the mutant
    // timeout, slowed like a measured test.
    if (m?.timedOut) out[id] = { seconds: Math.max(1, Math.ceil(m.seconds)), stop_at_cap: true };
    else out[id] = { seconds: m ? earnedS(m.seconds, o.traceSlowdown) : earnedS(o.mutantTestTimeoutS, o.traceSlowdown), stop_at_cap: false };
  }
  return out;
}

const phaseLimitS = (budgets: Record<string, { seconds: number }>, startupS: number) => Object.values(budgets).reduce((s, b) => s + b.seconds, startupS);

/** Marks of the container's work (seconds since the epoch) from the steps the runner signed. */
function stampsOf(steps: Map<string, StepOutcome>): Map<string, number> {
  const marks: [string, StepOutcome | undefined, 'started' | 'ended'][] = [
    ['start', steps.get('reset') ?? steps.get('bug'), 'started'],
    ['applied', steps.get('reset') ?? steps.get('test'), 'ended'],
    ['before', steps.get('before'), 'ended'],
    ['fixed', steps.get('fix'), 'ended'],
    ['after', steps.get('after'), 'ended'],
  ];
  // A missing step: the container never got there; its seconds count as container time.
  return new Map(marks.filter(([, st]) => st).map(([name, st, at]) => [name, st![at]]));
}

/** A task's traces as runner steps, for a container of their own or one that graded the gold fix. */
export interface TraceSteps {
  steps: Step[];
  /** Wall seconds the steps may take: the phases' earned limits. */
  limitS: number;
  /** The step outcomes' folder and key once a container ran them, and its wall seconds: rows and costs come from them. */
  read(work: string, key: string, containerS: number): Promise<TaskTraceOutcome>;
}

/**
 * Writes what the trace steps need into `work` and returns them. `from`: `pristine` (a fresh
 * container: the bug and test patches are applied) or `graded` (a grading container's /repo,
 * whose HEAD is the task state: put back to it, then traced).
 */
export function traceSteps(
  ctx: StageContext,
  task: TaskRecord,
  clone: CloneRecord,
  build: BuildRecord,
  measured: Record<Phase, Map<string, Measured>>,
  work: string,
  rowsFile: string,
  from: 'pristine' | 'graded',
): TraceSteps {
  const o = ctx.options;
  writeFileSync(join(work, 'bug.patch'), task.bug_patch ?? '');
  writeFileSync(join(work, 'test.patch'), task.test_patch);
  writeFileSync(join(work, 'fix.patch'), task.patch);
  // The plugin enforces each test's budget, so pytest-timeout stays off (both would own SIGALRM).
  const pytest = [...pytestCommand(withoutTestPaths(ctx.unit.env.pytest_args), 0, build.pytest_timeout, ['worldline_tracer.plugin']), ...task.FAIL_TO_PASS];
  const limits = {} as Record<Phase, number>;
  const startupS = earnedS(measuredStartupS(ctx), TRACER_STARTUP_SLOWDOWN);
  const traceEnv = {
    WORLDLINE_TRACE_ROOT: '/repo',
    WORLDLINE_TRACE_STEP_IN: String(o.traceStepIn),
    WORLDLINE_TRACE_SEED: String(o.traceSeed),
    WORLDLINE_TRACE_MAX_EVENTS: String(o.traceMaxEvents),
    ...traceCapsEnv(o.traceCaps),
  };
  const steps: Step[] = [];
  for (const phase of PHASES) {
    const budgets = traceBudgets(task.FAIL_TO_PASS, measured[phase], o);
    writeFileSync(join(work, `budgets-${phase}.json`), JSON.stringify(budgets));
    limits[phase] = phaseLimitS(budgets, startupS);
    if (phase === 'after') steps.push({ name: 'fix', sh: 'git apply /worldline/out/fix.patch' });
    // What the graded tests left in /repo goes; ignored files (a build's own) stay, as in the image.
    else if (from === 'graded') steps.push({ name: 'reset', sh: 'git reset -q --hard HEAD && git clean -fdq' });
    else {
      steps.push({ name: 'bug', sh: '[ ! -s /worldline/out/bug.patch ] || git apply /worldline/out/bug.patch' });
      steps.push({ name: 'test', sh: '[ ! -s /worldline/out/test.patch ] || git apply /worldline/out/test.patch' });
    }
    steps.push({
      name: phase,
      run: pytest,
      timeoutS: limits[phase],
      // No per-test watchdog: the plugin stops each test at its earned budget, and the phase limit
      // (their sum plus start-up) bounds the run; a watchdog at a multiple of one small budget
      // killed a first test still paying the tracer's start-up under load (no rows after the fix).
      testLimitS: 0,
      env: { ...traceEnv, WORLDLINE_TRACE_BUDGETS: `/worldline/out/budgets-${phase}.json`, WORLDLINE_TRACE_OUT: `/worldline/out/${phase}.jsonl` },
    });
  }
  return {
    steps,
    limitS: limits.before + limits.after,
    // In a grading container the container is grading's: none of it is the traces'.
    read: (doneWork, key, containerS) => readTraces(ctx, task, clone, build, doneWork, key, from === 'graded' ? null : containerS, rowsFile),
  };
}

/** The rows of a container's trace steps into `rowsFile`, with what was cut and the seconds by phase. */
async function readTraces(
  ctx: StageContext,
  task: TaskRecord,
  clone: CloneRecord,
  build: BuildRecord,
  work: string,
  key: string,
  containerS: number | null,
  rowsFile: string,
): Promise<TaskTraceOutcome> {
  const cuts: TraceCut[] = [];
  const testSeconds: Record<Phase, number> = { before: 0, after: 0 };
  async function* rows(): AsyncGenerator<TraceRecord> {
    for (const phase of PHASES) {
      yield* traceRows(
        work,
        `${phase}.jsonl`,
        { unitId: ctx.unit.id, repo: ctx.unit.repo, commit: clone.commit, imageId: build.image_id, taskId: task.instance_id, phase },
        (t) => {
          testSeconds[phase] += t.seconds ?? 0;
          if (t.timed_out_under_trace) cuts.push({ task_id: task.instance_id, phase, node_id: t.nodeid, reason: t.stopped ?? 'stopped' });
        },
      );
    }
  }
  await writeJsonl(rowsFile, rows());
  let outcomes: Map<string, StepOutcome>;
  try {
    outcomes = readSteps(work, key);
  } catch (e) {
    throw new UnitFailure(`traces around ${task.instance_id}: ${(e as Error).message}`);
  }
  const s = stampsOf(outcomes);
  // pytest's own seconds per test (setup, call and teardown, where the tracer builds and writes
  // the test's episodes): what a run spent outside them is its start-up, collection and exit.
  const inTests = PHASES.reduce((sum, phase) => sum + (stepRun(work, outcomes.get(phase), key, 0)?.tests.reduce((t, r) => t + r.duration, 0) ?? 0), 0);
  const span = (a: string, b: string) => (s.has(a) && s.has(b) ? s.get(b)! - s.get(a)! : 0);
  const round = (x: number) => Math.round(Math.max(0, x) * 1000) / 1000;
  const traced = testSeconds.before + testSeconds.after;
  return {
    cuts,
    seconds: {
      container: containerS === null ? 0 : round(containerS - span('start', s.has('after') ? 'after' : ([...s.keys()].at(-1) ?? 'start'))),
      patch_apply: round(span('start', 'applied') + span('before', 'fixed')),
      pytest_startup: round(span('applied', 'before') + span('fixed', 'after') - Math.max(inTests, traced)),
      tracer_around_tests: round(inTests - traced),
      traced_tests: round(traced),
    },
  };
}

/**
 * Traces one task before and after its fix, in a fresh container, into `rowsFile`; `measured` is
 * what its tests did on the task state (before) and on the fixed state (after).
 */
export async function traceAroundFix(
  ctx: StageContext,
  task: TaskRecord,
  clone: CloneRecord,
  build: BuildRecord,
  measured: Record<Phase, Map<string, Measured>>,
  workBase: string,
  rowsFile: string,
): Promise<TaskTraceOutcome> {
  const work = freshWork(workBase);
  try {
    const traces = traceSteps(ctx, task, clone, build, measured, work, rowsFile, 'pristine');
    const { cmd, key } = stepsRunner(work, traces.steps, OUTPUT_CAP);
    const started = Date.now() / 1000;
    await runSandboxed({
      image: build.image_id,
      cmd,
      work,
      vars: ctx.unit.env.vars,
      srcLayout: clone.src_layout,
      limits: ctx.options,
      timeoutMs: (traces.limitS + 60) * 1000,
      labels: { 'worldline.unit': ctx.unit.id, 'worldline.stage': 'task-traces' },
    });
    return await traces.read(work, key, Date.now() / 1000 - started);
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
}
