/**
 * Who drives a rollout. A policy sees the conversation so far and answers with one assistant
 * message (usually one tool call).
 */
import type { ToolCall } from './agent_env.js';

export interface ChatMessage {
  role: 'system' | 'user' | 'assistant' | 'tool';
  content: string;
  name?: string;
  tool_call_id?: string;
  tool_calls?: ToolCall[];
}

export interface PolicyTurn {
  content: string;
  toolCalls: ToolCall[];
  promptTokens: number;
  completionTokens: number;
}

export interface Policy {
  name: string;
  model: string | null;
  next(messages: ChatMessage[]): Promise<PolicyTurn>;
}

interface Hunk {
  path: string;
  search: string;
  replace: string;
}

/** search/replace pairs from a unified diff: each hunk's old side becomes its new side. */
export function hunksOf(patch: string): Hunk[] {
  const hunks: Hunk[] = [];
  let path = '';
  let cur: { old: string[]; new: string[] } | null = null;
  const flush = () => {
    if (cur) hunks.push({ path, search: cur.old.join(''), replace: cur.new.join('') });
    cur = null;
  };
  const lines = patch.split(/(?<=\n)/);
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i];
    if (line.startsWith('+++ ')) {
      flush();
      path = line.slice(4).trim().replace(/^b\//, '');
    } else if (line.startsWith('--- ')) flush();
    else if (line.startsWith('@@')) {
      flush();
      cur = { old: [], new: [] };
    } else if (cur && line.startsWith('\\')) {
      // "\ No newline at end of file": the previous line had no newline on that side.
      const target = lines[i - 1]?.startsWith('+') ? cur.new : lines[i - 1]?.startsWith('-') ? cur.old : null;
      for (const side of target ? [target] : [cur.old, cur.new]) side[side.length - 1] = side[side.length - 1].replace(/\n$/, '');
    } else if (cur) {
      const body = line.slice(1);
      if (line.startsWith(' ')) {
        cur.old.push(body);
        cur.new.push(body);
      } else if (line.startsWith('-')) cur.old.push(body);
      else if (line.startsWith('+')) cur.new.push(body);
    }
  }
  flush();
  return hunks;
}
