import { bool, defineSchema, type Infer, int32, int64, list, nullable, string, struct } from './schema.js';

/** A local variable as CWM shows it: its name and its repr, or ".." when unchanged. */
export const localField = struct({ name: string('Variable name'), value: string('Python repr, or ".." when unchanged since the previous frame') });

export const frameField = struct({
  kind: string('call, line, return or exception'),
  line: int32('Line number in the file'),
  depth: int32('Call depth below the episode entry (0 = the entry function)'),
  function: string('Qualified name of the function the frame is in'),
  source: string('The source line, with its trailing newline'),
  locals: list(localField, 'call and line frames: every local, diff-based'),
  value: nullable(string('return and exception frames: the repr of the value')),
});

/** One row per function-level episode, CWM's unit of repository trace data. */
export const tracesSchema = defineSchema({
  name: 'traces',
  version: 3,
  doc: "Function-level execution traces cut from each repository's test runs, in CWM's frame format, with the rendered token text.",
  text: ['text'],
  fields: {
    unit_id: string('The unit the trace comes from'),
    repo: string('The repository as the manifest names it'),
    commit: string('Resolved commit SHA'),
    node_id: string('pytest node id of the test that ran the code'),
    task_id: nullable(string('For traces around an agent task: the task instance id')),
    phase: nullable(string('For traces around an agent task: before or after the fix')),
    function: string('Qualified name of the episode entry function'),
    file: string('File of the entry function, relative to the repository root'),
    line: int32("Line of the entry function's def"),
    episode_index: int32('Position of this episode among the episodes of its test'),
    context: string("$CONTEXT: the entry function's source marked # << START_OF_TRACE, then every stepped-into function"),
    frames: list(frameField, 'The frames, in order'),
    text: string("The episode in CWM's token format, from <|trace_context_start|> to the last <|frame_sep|>"),
    frame_count: int64('Frames in the episode'),
    line_events: int64('Line frames in the episode'),
    truncated: bool("The test's raw trace hit a cap, so later calls are missing"),
    test_episodes_built: int64('Episodes the tracer cut from the test, before the output caps'),
    test_episode_bytes: int64("Bytes of the test's episodes as the tracer wrote them (JSON), after the caps"),
    test_sampled: nullable(string("Why the test's episodes are a seeded sample: test_cap or unit_cap (null: all kept)")),
    python_version: string('Python version that ran the code'),
    tracer_version: string('Worldline tracer version'),
    image_id: string('Environment image id'),
  },
});

export type TraceRecord = Infer<typeof tracesSchema>;
