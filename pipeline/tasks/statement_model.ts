/**
 * Problem statements written by a model (`--statement-model`), for issue-fix tasks with no linked
 * issue: the model sees what fails on the task state (test names, their failures, the tests'
 * code) and writes an issue as a user would, the way SWE-smith writes its issues. It never sees
 * the gold patch or a commit message; a statement that still quotes a line of the gold patch is
 * rejected and the failing-tests statement (issue_statement.ts) is used instead.
 */
import { chatOnce } from '../../core/chat.js';
import type { PipelineOptions } from '../runtime/options.js';

const SYSTEM = [
  'You write GitHub issues for a Python library.',
  'Given tests that fail on the current code and how they fail, describe the wrong behaviour a user would observe:',
  'what was called, what happened, what was expected. Include a short reproduction snippet.',
  'Do not propose a fix, do not mention the tests or their names, and do not guess at the implementation.',
  'Answer with the issue text only: a title line, a blank line, then the body.',
].join(' ');

export interface StatementInput {
  failures: { nodeid: string; message: string | null }[];
  testPatch: string;
}

/** A writer of statements through the OpenAI-compatible server in `openai`; null where the model gives nothing usable. */
export function modelStatementWriter(openai: NonNullable<PipelineOptions['openai']>): (input: StatementInput) => Promise<string | null> {
  const ask = chatOnce(openai);
  return async ({ failures, testPatch }) => {
    const user = [
      'Failing tests and their failures:',
      ...failures.slice(0, 10).map((f) => `- ${f.nodeid}: ${(f.message ?? 'failed').slice(0, 400)}`),
      '',
      'The tests (a diff adding or changing them):',
      testPatch.slice(0, 12_000),
    ].join('\n');
    const text = (await ask(SYSTEM, user)).trim();
    return text ? `${text}\n` : null;
  };
}
