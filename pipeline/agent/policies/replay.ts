/**
 * The `replay` policy: replays a recorded trajectory's assistant messages, in order and verbatim,
 * through the real tools, and reports where the new observations differ from the recorded ones.
 *
 * Step i is the i-th tool call of the conversation (the i-th tool message, the i-th entry of
 * `steps`), in both the recording and the replay. The policy compares as it goes: each call to
 * `next` sees the tool messages that answered its previous turn. The last observation (usually
 * submit's) arrives after the last turn, so `differences(replayed)` takes the finished rollout's
 * record and compares all of its steps, including steps one side has and the other lacks.
 *
 * Observations are compared after `normalize` (by default durations such as pytest's "in 0.05s"
 * and memory addresses are masked, since they change from run to run); differences report the
 * raw texts.
 */
import type { TrajectoryRecord } from '../../../schemas/trajectories.js';
import type { ChatMessage, Policy, PolicyTurn } from '../policy.js';
import type { Budgets } from '../rollout.js';

export interface ReplayDifference {
  /** Index of the tool step (0-based, across the whole conversation). */
  step: number;
  /** The recorded action: tool name and arguments, as in `steps[i].action`. */
  action: string;
  /** The recorded observation, or null when the recording has no such step. */
  recorded: string | null;
  /** The observation in the replay, or null when the replay never got there. */
  observed: string | null;
}

export interface ReplayOptions {
  /** Applied to both sides before comparing; `null` compares the raw texts. */
  normalize?: ((observation: string) => string) | null;
  /** Throw from `next` at the first difference seen, which ends the rollout (exit status error). */
  stopAtFirstDifference?: boolean;
}

export interface ReplayPolicy extends Policy {
  /**
   * The differences so far. With the finished rollout's record, every step is compared (the last
   * observation included, and missing or extra steps); without it, only the observations the
   * policy has seen in `messages`.
   */
  differences(replayed?: Pick<TrajectoryRecord, 'steps'>): ReplayDifference[];
  /** Assistant turns replayed so far, and how many the recording has. */
  progress(): { turns: number; recordedTurns: number };
}

/** Masks what legitimately changes between runs of the same commands. */
export function defaultNormalize(s: string): string {
  return s.replace(/\bin \d+(?:\.\d+)?s\b(?: \(\d+:\d\d:\d\d(?:\.\d+)?\))?/g, 'in <T>s').replace(/\b0x[0-9a-fA-F]{6,}\b/g, '0x<ADDR>');
}

/**
 * What a finished replay stores in its row: the recording it replayed, every step whose
 * observation differs, and the environment (image, tools, seed) where it differs from the
 * recording's; exact when there is none. A recording from before these were recorded (schema 1)
 * has no environment to compare, so it can never be exact.
 */
export function replayOutcome(
  recorded: TrajectoryRecord,
  replayed: TrajectoryRecord,
  policy: ReplayPolicy,
): Pick<TrajectoryRecord, 'replay_of' | 'replay_exact' | 'replay_diffs'> {
  const env = (['image_id', 'tool_versions', 'seed'] as const)
    .map((what) => ({ what, recorded: recorded[what] ?? null, observed: replayed[what] }))
    .filter((d) => d.recorded !== d.observed)
    .map((d) => ({ step: null, what: d.what, action: null, recorded: d.recorded === null ? null : String(d.recorded), observed: String(d.observed) }));
  const steps = policy
    .differences(replayed)
    .map((d) => ({ step: d.step, what: 'observation', action: d.action || null, recorded: d.recorded, observed: d.observed }));
  const diffs = [...env, ...steps];
  return { replay_of: recorded.trajectory_id, replay_exact: diffs.length === 0, replay_diffs: diffs };
}

/** Recorded trajectories run again under their own budgets. */
export function replayBudgets(t: Pick<TrajectoryRecord, 'max_turns' | 'max_tokens' | 'max_wall_seconds'>): Budgets {
  return { maxTurns: t.max_turns, maxTokens: t.max_tokens, maxWallS: t.max_wall_seconds };
}

/**
 * Compares recorded steps with replayed observations, step by step. With `complete`, a step one
 * side has and the other lacks is a difference too; without it, only the common prefix counts.
 */
export function compareObservations(
  recorded: TrajectoryRecord['steps'],
  observed: string[],
  normalize: ((s: string) => string) | null = defaultNormalize,
  complete = true,
): ReplayDifference[] {
  const norm = normalize ?? ((s: string) => s);
  const out: ReplayDifference[] = [];
  const n = complete ? Math.max(recorded.length, observed.length) : Math.min(recorded.length, observed.length);
  for (let i = 0; i < n; i++) {
    const r = recorded[i];
    const o = i < observed.length ? observed[i] : null;
    if (r && o !== null && norm(r.observation) === norm(o)) continue;
    out.push({ step: i, action: r ? r.action : '', recorded: r ? r.observation : null, observed: o });
  }
  return out;
}

export function replayPolicy(trajectory: TrajectoryRecord, opts: ReplayOptions = {}): ReplayPolicy {
  const normalize = opts.normalize === undefined ? defaultNormalize : opts.normalize;
  const turns = trajectory.messages.filter((m) => m.role === 'assistant');
  // Steps come from the record's steps; a record without them (hand-made) falls back to its tool messages.
  const recorded: TrajectoryRecord['steps'] = trajectory.steps.length
    ? trajectory.steps
    : trajectory.messages.filter((m) => m.role === 'tool').map((m) => ({ action: m.name ?? '', observation: m.content, exit_code: null, duration_seconds: 0 }));
  let next = 0;
  let seen: string[] = [];
  return {
    name: 'replay',
    model: trajectory.model,
    progress: () => ({ turns: next, recordedTurns: turns.length }),
    differences(replayed) {
      if (replayed)
        return compareObservations(
          recorded,
          replayed.steps.map((s) => s.observation),
          normalize,
          true,
        );
      return compareObservations(recorded, seen, normalize, false);
    },
    async next(messages: ChatMessage[]): Promise<PolicyTurn> {
      seen = messages.filter((m) => m.role === 'tool').map((m) => m.content);
      if (opts.stopAtFirstDifference) {
        const diff = compareObservations(recorded, seen, normalize, false)[0];
        if (diff) throw new Error(`replay of ${trajectory.trajectory_id} diverged at step ${diff.step} (${diff.action.slice(0, 200)})`);
      }
      if (next >= turns.length) throw new Error(`replay of ${trajectory.trajectory_id}: the recording has no more assistant turns (${turns.length})`);
      const m = turns[next++];
      return {
        content: m.content,
        toolCalls: m.tool_calls.map((tc) => ({ id: tc.id, name: tc.function.name, arguments: tc.function.arguments })),
        promptTokens: 0,
        completionTokens: 0,
      };
    },
  };
}
