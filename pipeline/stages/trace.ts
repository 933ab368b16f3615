/**
 * Stage `trace`: runs the unit's suite once more with our tracer loaded, in the same sandbox as
 * validate, and turns every test's function-level episodes into `traces` records. Timeouts are
 * scaled by --trace-slowdown so tracing never flips an outcome, and the traced run's outcomes
 * are compared with validate's (outcome parity).
 */
import { createHash } from 'node:crypto';
import { readFileSync, rmSync } from 'node:fs';
import { writeJsonl } from '../../core/jsonl.js';
import type { TestRecord } from '../../schemas/tests.js';
import type { TraceRecord } from '../../schemas/traces.js';
import { outLayout } from '../runtime/layout.js';
import { unitRedactor } from '../runtime/part_redaction.js';
import type { BuildRecord, CloneRecord, TraceStageRecord } from '../runtime/records.js';
import { failed, ok, requireRecord, type Stage, type StageContext } from '../runtime/stage.js';
import { firstProblem, pytestCommand, runSuite } from '../sandbox/suite_run.js';
import { type TraceOrigin, traceRows } from '../sandbox/tracer_output.js';
import { TRACER_CODE, traceCapsEnv, tracerCodeHash } from '../sandbox/tracers.js';

const TRACE_REVISION = 2;

export const traceStage: Stage<'trace'> = {
  name: 'trace',
  key(ctx) {
    const build = requireRecord(ctx, 'build');
    requireRecord(ctx, 'validate');
    const o = ctx.options;
    const selection = selectionOf(ctx);
    return {
      image: build.image_id,
      code: tracerCodeHash(TRACER_CODE.tracer),
      stepIn: o.traceStepIn,
      seed: o.traceSeed,
      phases: o.tracePhases,
      maxEvents: o.traceMaxEvents,
      caps: o.traceCaps,
      determinism: o.determinismSample >= ctx.unit.line,
      slowdown: o.traceSlowdown,
      timeouts: [o.testTimeoutS, o.suiteTimeoutS],
      limits: [o.memoryMb, o.cpus, o.pids],
      pytest_args: ctx.unit.env.pytest_args,
      vars: ctx.unit.env.vars,
      selection: selection && createHash('sha256').update(selection.join('\n')).digest('hex'),
      revision: TRACE_REVISION,
    };
  },
  async run(ctx: StageContext) {
    const { unit, options } = ctx;
    const clone = requireRecord(ctx, 'clone');
    const build = requireRecord(ctx, 'build');
    ctx.log(`trace ${unit.id}: tracing the suite in ${build.image}`);
    const suite = await traceSuite(ctx, clone, build);
    try {
      const problem = firstProblem(suite.runs);
      if (!suite.runs.length)
        return failed(`the traced suite did not start (container exit ${suite.containerExit}): ${suite.containerOutput.trim().slice(-300)}`);
      if (problem) return failed(`traced ${problem}`);
      // --determinism-sample picks units by manifest line: the same units on every run and machine
      const twice = options.determinismSample >= unit.line;
      const hashes = twice ? new Map<string, string>() : null;
      // Outcome parity: the tracer must not change what a test does; a test it changed keeps no episodes.
      const reference = new Map<string, TestRecord>();
      for (const line of readFileSync(outLayout.part(options.out, 'tests', unit.id), 'utf8').split('\n')) {
        if (line) {
          const t = JSON.parse(line) as TestRecord;
          reference.set(t.node_id, t);
        }
      }
      const changed = suite.runs[0].tests.filter((t) => {
        const ref = reference.get(t.nodeid);
        return ref && !ref.flaky && ref.outcome !== t.outcome;
      });
      const record = await writeTraceRecords(ctx, suite.work, clone, build, hashes, new Set(changed.map((t) => t.nodeid)));
      const mismatched = changed.map((t) => `${t.nodeid}: ${reference.get(t.nodeid)!.outcome} -> ${t.outcome}`);
      record.parity_mismatches = mismatched.length;
      record.mismatched = mismatched.slice(0, 10);
      if (hashes) {
        rmSync(suite.work, { recursive: true, force: true });
        const share = await secondRunDiffers(ctx, clone, build, hashes);
        if (typeof share === 'string') return failed(share);
        record.determinism_diff = share;
        ctx.log(`trace ${unit.id}: traced twice, ${(share * 100).toFixed(1)}% of episodes differ`);
      }
      ctx.log(
        `trace ${unit.id}: ${record.tests_traced} tests, ${record.episodes} episodes, ${record.mean_line_events_per_test.toFixed(0)} line events/test, ` +
          `${(record.truncation_rate * 100).toFixed(1)}% truncated, ${record.parity_mismatches} outcome mismatches` +
          `${record.parity_dropped_episodes ? ` (their ${record.parity_dropped_episodes} episodes not kept)` : ''} (${suite.seconds.toFixed(1)} s)`,
      );
      if (record.slow_repr_tests)
        ctx.log(`trace ${unit.id}: ${record.slow_repr_tests} tests hit the repr safety net (${record.slow_reprs.join(', ')}): those traces depend on load`);
      return ok(record);
    } finally {
      rmSync(suite.work, { recursive: true, force: true });
    }
  },
};

/**
 * The tests a suite cut short by its timeout finished in validate (its rows), which the traced run
 * is limited to: the whole suite would only be cut short again. Undefined: the whole suite.
 */
function selectionOf(ctx: StageContext): string[] | undefined {
  if (!requireRecord(ctx, 'validate').unfinished) return undefined;
  return readFileSync(outLayout.part(ctx.options.out, 'tests', ctx.unit.id), 'utf8')
    .split('\n')
    .filter(Boolean)
    .map((l) => (JSON.parse(l) as TestRecord).node_id);
}

/** One traced run of the unit's suite (its output in `work/traces.jsonl`, a line per test: the live count). */
function traceSuite(ctx: StageContext, clone: CloneRecord, build: BuildRecord) {
  const { unit, options } = ctx;
  const total = requireRecord(ctx, 'validate').collected;
  let shown = -1;
  return runSuite({
    watch: {
      rel: 'traces.jsonl',
      onLines: (done) => {
        if (done === shown) return;
        shown = done;
        ctx.steps?.(done, total, 'tests');
      },
    },
    unit,
    imageId: build.image_id,
    srcLayout: clone.src_layout,
    options,
    stage: 'trace',
    runs: 1,
    suiteTimeoutS: options.suiteTimeoutS * options.traceSlowdown,
    testTimeoutS: options.testTimeoutS * options.traceSlowdown,
    pytest: pytestCommand(unit.env.pytest_args, options.testTimeoutS * options.traceSlowdown, build.pytest_timeout, ['worldline_tracer.plugin']),
    select: selectionOf(ctx),
    env: {
      WORLDLINE_TRACE_OUT: '/worldline/out/traces.jsonl',
      WORLDLINE_TRACE_ROOT: '/repo',
      WORLDLINE_TRACE_STEP_IN: String(options.traceStepIn),
      WORLDLINE_TRACE_SEED: String(options.traceSeed),
      WORLDLINE_TRACE_PHASES: options.tracePhases.join(','),
      WORLDLINE_TRACE_MAX_EVENTS: String(options.traceMaxEvents),
      ...traceCapsEnv(options.traceCaps),
    },
  });
}

/**
 * Traces the suite a second time and compares it with the first run's episodes (`first`: a hash
 * of each episode's text by test and position): the share of the first run's episodes that differ
 * or are missing, with the second run's extra episodes counted too.
 */
async function secondRunDiffers(ctx: StageContext, clone: CloneRecord, build: BuildRecord, first: Map<string, string>): Promise<number | string> {
  const again = await traceSuite(ctx, clone, build);
  try {
    const problem = firstProblem(again.runs);
    if (!again.runs.length || problem) return `the second traced run failed: ${problem ?? `container exit ${again.containerExit}`}`;
    const origin: TraceOrigin = { unitId: ctx.unit.id, repo: ctx.unit.repo, commit: clone.commit, imageId: build.image_id, taskId: null, phase: null };
    let rows = 0;
    let same = 0;
    for await (const row of traceRows(again.work, 'traces.jsonl', origin)) {
      rows += 1;
      if (first.get(episodeKey(row)) === episodeHash(row.text)) same += 1;
    }
    const total = Math.max(first.size, rows);
    return total ? (total - same) / total : 0;
  } finally {
    rmSync(again.work, { recursive: true, force: true });
  }
}

const episodeHash = (text: string) => createHash('sha256').update(text).digest('base64');
const episodeKey = (row: TraceRecord) => `${row.node_id}\u0000${row.episode_index}`;

/** The unit's traces into its part file, with the stage's figures; the episodes of the tests in `changed` are left out. */
async function writeTraceRecords(
  ctx: StageContext,
  work: string,
  clone: CloneRecord,
  build: BuildRecord,
  hashes: Map<string, string> | null,
  changed: Set<string>,
): Promise<TraceStageRecord> {
  const record: TraceStageRecord = {
    tests_traced: 0,
    tests_with_line_events: 0,
    episodes: 0,
    line_events: 0,
    mean_line_events_per_test: 0,
    truncated_tests: 0,
    truncation_rate: 0,
    tracer_errors: 0,
    slow_repr_tests: 0,
    slow_reprs: [],
    episode_bytes: 0,
    episodes_built: 0,
    sampled_tests: 0,
    sampled: [],
    caps: [],
    determinism_diff: null,
    parity_mismatches: 0,
    mismatched: [],
    parity_dropped_episodes: 0,
    tracer_version: '',
    python_version: build.python_version,
  };
  const origin: TraceOrigin = { unitId: ctx.unit.id, repo: ctx.unit.repo, commit: clone.commit, imageId: build.image_id, taskId: null, phase: null };
  const rows = traceRows(work, 'traces.jsonl', origin, (test) => {
    record.tests_traced += 1;
    record.tracer_version = test.tracer_version;
    record.line_events += test.line_events;
    if (test.line_events > 0) record.tests_with_line_events += 1;
    if (test.truncated) record.truncated_tests += 1;
    if (test.error) record.tracer_errors += 1;
    if (test.slow_reprs?.length) {
      record.slow_repr_tests += 1;
      for (const cls of test.slow_reprs) if (!record.slow_reprs.includes(cls) && record.slow_reprs.length < 20) record.slow_reprs.push(cls);
    }
    record.episode_bytes += test.episode_bytes ?? 0;
    record.episodes_built += test.episodes_built ?? 0;
    if (test.sampled) {
      record.sampled_tests += 1;
      if (record.sampled.length < 20) record.sampled.push(`${test.nodeid} (${test.sampled})`);
    }
  });
  const redactor = unitRedactor(ctx.options, ctx.unit);
  async function* kept() {
    for await (const row of rows) {
      // The determinism check compares what the tracer wrote, before redaction.
      hashes?.set(episodeKey(row), episodeHash(row.text));
      if (changed.has(row.node_id)) {
        record.parity_dropped_episodes += 1;
        continue;
      }
      yield redactor ? redactor.row('traces', row as unknown as Record<string, unknown>) : row;
    }
  }
  record.episodes = await writeJsonl(outLayout.part(ctx.options.out, 'traces', ctx.unit.id), kept());
  const c = ctx.options.traceCaps;
  record.caps = [c.testEpisodes, c.testBytes, c.unitEpisodes, c.unitBytes];
  record.mean_line_events_per_test = record.tests_traced ? record.line_events / record.tests_traced : 0;
  record.truncation_rate = record.tests_traced ? record.truncated_tests / record.tests_traced : 0;
  return record;
}
