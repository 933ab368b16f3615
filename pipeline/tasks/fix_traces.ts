/**
 * Traces around a fix: one task's FAIL_TO_PASS tests traced on the task state (phase `before`)
 * and again with the gold fix applied (phase `after`), in one fresh container, written as
 * `traces` rows marked with the task id and phase.
 *
 * Every test is traced inside a budget earned from what it did when last run on that state (the
 * mutant check timed it on the task state, validate on the fixed one): a test that timed out
 * there is traced to the event cap and then stopped (`timed_out_under_trace`), never run to a
 * product of options; the container's own limit is the sum of those budgets.
 */
import { readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { writeJsonl } from '../../core/jsonl.js';
import { shQuote } from '../../core/shell.js';
import type { TaskRecord } from '../../schemas/tasks.js';
import type { TraceRecord } from '../../schemas/traces.js';
import { earnedS, type Measured, measuredStartupS } from '../runtime/budgets.js';
import type { BuildRecord, CloneRecord, TaskCost, TraceCut } from '../runtime/records.js';
import type { StageContext } from '../runtime/stage.js';
import { freshWork, runSandboxed } from '../sandbox/sandbox.js';
import { pytestCommand, withoutTestPaths } from '../sandbox/suite_run.js';
import { traceRows } from '../sandbox/tracer_output.js';
import { traceCapsEnv } from '../sandbox/tracers.js';

const PHASES = ['before', 'after'] as const;
/** pytest's start-up with the tracer plugin loaded (its imports, the scope) against validate's. */
const TRACER_STARTUP_SLOWDOWN = 1.5;
type Phase = (typeof PHASES)[number];

/** Seconds of one task's trace container, by phase of the work. */
type TraceSeconds = Pick<TaskCost, 'container' | 'patch_apply' | 'pytest_startup' | 'traced_tests'>;

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

/** Reads `stamps` (name, ns since the epoch) the script wrote, in seconds. */
function readStamps(work: string): Map<string, number> {
  const stamps = new Map<string, number>();
  try {
    for (const line of readFileSync(join(work, 'stamps'), 'utf8').split('\n')) {
      const [name, ns] = line.trim().split(' ');
      if (name && ns && /^\d+$/.test(ns)) stamps.set(name, Number(BigInt(ns) / 1_000_000n) / 1000);
    }
  } catch {
    // No stamps: the container never ran the script; every second counts as container time.
  }
  return stamps;
}

/**
 * Traces one task before and after its fix into `rowsFile`; `measured` is what its tests did on
 * the task state (before) and on the fixed state (after).
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
  const o = ctx.options;
  const work = freshWork(workBase);
  try {
    writeFileSync(join(work, 'bug.patch'), task.bug_patch ?? '');
    writeFileSync(join(work, 'test.patch'), task.test_patch);
    writeFileSync(join(work, 'fix.patch'), task.patch);
    // The plugin enforces each test's budget, so pytest-timeout stays off (both would own SIGALRM).
    const pytest = pytestCommand(withoutTestPaths(ctx.unit.env.pytest_args), 0, build.pytest_timeout, ['worldline_tracer.plugin']).map(shQuote).join(' ');
    const tests = task.FAIL_TO_PASS.map(shQuote).join(' ');
    const limits = {} as Record<Phase, number>;
    const startupS = earnedS(measuredStartupS(ctx), TRACER_STARTUP_SLOWDOWN);
    for (const phase of PHASES) {
      const budgets = traceBudgets(task.FAIL_TO_PASS, measured[phase], o);
      writeFileSync(join(work, `budgets-${phase}.json`), JSON.stringify(budgets));
      limits[phase] = phaseLimitS(budgets, startupS);
    }
    const run = (phase: Phase) =>
      `WORLDLINE_TRACE_BUDGETS=/worldline/out/budgets-${phase}.json WORLDLINE_TRACE_OUT=/worldline/out/${phase}.jsonl WORLDLINE_REPORT=/worldline/out/report-${phase}.jsonl timeout -k 5 ${limits[phase]} ${pytest} ${tests} > /worldline/out/${phase}.log 2>&1`;
    const stamp = (name: string) => `echo "${name} $(date +%s%N)" >> /worldline/out/stamps`;
    const script = [
      'cd /repo',
      stamp('start'),
      '[ -s /worldline/out/bug.patch ] && git apply /worldline/out/bug.patch',
      '[ -s /worldline/out/test.patch ] && git apply /worldline/out/test.patch',
      stamp('applied'),
      run('before'),
      stamp('before'),
      'git apply /worldline/out/fix.patch || exit 3',
      stamp('fixed'),
      run('after'),
      stamp('after'),
      '',
    ].join('\n');
    writeFileSync(join(work, 'trace.sh'), script);
    const started = Date.now() / 1000;
    await runSandboxed({
      image: build.image_id,
      cmd: ['sh', '/worldline/out/trace.sh'],
      work,
      vars: ctx.unit.env.vars,
      srcLayout: clone.src_layout,
      env: {
        WORLDLINE_TRACE_ROOT: '/repo',
        WORLDLINE_TRACE_STEP_IN: String(o.traceStepIn),
        WORLDLINE_TRACE_SEED: String(o.traceSeed),
        WORLDLINE_TRACE_MAX_EVENTS: String(o.traceMaxEvents),
        ...traceCapsEnv(o.traceCaps),
      },
      limits: o,
      timeoutMs: (limits.before + limits.after + 60) * 1000,
      labels: { 'worldline.unit': ctx.unit.id, 'worldline.stage': 'task-traces' },
    });
    const wall = Date.now() / 1000 - started;
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
    const s = readStamps(work);
    const span = (a: string, b: string) => (s.has(a) && s.has(b) ? s.get(b)! - s.get(a)! : 0);
    const round = (x: number) => Math.round(Math.max(0, x) * 1000) / 1000;
    const traced = testSeconds.before + testSeconds.after;
    return {
      cuts,
      seconds: {
        container: round(wall - span('start', s.has('after') ? 'after' : ([...s.keys()].at(-1) ?? 'start'))),
        patch_apply: round(span('start', 'applied') + span('before', 'fixed')),
        pytest_startup: round(span('applied', 'before') + span('fixed', 'after') - traced),
        traced_tests: round(traced),
      },
    };
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
}
