/**
 * One client's episode: a fresh container from the task's image at its broken state (rollout.ts's
 * Episode, the forage stage's own), the client's actions as the agent's tool calls, and at the end
 * (submit, the turn limit, the wall limit) the grader's reward from a fresh container of its own:
 * the hidden tests, the signed report, exactly as the dataset's grading.
 */
import { randomUUID } from 'node:crypto';
import type { TrajectoryRecord } from '../../schemas/trajectories.js';
import type { EnvLimits } from '../agent/agent_env.js';
import { agentRunEnv, type Budgets, Episode } from '../agent/rollout.js';
import { outLayout } from '../runtime/layout.js';
import type { PipelineOptions } from '../runtime/options.js';
import { type Action, ProtocolError, type ResetRequest, TOOLS } from './protocol.js';
import type { ServedTask } from './task_picker.js';

export interface SessionConfig {
  budgets: Budgets;
  limits: EnvLimits;
  /** Grading's options: its limits, suite and test timeouts; `out` holds the grading work folders. */
  options: PipelineOptions;
}

/** An observation as the protocol sends it: its fields, the reward (null until done), done, and metadata. */
export interface Reply {
  observation: Record<string, unknown>;
  reward: number | null;
  done: boolean;
  metadata: Record<string, unknown>;
}

export class Session {
  readonly episodeId: string;
  private stepCount = 0;
  private finished: { reward: number; trajectory: TrajectoryRecord } | null = null;
  private closed = false;

  private constructor(
    private readonly episode: Episode,
    private readonly served: ServedTask,
    private readonly actor: { name: string; model: string | null },
    episodeId: string | undefined,
  ) {
    this.episodeId = episodeId ?? randomUUID();
  }

  /** Starts the task's container; the first observation is what the agent sees: the rules and tools, and the statement. */
  static async start(served: ServedTask & { seed: number | null }, req: ResetRequest, config: SessionConfig): Promise<{ session: Session; reply: Reply }> {
    const { task, unit } = served;
    const grade = {
      options: config.options,
      srcLayout: unit.srcLayout,
      vars: unit.vars,
      pytestArgs: unit.pytestArgs,
      hasTimeoutPlugin: unit.hasTimeoutPlugin,
      work: outLayout.work(config.options.out, 'serve', task.unit_id, 'grade'),
    };
    // Grading's container is made at the end: an idle session holds one container, not two.
    const episode = await Episode.start(task, config.budgets, config.limits, agentRunEnv(unit.vars, unit.srcLayout), grade, false);
    const session = new Session(episode, served, { name: req.policy ?? 'client', model: req.model ?? null }, req.episode_id);
    const [system, user] = episode.messages;
    return {
      session,
      reply: {
        observation: { task_id: task.instance_id, kind: task.kind, repo: task.repo, prompt: system.content, problem_statement: user.content, tools: TOOLS },
        reward: null,
        done: false,
        metadata: { episode_id: session.episodeId, seed: served.seed, max_turns: config.budgets.maxTurns, max_wall_s: config.budgets.maxWallS },
      },
    };
  }

  get done(): boolean {
    return this.finished !== null;
  }

  /** The trajectory row of a finished episode. */
  get trajectory(): TrajectoryRecord | null {
    return this.finished?.trajectory ?? null;
  }

  state(): Record<string, unknown> {
    return {
      episode_id: this.episodeId,
      step_count: this.stepCount,
      task_id: this.served.task.instance_id,
      turns: this.episode.turns,
      done: this.done,
      exit_status: this.episode.exitStatus,
      reward: this.finished?.reward ?? null,
    };
  }

  /** One action. A tool call is one turn; submit, the last turn or the wall limit ends the episode with the grader's reward. */
  async step(action: Action): Promise<Reply> {
    if (this.finished) throw new ProtocolError('SESSION_ERROR', 'the episode is over: reset for another');
    this.stepCount += 1;
    if (action.type === 'list_tools') return { observation: { tools: TOOLS }, reward: null, done: false, metadata: {} };
    // A spent wall budget ends the episode before the call runs: it is graded as it stands.
    if (this.episode.checkBudgets()) return this.finish(action.tool_name, null);
    const toolCall = { id: `call_${this.stepCount}`, name: action.tool_name, arguments: JSON.stringify(action.arguments) };
    const [obs] = await this.episode.act({ content: '', toolCalls: [toolCall], promptTokens: 0, completionTokens: 0 });
    const result = { output: obs.output, exit_code: obs.exitCode, duration_s: Math.round(obs.durationS * 1000) / 1000 };
    const error = obs.error ? { error_type: 'tool_error', message: obs.output.slice(0, 2000) } : null;
    if (this.episode.checkBudgets()) return this.finish(action.tool_name, { result, error });
    return { observation: { tool_name: action.tool_name, result, error }, reward: null, done: false, metadata: { turns: this.episode.turns } };
  }

  private async finish(toolName: string, last: { result: unknown; error: unknown } | null): Promise<Reply> {
    const { trajectory, grade } = await this.episode.finish(this.actor);
    this.finished = { reward: trajectory.reward, trajectory };
    return {
      observation: { tool_name: toolName, result: last?.result ?? null, error: last?.error ?? null },
      reward: trajectory.reward,
      done: true,
      metadata: {
        exit_status: trajectory.exit_status,
        resolved: grade.resolved,
        applied: grade.applied,
        // Counts, not names: the hidden tests stay hidden for the next episode on the task.
        fail_to_pass: { passed: grade.fail_to_pass.passed.length, failed: grade.fail_to_pass.failed.length },
        pass_to_pass: { passed: grade.pass_to_pass.passed.length, failed: grade.pass_to_pass.failed.length },
        report_problem: grade.problem,
        trajectory_id: trajectory.trajectory_id,
        turns: trajectory.turns,
      },
    };
  }

  /** Removes the episode's container (a finished one's went at grading); safe to call twice. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    if (!this.finished) await this.episode.abandon();
  }
}
