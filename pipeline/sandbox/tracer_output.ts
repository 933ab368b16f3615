/**
 * What the tracer plugin (tracers/worldline_tracer) writes inside the container, read back as
 * `traces` rows: one JSON line per test with its episodes, streamed so a large suite never sits
 * in memory. The trace stage and the traces around a task's fix both read it here.
 */
import { posix } from 'node:path';
import type { TraceRecord } from '../../schemas/traces.js';
import { resultLines } from './results.js';

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

interface PluginLine extends TracedTest {
  python: string;
  episodes?: PluginEpisode[];
  /** Output caps (absent from older tracers): episodes built, bytes kept, why a sample was kept. */
  episodes_built?: number;
  episode_bytes?: number;
  sampled?: string | null;
}

function relativeToRepo(file: string): string {
  return file.startsWith('/repo/') ? posix.relative('/repo', file) : file;
}

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
  episodes_built?: number;
  episode_bytes?: number;
  sampled?: string | null;
  /** The test call's wall seconds under the tracer. */
  seconds?: number | null;
  /** Its budget (WORLDLINE_TRACE_BUDGETS) stopped it, and why. */
  timed_out_under_trace?: boolean;
  stopped?: string | null;
  /** Classes whose repr ran past the tracer's wall-time safety net (markers that depend on load). */
  slow_reprs?: string[];
}

/** Rows of the plugin's output file `work/rel` (one line per test, possibly large), streamed. */
export async function* traceRows(
  work: string,
  rel: string,
  origin: TraceOrigin,
  onTest: (t: TracedTest) => void = () => undefined,
): AsyncGenerator<TraceRecord> {
  // No file means no test ran in scope (the plugin writes a line per test it saw).
  for await (const raw of resultLines(work, rel)) {
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
        test_episodes_built: test.episodes_built ?? test.episodes?.length ?? 0,
        test_episode_bytes: test.episode_bytes ?? 0,
        test_sampled: test.sampled ?? null,
        python_version: test.python,
        tracer_version: test.tracer_version,
        image_id: origin.imageId,
      };
    }
  }
}
