/**
 * A problem statement for an issue-fix task with no linked issue, written from the failing
 * behaviour on the task state (the approach of SWE-smith and R2E-Gym): which tests fail and how
 * (assertion messages, exception text). It never holds a commit message, a branch name or a line
 * of the gold patch: those give the fix away.
 */
import { type IssueText, issueProblemStatement } from './issue_export.js';
import type { StatementInput } from './statement_model.js';

/** The gold patch's changed lines, trimmed, long enough to mean something: what a statement must not quote. */
function goldLines(patch: string): string[] {
  return patch
    .split('\n')
    .filter((l) => /^[+-]/.test(l) && !/^(\+\+\+|---) /.test(l))
    .map((l) => l.slice(1).trim())
    .filter((l) => l.length >= 6 && /\w/.test(l));
}

/** The first line of `text` that holds a changed line of the gold patch, or null. */
export function quotedGoldLine(text: string, patch: string): string | null {
  const gold = goldLines(patch);
  for (const line of text.split('\n')) {
    const hit = gold.find((g) => line.includes(g));
    if (hit) return hit;
  }
  return null;
}

const MAX_TESTS = 5;
const MAX_MESSAGE = 400;

/**
 * The statement: the failing tests by name and module, each with its failure on the task state;
 * message lines that quote the gold patch are left out.
 */
export function behaviourStatement(failures: { nodeid: string; message: string | null }[], patch: string): string {
  const gold = goldLines(patch);
  const clean = (message: string) =>
    message
      .split('\n')
      .filter((l) => l.trim() && !gold.some((g) => l.includes(g)))
      .join('\n')
      .slice(0, MAX_MESSAGE)
      .trim();
  const shown = failures.slice(0, MAX_TESTS);
  const parts = [
    `The current code behaves incorrectly: ${failures.length === 1 ? 'this test fails' : `these ${failures.length} tests fail`} where the expected behaviour is that ${failures.length === 1 ? 'it passes' : 'they pass'}.`,
    '',
  ];
  for (const f of shown) {
    const [file, ...rest] = f.nodeid.split('::');
    const message = f.message ? clean(f.message) : '';
    parts.push(`- \`${rest.join('::') || file}\` (${file})${message ? ':' : ''}`);
    if (message) parts.push(...message.split('\n').map((l) => `      ${l}`));
  }
  if (failures.length > shown.length) parts.push(`- and ${failures.length - shown.length} more in the same module(s)`);
  parts.push('', 'Find the cause in the library code and fix it; the tests themselves are correct.');
  return parts.join('\n') + '\n';
}

/**
 * The problem statement: the linked issue's text, else the model's (when asked for), else one
 * written from the failing tests. A text quoting a line of the gold patch gives the fix away and
 * is never used.
 */
export async function chooseStatement(
  issue: IssueText | null,
  failures: { nodeid: string; message: string | null }[],
  patches: { patch: string; test_patch: string },
  write: ((input: StatementInput) => Promise<string | null>) | undefined,
  log: (m: string) => void,
): Promise<{ statement: string; source: 'issue' | 'model' | 'failing_tests' }> {
  if (issue) {
    const text = issueProblemStatement(issue);
    if (!quotedGoldLine(text, patches.patch)) return { statement: text, source: 'issue' };
    log(`issue #${issue.number} quotes the gold patch; the statement is written from the failing tests`);
  } else if (write) {
    const text = await write({ failures, testPatch: patches.test_patch }).catch((e: Error) => {
      log(`the statement model failed (${e.message}); the statement is written from the failing tests`);
      return null;
    });
    const quoted = text ? quotedGoldLine(text, patches.patch) : null;
    if (text && !quoted) return { statement: text, source: 'model' };
    if (quoted) log(`the model's statement quotes the gold patch ("${quoted.slice(0, 60)}"); rejected`);
  }
  return { statement: behaviourStatement(failures, patches.patch), source: 'failing_tests' };
}
