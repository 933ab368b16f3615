/**
 * Stage `validate`: runs the unit's suite N times, one run after another in one sandboxed
 * container (no network; memory, pids and CPU limits; a wall timeout per run), so state a run
 * leaves behind can change the next run and show up as flakiness. Outcomes come from our
 * reporting plugin, written outside /repo, cross-checked with pytest's exit code. Then (unless
 * --no-plain-parity) the suite runs as plain `python3 -m pytest` with no code of ours in the
 * container, and the record says test by test where the two differ (plain_parity.ts).
 */
import { rmSync } from 'node:fs';
import { writeFileAtomic } from '../../core/atomic.js';
import type { TestRecord } from '../../schemas/tests.js';
import { outLayout } from '../runtime/layout.js';
import { redactRows, unitRedactor } from '../runtime/part_redaction.js';
import type { BuildRecord, CloneRecord, PlainParity, ValidateRecord } from '../runtime/records.js';
import { failed, ok, requireRecord, type Stage, type StageContext } from '../runtime/stage.js';
import { plainParity } from '../sandbox/plain_parity.js';
import { countVerdicts, finishedPart, mergeRuns, type SuiteLimit, type TestVerdict } from '../sandbox/pytest_report.js';
import { firstProblem, pytestCommand, runSuite, suiteArgs, TIMEOUT_EXIT } from '../sandbox/suite_run.js';
import { TRACER_CODE, tracerCodeHash } from '../sandbox/tracers.js';

/** Bump when how the suite is run changes in a way the key's other fields do not show. */
const VALIDATE_REVISION = 4;

export function testFile(nodeid: string): string {
  return nodeid.split('::')[0];
}

export const validateStage: Stage<'validate'> = {
  name: 'validate',
  key(ctx) {
    const build = requireRecord(ctx, 'build');
    const o = ctx.options;
    return {
      image: build.image_id,
      runs: o.validateRuns,
      testTimeout: o.testTimeoutS,
      suiteTimeout: o.suiteTimeoutS,
      limits: [o.memoryMb, o.cpus, o.pids],
      pytest_args: ctx.unit.env.pytest_args,
      vars: ctx.unit.env.vars,
      plain: o.plainParity,
      code: tracerCodeHash(TRACER_CODE.report),
      revision: VALIDATE_REVISION,
    };
  },
  async run(ctx: StageContext) {
    const { unit, options } = ctx;
    const clone = requireRecord(ctx, 'clone');
    const build = requireRecord(ctx, 'build');
    ctx.log(`validate ${unit.id}: ${options.validateRuns} run(s) in ${build.image}`);
    const {
      runs: suite,
      containerExit,
      containerOutput,
      work,
      seconds,
    } = await runSuite({
      unit,
      imageId: build.image_id,
      srcLayout: clone.src_layout,
      options,
      stage: 'validate',
      runs: options.validateRuns,
      suiteTimeoutS: options.suiteTimeoutS,
      testTimeoutS: options.testTimeoutS,
      pytest: pytestCommand(unit.env.pytest_args, options.testTimeoutS, build.pytest_timeout),
    });
    rmSync(work, { recursive: true, force: true });
    // A suite longer than its time limit, or stopped at the memory limit, keeps the tests that finished; the rest are counted.
    const cut = finishedPart(suite);
    const runs = cut?.runs ?? suite;
    const verdicts = mergeRuns(runs);
    // A suite that ran past its timeout under us would only do so again: not run twice.
    const plain =
      options.plainParity && !runs[0]?.timedOut
        ? await plainParity(
            {
              unit,
              imageId: build.image_id,
              srcLayout: clone.src_layout,
              options,
              suiteArgs: suiteArgs(unit.env.pytest_args, options.testTimeoutS, build.pytest_timeout),
            },
            verdicts,
          )
        : null;
    if (!runs.length)
      return failed(`the suite did not start (container exit ${containerExit}): ${containerOutput.trim().slice(-300)}${plainSaid(plain, null)}`);
    const problem = firstProblem(runs);
    const counts = countVerdicts(verdicts);
    const record: ValidateRecord = {
      image_id: build.image_id,
      python_version: build.python_version,
      pytest_version: build.pytest_version,
      runs: runs.length,
      exit_codes: runs.map((r) => r.exitCode ?? TIMEOUT_EXIT),
      ...counts,
      traceable: counts.stable_passed > 0,
      collect_errors: runs[0]?.collectErrors.length ?? 0,
      ...(cut && { unfinished: cut.unfinished }),
      plain,
    };
    const parity = plain && !plain.problem ? `; plain pytest: ${plain.mismatches} of ${plain.compared} differ` : '';
    const limits: Record<SuiteLimit, string> = {
      'suite timeout': `the suite timeout (${options.suiteTimeoutS} s)`,
      memory: `the memory limit (${options.memoryMb} MB)`,
    };
    const cutNote = cut ? `; ${cut.by.map((l) => limits[l]).join(' and ')} stopped it with ${cut.unfinished} test(s) unfinished` : '';
    ctx.log(
      `validate ${unit.id}: ${counts.collected} collected, ${counts.passed} passed, ${counts.failed} failed, ${counts.error} errors, ${counts.flaky} flaky${record.collect_errors ? `, ${record.collect_errors} module(s) not collected` : ''}${parity}${cutNote} (${seconds.toFixed(1)} s)`,
    );
    if (problem) return failed(`${problem}${plainSaid(plain, record.exit_codes[0])}`, record);
    const rows = redactRows(
      unitRedactor(options, unit),
      'tests',
      verdicts.map((v) => testRow(v, clone, build, ctx)),
    );
    writeFileAtomic(outLayout.part(options.out, 'tests', unit.id), rows.map((r) => JSON.stringify(r)).join('\n') + '\n');
    if (!record.traceable) {
      // Nothing collected: why, in the suite's own words (a hub download at import, a missing module).
      const stopped = counts.collected ? undefined : runs[0]?.collectErrors.find((e) => e.message);
      const why = stopped ? `: ${stopped.nodeid}: ${stopped.message!.trim().slice(0, 300)}` : '';
      return failed(`not traceable: no test passed in every run (${counts.collected} collected, ${counts.passed} passed in run 1)${why}${cutNote}`, record);
    }
    return ok(record);
  },
};

/** For a failed unit, when plain pytest ended otherwise in the same image: how (where to look next). */
function plainSaid(plain: PlainParity | null, ourExit: number | null): string {
  if (!plain || plain.plain_exit_codes[0] === ourExit) return '';
  const said = plain.problem ?? `exit ${plain.plain_exit_codes[0]}, ${plain.compared + plain.plain_only_count} tests`;
  return ` (plain python3 -m pytest in the same image: ${said})`;
}

function testRow(v: TestVerdict, clone: CloneRecord, build: BuildRecord, ctx: StageContext): TestRecord {
  return {
    unit_id: ctx.unit.id,
    repo: ctx.unit.repo,
    commit: clone.commit,
    node_id: v.nodeid,
    file: testFile(v.nodeid),
    outcome: v.outcome,
    run_outcomes: v.runOutcomes,
    flaky: v.flaky,
    unstable_id: v.unstableId,
    message: v.message,
    duration_seconds: v.duration,
    image_id: build.image_id,
    python_version: build.python_version,
    pytest_version: build.pytest_version,
  };
}
