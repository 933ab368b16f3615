/**
 * Who drives a rollout. A policy sees the conversation so far and answers with one assistant
 * message (usually one tool call). `oracle` works a task as an expert would through the real
 * tools: run the failing tests, view the file, apply the gold fix with `edit`, rerun, submit.
 */
import type { TaskRecord } from '../../../schemas/tasks.js';
import type { ToolCall } from '../agent_env.js';

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

export interface Hunk {
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
      if (line.startsWith(' ')) (cur.old.push(body), cur.new.push(body));
      else if (line.startsWith('-')) cur.old.push(body);
      else if (line.startsWith('+')) cur.new.push(body);
    }
  }
  flush();
  return hunks;
}

/** `testTimeoutS` bounds each test the oracle runs: on the task state one may loop forever. */
export function oraclePolicy(task: TaskRecord, testTimeoutS = 20): Policy {
  const tests = task.FAIL_TO_PASS.slice(0, 5);
  const runTests = `python3 -m pytest -q -p no:cacheprovider --timeout=${testTimeoutS} ${tests.map((t) => `'${t.replace(/'/g, `'\\''`)}'`).join(' ')}`;
  const hunks = hunksOf(task.patch);
  const files = [...new Set(hunks.map((h) => h.path))];
  const plan: { content: string; name: string; args: Record<string, unknown> }[] = [
    { content: 'First, reproduce the failure.', name: 'bash', args: { command: runTests } },
    ...files.map((path) => ({ content: `Look at ${path}.`, name: 'view', args: { path } })),
    ...hunks.map((h) => ({ content: `Fix the code in ${h.path}.`, name: 'edit', args: { path: h.path, search: h.search, replace: h.replace } })),
    { content: 'Check that the tests pass now.', name: 'bash', args: { command: runTests } },
    { content: 'The failing tests pass; submitting.', name: 'submit', args: {} },
  ];
  let step = 0;
  return {
    name: 'oracle',
    model: null,
    async next() {
      const p = plan[Math.min(step, plan.length - 1)];
      step += 1;
      return { content: p.content, toolCalls: [{ id: `call_${step}`, name: p.name, arguments: JSON.stringify(p.args) }], promptTokens: 0, completionTokens: 0 };
    },
  };
}
