/**
 * Views of trajectories for training: chat `messages` for SFT (what TRL and chat templates take),
 * and (state, action, next state, reward) transitions for world-model training.
 */
import type { TrajectoryRecord } from '../schemas/trajectories.js';

type Message = TrajectoryRecord['messages'][number];

/** OpenAI-style messages: tool calls and tool results kept, empty optional fields dropped. */
export function messagesView(t: TrajectoryRecord): { trajectory_id: string; task_id: string; resolved: boolean; messages: Record<string, unknown>[] } {
  return {
    trajectory_id: t.trajectory_id,
    task_id: t.task_id,
    resolved: t.resolved,
    messages: t.messages.map((m: Message) => ({
      role: m.role,
      content: m.content,
      ...(m.name ? { name: m.name } : {}),
      ...(m.tool_call_id ? { tool_call_id: m.tool_call_id } : {}),
      ...(m.tool_calls.length ? { tool_calls: m.tool_calls } : {}),
    })),
  };
}

export interface Transition {
  trajectory_id: string;
  step: number;
  /** What the agent saw before acting: the task statement, then the previous observation. */
  state: string;
  action: string;
  next_state: string;
  /** The verified reward on the last step, 0 before it. */
  reward: number;
  done: boolean;
}

export function transitionsView(t: TrajectoryRecord): Transition[] {
  const statement = t.messages.find((m) => m.role === 'user')?.content ?? '';
  return t.steps.map((s, i) => ({
    trajectory_id: t.trajectory_id,
    step: i,
    state: i === 0 ? statement : t.steps[i - 1].observation,
    action: s.action,
    next_state: s.observation,
    reward: i === t.steps.length - 1 ? t.reward : 0,
    done: i === t.steps.length - 1,
  }));
}
