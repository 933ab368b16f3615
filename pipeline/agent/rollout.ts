/**
 * One rollout: a policy works a task in a fresh agent environment under budgets of turns,
 * tokens and wall time; the submission is then graded in another fresh container. Every
 * trajectory is kept, resolved or not. An `Episode` is that rollout one turn at a time, so a
 * turn can come from a policy here (forage) or from a trainer's client over the network (serve):
 * the same environment, budgets, grading and trajectory row either way.
 */
import { createHash } from 'node:crypto';
import { toolVersion } from '../../core/package.js';
import type { TaskRecord } from '../../schemas/tasks.js';
import type { TrajectoryRecord } from '../../schemas/trajectories.js';
import { TRACER_CODE, tracerCodeHash } from '../sandbox/tracers.js';
import { AgentEnv, type EnvLimits, type Observation, TOOL_SPECS } from './agent_env.js';
import { type Grade, type GradeEnv, gradeSubmission, type HeldGrading, holdGrading } from './grading.js';
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

/** The environment the agent's commands run under: the unit's variables, its src/ on the import path, no bytecode, UTC. */
export function agentRunEnv(vars: Record<string, string>, srcLayout: boolean): Record<string, string> {
  const pythonPath = [srcLayout ? '/repo/src' : '', vars.PYTHONPATH].filter(Boolean).join(':');
  return { ...vars, PYTHONPATH: pythonPath, PYTHONDONTWRITEBYTECODE: '1', TZ: 'UTC' };
}

/** Who took the episode's turns, as its trajectory row names them. */
interface Actor {
  name: string;
  model: string | null;
}

export class Episode {
  readonly messages: ChatMessage[];
  private readonly steps: TrajectoryRecord['steps'] = [];
  private submission: string | null = null;
  /** What ended the episode; null while it runs. */
  private ended: string | null = null;
  private turnsTaken = 0;
  private promptTokens = 0;
  private completionTokens = 0;

  private constructor(
    readonly task: TaskRecord,
    private readonly budgets: Budgets,
    private readonly grade: GradeEnv,
    private readonly env: AgentEnv,
    private readonly heldGrading: Promise<HeldGrading> | null,
    private readonly started: number,
  ) {
    this.messages = [
      { role: 'system', content: `${SYSTEM_PROMPT}\n\nTools (JSON schema): ${JSON.stringify(TOOL_SPECS.map((t) => t.function))}` },
      { role: 'user', content: task.problem_statement },
    ];
  }

  /**
   * Starts the agent's container at the task state. `holdAhead`: grading's fresh container is
   * made and started now, while the agent works, and held until the submission is in (a rollout
   * that ends soon); without it grading makes its container at the end (a session that may sit
   * idle holds one container, not two).
   */
  static async start(
    task: TaskRecord,
    budgets: Budgets,
    limits: EnvLimits,
    runEnv: Record<string, string>,
    grade: GradeEnv,
    holdAhead = true,
  ): Promise<Episode> {
    const started = Date.now();
    const held = holdAhead ? holdGrading(task, grade) : null;
    // Its failure is met where it is awaited; until then it must not count as unhandled.
    held?.catch(() => undefined);
    let env: AgentEnv;
    try {
      env = await AgentEnv.start(task, runEnv, limits);
    } catch (e) {
      await Episode.cancel(held);
      throw e;
    }
    return new Episode(task, budgets, grade, env, held, started);
  }

  private static cancel(held: Promise<HeldGrading> | null): Promise<void> {
    return held ? held.then((h) => h.run.cancel()).catch(() => undefined) : Promise.resolve();
  }

  get turns(): number {
    return this.turnsTaken;
  }

  get elapsedS(): number {
    return (Date.now() - this.started) / 1000;
  }

  /** What ended the episode (submitted, max_turns, max_tokens, timeout, error), or null while it runs. */
  get exitStatus(): string | null {
    return this.ended;
  }

  /** Ends the episode before a turn when a budget is spent; says whether it has ended. */
  checkBudgets(): boolean {
    if (this.ended) return true;
    if (this.turnsTaken >= this.budgets.maxTurns) this.ended = 'max_turns';
    else if (this.elapsedS > this.budgets.maxWallS) this.ended = 'timeout';
    else if (this.promptTokens + this.completionTokens > this.budgets.maxTokens) this.ended = 'max_tokens';
    return this.ended !== null;
  }

  /** Ends the episode with `status` (a policy that failed: error). */
  end(status: string, note?: string): void {
    if (note) this.messages.push({ role: 'user', content: note });
    this.ended ??= status;
  }

  /** One assistant turn: its tool calls run in order, each observation recorded; a submission ends the episode. */
  async act(turn: PolicyTurn): Promise<Observation[]> {
    this.turnsTaken += 1;
    this.promptTokens += turn.promptTokens;
    this.completionTokens += turn.completionTokens;
    this.messages.push({ role: 'assistant', content: turn.content, tool_calls: turn.toolCalls });
    if (!turn.toolCalls.length) {
      this.messages.push({ role: 'user', content: 'No tool was called. Call one tool per turn; call submit when you are done.' });
      return [];
    }
    const observations: Observation[] = [];
    for (const tc of turn.toolCalls) {
      const obs = await this.env.call(tc, this.budgets.maxWallS - this.elapsedS);
      observations.push(obs);
      this.messages.push({ role: 'tool', content: obs.output, name: tc.name, tool_call_id: tc.id });
      this.steps.push({
        action: `${tc.name} ${tc.arguments}`,
        observation: obs.output,
        exit_code: obs.exitCode,
        duration_seconds: Math.round(obs.durationS * 1000) / 1000,
      });
      if (obs.submitted !== undefined) {
        this.submission = obs.submitted;
        this.ended = 'submitted';
      }
    }
    return observations;
  }

  /** Grades what was submitted (nothing: unresolved) in a fresh container, the agent's container gone; the trajectory row and the grade. */
  async finish(actor: Actor): Promise<{ trajectory: TrajectoryRecord; grade: Grade }> {
    this.ended ??= 'max_turns';
    // Holding can fail (the engine, the work disk): grading then makes its container itself, as before.
    const held = this.heldGrading ? await this.heldGrading.catch(() => undefined) : undefined;
    // The rollout's container goes while grading's fresh one runs: they share nothing.
    const [graded] = await Promise.all([gradeSubmission(this.task, this.submission, this.grade, held), this.env.close()]);
    return { trajectory: this.trajectory(actor, graded), grade: graded };
  }

  /** Lets go of everything without grading (a client gone, a rollout that threw). */
  abandon(): Promise<unknown> {
    return Promise.all([this.env.close(), Episode.cancel(this.heldGrading)]);
  }

  private trajectory(actor: Actor, graded: Grade): TrajectoryRecord {
    const task = this.task;
    const id = createHash('sha256')
      .update(JSON.stringify([task.instance_id, actor.name, actor.model, this.messages.map((m) => m.content)]))
      .digest('hex')
      .slice(0, 12);
    return {
      trajectory_id: `${task.instance_id}.${actor.name}.${id}`,
      task_id: task.instance_id,
      kind: task.kind,
      repo: task.repo,
      policy: actor.name,
      model: actor.model,
      messages: this.messages.map((m) => ({
        role: m.role,
        content: m.content,
        name: m.name ?? null,
        tool_call_id: m.tool_call_id ?? null,
        tool_calls: (m.tool_calls ?? []).map((tc) => ({ id: tc.id, type: 'function', function: { name: tc.name, arguments: tc.arguments } })),
      })),
      steps: this.steps,
      submission: this.submission,
      resolved: graded.resolved,
      reward: graded.resolved ? 1 : 0,
      exit_status: this.ended ?? 'max_turns',
      turns: this.turnsTaken,
      prompt_tokens: this.promptTokens,
      completion_tokens: this.completionTokens,
      wall_seconds: Math.round(this.elapsedS * 100) / 100,
      max_turns: this.budgets.maxTurns,
      max_tokens: this.budgets.maxTokens,
      max_wall_seconds: this.budgets.maxWallS,
      image_id: task.image_id,
      tool_versions: toolVersions(),
      seed: this.grade.options.forageSeed,
      replay_of: null,
      replay_exact: null,
      replay_diffs: [],
    };
  }
}

export async function rollout(
  task: TaskRecord,
  policy: Policy,
  budgets: Budgets,
  limits: EnvLimits,
  runEnv: Record<string, string>,
  grade: GradeEnv,
): Promise<TrajectoryRecord> {
  const episode = await Episode.start(task, budgets, limits, runEnv, grade);
  try {
    while (!episode.checkBudgets()) {
      let turn: PolicyTurn;
      try {
        turn = await policy.next(episode.messages);
      } catch (e) {
        episode.end('error', `[policy error: ${(e as Error).message}]`);
        break;
      }
      await episode.act(turn);
    }
  } catch (e) {
    await episode.abandon();
    throw e;
  }
  return (await episode.finish(policy)).trajectory;
}
