import { bool, defineSchema, float64, type Infer, int32, int64, list, nullable, string, struct } from './schema.js';

export const toolCallField = struct({
  id: string('Tool call id'),
  type: string('Always "function"'),
  function: struct({ name: string('Tool name: bash, view, edit, create or submit'), arguments: string('The arguments as the model wrote them (JSON text)') }),
});

/** A chat message as OpenAI-compatible servers and TRL expect them. */
export const messageField = struct({
  role: string('system, user, assistant or tool'),
  content: string('Message text (may be empty for assistant tool calls)'),
  name: nullable(string('Tool name, on tool messages')),
  tool_call_id: nullable(string('The call a tool message answers')),
  tool_calls: list(toolCallField, 'Tool calls of an assistant message'),
});

export const stepField = struct({
  action: string('The tool call, as tool name and arguments'),
  observation: string('What the environment returned, verbatim (capped)'),
  exit_code: nullable(int32('Exit status of a bash action')),
  duration_seconds: float64('Wall time of the action (timing)'),
});

/** A difference a replay found: a step's observation, or the environment it ran in. */
export const replayDiffField = struct({
  step: nullable(int32('The tool step (0-based), or null for a difference of the environment')),
  what: string('observation, image_id, tool_versions or seed'),
  action: nullable(string('The recorded action of the step')),
  recorded: nullable(string('What the recording has (null: it lacks the step)')),
  observed: nullable(string('What the replay saw (null: it never got there)')),
});

/** One row per agent rollout on a task, kept whether or not it resolved the task. */
export const trajectoriesSchema = defineSchema({
  name: 'trajectories',
  version: 2,
  doc: 'Agent rollouts on the tasks inside the repository containers: chat messages, tool steps, the submitted patch and its verified reward.',
  text: ['messages'],
  fields: {
    trajectory_id: string('Stable id of the rollout'),
    task_id: string('instance_id of the task'),
    kind: string('issue_fix or mutation_fix'),
    repo: string('The repository as the manifest names it'),
    policy: string('oracle, openai or replay'),
    model: nullable(string('Model name for the openai policy')),
    messages: list(messageField, 'The conversation, for SFT'),
    steps: list(stepField, 'Tool steps: action, observation, exit code'),
    submission: nullable(string('The submitted patch (unified diff), or null when nothing was submitted')),
    resolved: bool('All FAIL_TO_PASS and PASS_TO_PASS tests pass with the submission, in a fresh container'),
    reward: float64('Reward as recorded by the verifier'),
    exit_status: string('submitted, max_turns, max_tokens, timeout or error'),
    turns: int32('Assistant turns taken'),
    prompt_tokens: int64('Prompt tokens used (0 for policies without a model)'),
    completion_tokens: int64('Completion tokens used'),
    wall_seconds: float64('Wall time of the rollout (timing)'),
    max_turns: int32('Turn budget'),
    max_tokens: int64('Token budget'),
    max_wall_seconds: float64('Wall-time budget'),
    image_id: string('The environment image the rollout ran in'),
    tool_versions: string("Worldline's version and a hash of the agent tools' code the rollout ran with"),
    seed: int64("The run's forage seed (tasks and mutation sites)"),
    replay_of: nullable(string('replay: the trajectory_id of the recording replayed')),
    replay_exact: nullable(bool('replay: every observation (timings and addresses masked), the image, the tools and the seed as recorded')),
    replay_diffs: list(replayDiffField, 'replay: where the replay differed from its recording (empty otherwise)'),
  },
});

export type TrajectoryRecord = Infer<typeof trajectoriesSchema>;
