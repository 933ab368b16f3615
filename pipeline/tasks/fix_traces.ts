/**
 * Traces around a fix: each task's FAIL_TO_PASS tests traced on the task state (phase
 * `before`) and again with the gold fix applied (phase `after`), in one fresh container per
 * task, written as `traces` rows marked with the task id and phase.
 */
import { rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { writeJsonl } from '../../core/jsonl.js';
import { shQuote } from '../../core/shell.js';
import type { TaskRecord } from '../../schemas/tasks.js';
import type { TraceRecord } from '../../schemas/traces.js';
import { outLayout } from '../runtime/layout.js';
import type { BuildRecord, CloneRecord } from '../runtime/records.js';
import type { StageContext } from '../runtime/stage.js';
import { freshWork, runSandboxed } from '../sandbox/sandbox.js';
import { pytestCommand, withoutTestPaths } from '../sandbox/suite_run.js';
import { traceRows } from '../sandbox/tracer_output.js';

/** Per-test timeout under the tracer, as a multiple of --mutant-test-timeout. */
const TRACED_MUTANT_FACTOR = 5;

async function* aroundOneTask(ctx: StageContext, task: TaskRecord, clone: CloneRecord, build: BuildRecord, workBase: string): AsyncGenerator<TraceRecord> {
  const o = ctx.options;
  const work = freshWork(workBase);
  try {
    writeFileSync(join(work, 'bug.patch'), task.bug_patch ?? '');
    writeFileSync(join(work, 'test.patch'), task.test_patch);
    writeFileSync(join(work, 'fix.patch'), task.patch);
    // On the task state a FAIL_TO_PASS test may hang (the bug can be an endless loop): bound each
    // test like a mutant's, with room for the tracer's slowdown.
    const perTest = o.mutantTestTimeoutS * TRACED_MUTANT_FACTOR;
    const pytest = pytestCommand(withoutTestPaths(ctx.unit.env.pytest_args), perTest, build.pytest_timeout, ['worldline_tracer.plugin']).map(shQuote).join(' ');
    const tests = task.FAIL_TO_PASS.map(shQuote).join(' ');
    const run = (phase: string) =>
      `WORLDLINE_TRACE_OUT=/worldline/out/${phase}.jsonl WORLDLINE_REPORT=/worldline/out/report-${phase}.jsonl timeout -k 10 ${Math.min(o.suiteTimeoutS * o.traceSlowdown, perTest * (task.FAIL_TO_PASS.length + 2))} ${pytest} ${tests} > /worldline/out/${phase}.log 2>&1`;
    const script = [
      'cd /repo',
      '[ -s /worldline/out/bug.patch ] && git apply /worldline/out/bug.patch',
      '[ -s /worldline/out/test.patch ] && git apply /worldline/out/test.patch',
      run('before'),
      'git apply /worldline/out/fix.patch || exit 3',
      run('after'),
      '',
    ].join('\n');
    writeFileSync(join(work, 'trace.sh'), script);
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
      },
      limits: o,
      timeoutMs: (o.suiteTimeoutS * o.traceSlowdown * 2 + 60) * 1000,
      labels: { 'worldline.unit': ctx.unit.id, 'worldline.stage': 'task-traces' },
    });
    for (const phase of ['before', 'after'] as const) {
      yield* traceRows(work, `${phase}.jsonl`, {
        unitId: ctx.unit.id,
        repo: ctx.unit.repo,
        commit: clone.commit,
        imageId: build.image_id,
        taskId: task.instance_id,
        phase,
      });
    }
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
}

/** Traces every task of the unit before and after its fix; returns the number of rows. */
export async function traceAroundFixes(ctx: StageContext, tasks: TaskRecord[], clone: CloneRecord, build: BuildRecord): Promise<number> {
  async function* all(): AsyncGenerator<TraceRecord> {
    for (const [i, task] of tasks.entries())
      yield* aroundOneTask(ctx, task, clone, build, outLayout.work(ctx.options.out, 'task-traces', ctx.unit.id, String(i)));
  }
  return writeJsonl(outLayout.part(ctx.options.out, 'task_traces', ctx.unit.id), all());
}
