/**
 * `worldline render`: trace episodes in CWM's token format, re-rendered from their stored frames
 * and checked against the stored text, or trajectories as chat messages or transitions. Output
 * goes to a writer one chunk at a time, so a whole config never sits in memory.
 */
import type { TrajectoryRecord } from '../schemas/trajectories.js';
import { type CwmFrame, renderEpisode } from './cwm_format.js';
import { readRows } from './reader.js';
import { messagesView, transitionsView } from './trajectory_views.js';

/** traces: jsonl ({"node_id", "function", "text"} per line) or text (each raw text under a `==> node id function <==` line). */
export const TRACE_FORMATS = ['jsonl', 'text'] as const;
/** trajectories: messages (chat messages for SFT) or transitions (state, action, next state, reward). */
export const TRAJECTORY_FORMATS = ['messages', 'transitions'] as const;
export type TraceFormat = (typeof TRACE_FORMATS)[number];
export type TrajectoryFormat = (typeof TRAJECTORY_FORMATS)[number];

export const isTraceFormat = (f: string): f is TraceFormat => (TRACE_FORMATS as readonly string[]).includes(f);
export const isTrajectoryFormat = (f: string): f is TrajectoryFormat => (TRAJECTORY_FORMATS as readonly string[]).includes(f);

/** Takes one chunk of output and resolves when more may be written. */
export type Write = (chunk: string) => Promise<void>;

/**
 * Writes each episode of a traces config re-rendered from its context and frames. The Python
 * tracer rendered the stored text at trace time; re-rendering it here is how a disagreement
 * between the two renderers shows up. Each episode that differs is reported to `mismatch` (and
 * written as re-rendered); returns how many differed. As text, each episode comes under a line
 * naming it (`==> <node id> <function> <==`, as `head` heads files) and ends with a newline.
 */
export async function renderTraces(
  datasetDir: string,
  opts: { config: string; format: TraceFormat; limit?: number },
  write: Write,
  mismatch: (m: string) => void,
): Promise<number> {
  let mismatches = 0;
  let n = 0;
  for await (const row of readRows(datasetDir, { config: opts.config, limit: opts.limit, columns: ['node_id', 'function', 'context', 'frames', 'text'] })) {
    const text = renderEpisode(row.context as string, row.frames as CwmFrame[]);
    if (text !== row.text) {
      mismatches += 1;
      mismatch(`${row.node_id} ${row.function}: re-rendered text differs from the stored one`);
    }
    const head = `${n++ ? '\n' : ''}==> ${row.node_id} ${row.function} <==\n`;
    await write(opts.format === 'text' ? `${head}${text}\n` : JSON.stringify({ node_id: row.node_id, function: row.function, text }) + '\n');
  }
  return mismatches;
}

/** Writes each trajectory as one line of chat messages, or as one line per transition. */
export async function renderTrajectories(datasetDir: string, opts: { format: TrajectoryFormat; limit?: number }, write: Write): Promise<void> {
  for await (const row of readRows(datasetDir, { config: 'trajectories', limit: opts.limit })) {
    const t = row as unknown as TrajectoryRecord;
    if (opts.format === 'messages') await write(JSON.stringify(messagesView(t)) + '\n');
    else for (const tr of transitionsView(t)) await write(JSON.stringify(tr) + '\n');
  }
}
