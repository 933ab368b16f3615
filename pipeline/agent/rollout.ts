/**
 * One rollout: a policy works a task in a fresh agent environment under budgets of turns,
 * tokens and wall time; the submission is then graded in another fresh container. Every
 * trajectory is kept, resolved or not.
 */
import { createHash } from 'node:crypto';
import { toolVersion } from '../../core/package.js';
import type { TaskRecord } from '../../schemas/tasks.js';
import type { TrajectoryRecord } from '../../schemas/trajectories.js';
import { TRACER_CODE, tracerCodeHash } from '../sandbox/tracers.js';
import { AgentEnv, type EnvLimits, TOOL_SPECS } from './agent_env.js';
import { type GradeEnv, gradeSubmission, holdGrading } from './grading.js';
import type { ChatMessage, Policy, PolicyTurn } from './policy.js';

export interface Budgets {
  maxTurns: number;
  maxTokens: number;
  maxWallS: number;
}

export const SYSTEM_PROMPT = [
  'You are fixing a bug in the Python repository at /repo. You have no network.',
  'Tools: bash (run a command), view (read a file or list a folder), edit (replace one exact snippet), create (new file), submit (end with your changes).',
  'Call exactly one tool per turn. Do not change the tests.',
].join('\n');

/** What a replay must match besides the image: our version and the agent tools' code. */
function toolVersions(): string {
  return `worldline ${toolVersion()}; agent_tools ${tracerCodeHash(TRACER_CODE.agent)}`;
}

export async function rollout(
  task: TaskRecord,
  policy: Policy,
  budgets: Budgets,
  limits: EnvLimits,
  runEnv: Record<string, string>,
  grade: GradeEnv,
): Promise<TrajectoryRecord> {
  const started = Date.now();
  const messages: ChatMessage[] = [
    { role: 'system', content: `${SYSTEM_PROMPT}\n\nTools (JSON schema): ${JSON.stringify(TOOL_SPECS.map((t) => t.function))}` },
    { role: 'user', content: task.problem_statement },
  ];
  const steps: TrajectoryRecord['steps'] = [];
  let submission: string | null = null;
  let exitStatus = 'max_turns';
  let turns = 0;
  let promptTokens = 0;
  let completionTokens = 0;
  // Grading's fresh container is made and started while the agent works, and held until the submission is in.
  const heldGrading = holdGrading(task, grade);
  // Its failure is met where it is awaited; until then it must not count as unhandled.
  heldGrading.catch(() => undefined);
  const cancelGrading = () => heldGrading.then((h) => h.run.cancel()).catch(() => undefined);
  let env: AgentEnv;
  try {
    env = await AgentEnv.start(task, runEnv, limits);
  } catch (e) {
    await cancelGrading();
    throw e;
  }
  try {
    while (turns < budgets.maxTurns) {
      if ((Date.now() - started) / 1000 > budgets.maxWallS) {
        exitStatus = 'timeout';
        break;
      }
      if (promptTokens + completionTokens > budgets.maxTokens) {
        exitStatus = 'max_tokens';
        break;
      }
      let turn: PolicyTurn;
      try {
        turn = await policy.next(messages);
      } catch (e) {
        exitStatus = 'error';
        messages.push({ role: 'user', content: `[policy error: ${(e as Error).message}]` });
        break;
      }
      turns += 1;
      promptTokens += turn.promptTokens;
      completionTokens += turn.completionTokens;
      messages.push({ role: 'assistant', content: turn.content, tool_calls: turn.toolCalls });
      if (!turn.toolCalls.length) {
        messages.push({ role: 'user', content: 'No tool was called. Call one tool per turn; call submit when you are done.' });
        continue;
      }
      for (const tc of turn.toolCalls) {
        const obs = await env.call(tc, budgets.maxWallS - (Date.now() - started) / 1000);
        messages.push({ role: 'tool', content: obs.output, name: tc.name, tool_call_id: tc.id });
        steps.push({
          action: `${tc.name} ${tc.arguments}`,
          observation: obs.output,
          exit_code: obs.exitCode,
          duration_seconds: Math.round(obs.durationS * 1000) / 1000,
        });
        if (obs.submitted !== undefined) {
          submission = obs.submitted;
          exitStatus = 'submitted';
        }
      }
      if (exitStatus === 'submitted') break;
    }
  } catch (e) {
    await Promise.all([env.close(), cancelGrading()]);
    throw e;
  }
  // Holding can fail (the engine, the work disk): grading then makes its container itself, as before.
  const held = await heldGrading.catch(() => undefined);
  // The rollout's container goes while grading's fresh one runs: they share nothing.
  const [graded] = await Promise.all([gradeSubmission(task, submission, grade, held), env.close()]);
  const id = createHash('sha256')
    .update(JSON.stringify([task.instance_id, policy.name, policy.model, messages.map((m) => m.content)]))
    .digest('hex')
    .slice(0, 12);
  return {
    trajectory_id: `${task.instance_id}.${policy.name}.${id}`,
    task_id: task.instance_id,
    kind: task.kind,
    repo: task.repo,
    policy: policy.name,
    model: policy.model,
    messages: messages.map((m) => ({
      role: m.role,
      content: m.content,
      name: m.name ?? null,
      tool_call_id: m.tool_call_id ?? null,
      tool_calls: (m.tool_calls ?? []).map((tc) => ({ id: tc.id, type: 'function', function: { name: tc.name, arguments: tc.arguments } })),
    })),
    steps,
    submission,
    resolved: graded.resolved,
    reward: graded.resolved ? 1 : 0,
    exit_status: exitStatus,
    turns,
    prompt_tokens: promptTokens,
    completion_tokens: completionTokens,
    wall_seconds: Math.round((Date.now() - started) / 10) / 100,
    max_turns: budgets.maxTurns,
    max_tokens: budgets.maxTokens,
    max_wall_seconds: budgets.maxWallS,
    image_id: task.image_id,
    tool_versions: toolVersions(),
    seed: grade.options.forageSeed,
    replay_of: null,
    replay_exact: null,
    replay_diffs: [],
  };
}
