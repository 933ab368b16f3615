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

/** One row per agent rollout on a task, kept whether or not it resolved the task. */
export const trajectoriesSchema = defineSchema({
  name: 'trajectories',
  version: 1,
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
  },
});

export type TrajectoryRecord = Infer<typeof trajectoriesSchema>;
