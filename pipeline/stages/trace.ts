/**
 * Stage `trace`: runs the unit's suite once more with our tracer loaded, in the same sandbox as
 * validate, and turns every test's function-level episodes into `traces` records. Timeouts are
 * scaled by --trace-slowdown so tracing never flips an outcome, and the traced run's outcomes
 * are compared with validate's (outcome parity).
 */
import { createReadStream, createWriteStream, existsSync, mkdirSync, readFileSync, renameSync, rmSync } from 'node:fs';
import { dirname, join, posix } from 'node:path';
import { createInterface } from 'node:readline';
import type { TraceRecord } from '../../schemas/traces.js';
import type { BuildRecord } from './build.js';
import type { CloneRecord } from './clone.js';
import { hashTree } from '../../core/hashing.js';
import { tracersDir } from '../../core/package.js';
import { failed, ok, requireRecord, type Stage, type StageContext } from '../runtime/stage.js';
import { firstProblem, pytestCommand, runSuite } from '../sandbox/suite_run.js';
import type { TestRecord } from '../../schemas/tests.js';
import { testsPartPath, type ValidateRecord } from './validate.js';

const TRACE_REVISION = 1;

export interface TraceStageRecord {
  tests_traced: number;
  tests_with_line_events: number;
  episodes: number;
  line_events: number;
  mean_line_events_per_test: number;
  truncated_tests: number;
  truncation_rate: number;
  tracer_errors: number;
  /** Non-flaky tests whose outcome under the tracer differs from validate's first run. */
  parity_mismatches: number;
  mismatched: string[];
  tracer_version: string;
  python_version: string;
}

export function tracesPartPath(out: string, unitId: string): string {
  return join(out, 'parts', 'traces', `${unitId}.jsonl`);
}

interface PluginEpisode {
  function: string;
  file: string;
  line: number;
  context: string;
  frames: { kind: string; line: number; depth: number; function: string; source: string; locals?: [string, string][]; value?: string }[];
  text: string;
  frame_count: number;
  line_events: number;
}

interface PluginLine {
  nodeid: string;
  python: string;
  tracer_version: string;
  truncated: boolean;
  error: string | null;
  line_events: number;
  episodes?: PluginEpisode[];
}

function relativeToRepo(file: string): string {
  return file.startsWith('/repo/') ? posix.relative('/repo', file) : file;
}

export const traceStage: Stage<TraceStageRecord> = {
  name: 'trace',
  key(ctx) {
    const build = requireRecord<BuildRecord>(ctx, 'build');
    requireRecord<ValidateRecord>(ctx, 'validate');
    const o = ctx.options;
    return {
      image: build.image_id,
      tracer: hashTree(join(tracersDir, 'worldline_tracer'), '.py'),
      stepIn: o.traceStepIn,
      seed: o.traceSeed,
      phases: o.tracePhases,
      maxEvents: o.traceMaxEvents,
      slowdown: o.traceSlowdown,
      timeouts: [o.testTimeoutS, o.suiteTimeoutS],
      limits: [o.memoryMb, o.cpus, o.pids],
      pytest_args: ctx.unit.env.pytest_args,
      vars: ctx.unit.env.vars,
      revision: TRACE_REVISION,
    };
  },
  async run(ctx: StageContext) {
    const { unit, options } = ctx;
    const clone = requireRecord<CloneRecord>(ctx, 'clone');
    const build = requireRecord<BuildRecord>(ctx, 'build');
    ctx.log(`trace ${unit.id}: tracing the suite in ${build.image}`);
    const suite = await runSuite({
      unit,
      imageId: build.image_id,
      srcLayout: clone.src_layout,
      options,
      stage: 'trace',
      runs: 1,
      suiteTimeoutS: options.suiteTimeoutS * options.traceSlowdown,
      pytest: pytestCommand(unit.env.pytest_args, options.testTimeoutS * options.traceSlowdown, build.pytest_timeout, ['worldline_tracer.plugin']),
      env: {
        WORLDLINE_TRACE_OUT: '/worldline/out/traces.jsonl',
        WORLDLINE_TRACE_ROOT: '/repo',
        WORLDLINE_TRACE_STEP_IN: String(options.traceStepIn),
        WORLDLINE_TRACE_SEED: String(options.traceSeed),
        WORLDLINE_TRACE_PHASES: options.tracePhases.join(','),
        WORLDLINE_TRACE_MAX_EVENTS: String(options.traceMaxEvents),
      },
    });
    try {
      const problem = firstProblem(suite.runs);
      if (!suite.runs.length) return failed(`the traced suite did not start (container exit ${suite.containerExit}): ${suite.containerOutput.trim().slice(-300)}`);
      if (problem) return failed(`traced ${problem}`);
      const record = await writeTraceRecords(ctx, join(suite.work, 'traces.jsonl'), clone, build);
      // Outcome parity: the tracer must not change what a test does.
      const reference = new Map<string, TestRecord>();
      for (const line of readFileSync(testsPartPath(options.out, unit.id), 'utf8').split('\n')) {
        if (line) {
          const t = JSON.parse(line) as TestRecord;
          reference.set(t.node_id, t);
        }
      }
      const mismatched = suite.runs[0].tests
        .filter((t) => {
          const ref = reference.get(t.nodeid);
          return ref && !ref.flaky && ref.outcome !== t.outcome;
        })
        .map((t) => `${t.nodeid}: ${reference.get(t.nodeid)!.outcome} -> ${t.outcome}`);
      record.parity_mismatches = mismatched.length;
      record.mismatched = mismatched.slice(0, 10);
      ctx.log(
        `trace ${unit.id}: ${record.tests_traced} tests, ${record.episodes} episodes, ${record.mean_line_events_per_test.toFixed(0)} line events/test, ` +
          `${(record.truncation_rate * 100).toFixed(1)}% truncated, ${record.parity_mismatches} outcome mismatches (${suite.seconds.toFixed(1)} s)`,
      );
      return ok(record);
    } finally {
      rmSync(suite.work, { recursive: true, force: true });
    }
  },
};

/** Where a trace row comes from: the unit, and for traces around a task, the task and phase. */
export interface TraceOrigin {
  unitId: string;
  repo: string;
  commit: string;
  imageId: string;
  taskId: string | null;
  phase: 'before' | 'after' | null;
}

/** What the plugin says of one test, beside its episodes. */
export interface TracedTest {
  nodeid: string;
  line_events: number;
  truncated: boolean;
  error: string | null;
  tracer_version: string;
}

/** Rows of the plugin's output file (one line per test, possibly large), streamed. */
export async function* traceRows(pluginOut: string, origin: TraceOrigin, onTest: (t: TracedTest) => void = () => undefined): AsyncGenerator<TraceRecord> {
  // No file means no test ran in scope (the plugin writes a line per test it saw).
  if (!existsSync(pluginOut)) return;
  for await (const raw of createInterface({ input: createReadStream(pluginOut), crlfDelay: Infinity })) {
    if (!raw) continue;
    const test = JSON.parse(raw) as PluginLine;
    onTest(test);
    for (const [i, ep] of (test.episodes ?? []).entries()) {
      yield {
        unit_id: origin.unitId,
        repo: origin.repo,
        commit: origin.commit,
        node_id: test.nodeid,
        task_id: origin.taskId,
        phase: origin.phase,
        function: ep.function,
        file: relativeToRepo(ep.file),
        line: ep.line,
        episode_index: i,
        context: ep.context,
        frames: ep.frames.map((f) => ({
          kind: f.kind,
          line: f.line,
          depth: f.depth,
          function: f.function,
          source: f.source,
          locals: (f.locals ?? []).map(([name, value]) => ({ name, value })),
          value: f.value ?? null,
        })),
        text: ep.text,
        frame_count: ep.frame_count,
        line_events: ep.line_events,
        truncated: test.truncated,
        python_version: test.python,
        tracer_version: test.tracer_version,
        image_id: origin.imageId,
      };
    }
  }
}

/** Writes rows as JSON Lines to `path` (atomically: a temp file renamed when complete). */
export async function writeJsonl(path: string, rows: AsyncIterable<object>): Promise<number> {
  mkdirSync(dirname(path), { recursive: true });
  const tmp = `${path}.tmp`;
  const sink = createWriteStream(tmp);
  let n = 0;
  for await (const row of rows) {
    n += 1;
    if (!sink.write(JSON.stringify(row) + '\n')) await new Promise<void>((r) => sink.once('drain', () => r()));
  }
  await new Promise<void>((resolve, reject) => {
    sink.once('error', reject);
    sink.end(() => resolve());
  });
  renameSync(tmp, path);
  return n;
}

/** The unit's traces into its part file, with the stage's figures. */
async function writeTraceRecords(ctx: StageContext, pluginOut: string, clone: CloneRecord, build: BuildRecord): Promise<TraceStageRecord> {
  const record: TraceStageRecord = {
    tests_traced: 0,
    tests_with_line_events: 0,
    episodes: 0,
    line_events: 0,
    mean_line_events_per_test: 0,
    truncated_tests: 0,
    truncation_rate: 0,
    tracer_errors: 0,
    parity_mismatches: 0,
    mismatched: [],
    tracer_version: '',
    python_version: build.python_version,
  };
  const origin: TraceOrigin = { unitId: ctx.unit.id, repo: ctx.unit.repo, commit: clone.commit, imageId: build.image_id, taskId: null, phase: null };
  record.episodes = await writeJsonl(
    tracesPartPath(ctx.options.out, ctx.unit.id),
    traceRows(pluginOut, origin, (test) => {
      record.tests_traced += 1;
      record.tracer_version = test.tracer_version;
      record.line_events += test.line_events;
      if (test.line_events > 0) record.tests_with_line_events += 1;
      if (test.truncated) record.truncated_tests += 1;
      if (test.error) record.tracer_errors += 1;
    }),
  );
  record.mean_line_events_per_test = record.tests_traced ? record.line_events / record.tests_traced : 0;
  record.truncation_rate = record.tests_traced ? record.truncated_tests / record.tests_traced : 0;
  return record;
}
