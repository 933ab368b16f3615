/**
 * The `oracle` policy works a task as an expert would through the real tools: run the failing
 * tests, view the file, apply the gold fix with `edit`, rerun, submit.
 */
import type { TaskRecord } from '../../../schemas/tasks.js';
import { hunksOf, type Policy } from '../policy.js';

/** Turns the oracle's plan takes: a run, a view per file, an edit per hunk, a rerun, a submit, and a spare. */
export function oracleTurns(task: TaskRecord): number {
  const hunks = hunksOf(task.patch);
  return 4 + new Set(hunks.map((h) => h.path)).size + hunks.length;
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
