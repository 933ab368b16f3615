/**
 * Issue exports: the text of a repository's issues (JSON Lines of `{number, title, body}`), the
 * `#N` references in commit messages that tie a fix to one of them, and the problem statement
 * an issue-fix task takes from the issue it fixes (see issue_verification.ts).
 */
import { readFileSync } from 'node:fs';
import { jsonObjectLine, LineError } from '../../core/jsonl.js';

export interface IssueText {
  number: number;
  title: string;
  body: string;
  /** Label names, when the export has them (a GitHub API dump does): a secondary signal of a bug. */
  labels: string[];
}

interface IssueExportError {
  file: string;
  line: number;
  message: string;
}

/** One line of an issue export: the issue, what is wrong with the line, or null for a blank line. */
function issueProblem(raw: string, seen: Map<number, IssueText>): IssueText | string | null {
  if (!raw.trim()) return null;
  let o: Record<string, unknown>;
  try {
    o = jsonObjectLine(raw);
  } catch (e) {
    if (e instanceof LineError) return e.message;
    throw e;
  }
  const number = typeof o.number === 'string' && /^\d+$/.test(o.number) ? Number(o.number) : o.number;
  if (typeof number !== 'number' || !Number.isSafeInteger(number) || number <= 0) return '"number" must be a positive integer';
  if (typeof o.title !== 'string') return '"title" must be a string';
  if (o.body !== undefined && o.body !== null && typeof o.body !== 'string') return '"body" must be a string or null';
  if (seen.has(number)) return `issue #${number} appears twice`;
  const labels = Array.isArray(o.labels)
    ? o.labels
        .map((l) => (typeof l === 'string' ? l : typeof (l as { name?: unknown })?.name === 'string' ? (l as { name: string }).name : null))
        .filter((l) => l !== null)
    : [];
  return { number, title: o.title, body: (o.body as string | null | undefined) ?? '', labels };
}

/**
 * Parses an issue export: JSON Lines, one `{number, title, body}` a line (other keys, as a GitHub
 * API dump has, are ignored). Bad lines are reported with their line number; the rest are kept.
 */
export function parseIssueExport(text: string, file: string): { issues: Map<number, IssueText>; errors: IssueExportError[] } {
  const issues = new Map<number, IssueText>();
  const errors: IssueExportError[] = [];
  for (const [i, raw] of text.split('\n').entries()) {
    const problem = issueProblem(raw, issues);
    if (typeof problem === 'string') errors.push({ file, line: i + 1, message: problem });
    else if (problem) issues.set(problem.number, problem);
  }
  return { issues, errors };
}

/** Reads an issue export file; an unreadable file or any bad line throws, naming file and line. */
export function readIssueExport(file: string): Map<number, IssueText> {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (e) {
    throw new Error(`cannot read issue export ${file}: ${(e as NodeJS.ErrnoException).code ?? (e as Error).message}`);
  }
  const { issues, errors } = parseIssueExport(text, file);
  if (errors.length) throw new Error(errors.map((e) => `${e.file}:${e.line}: ${e.message}`).join('\n'));
  return issues;
}

/**
 * Issue references in a commit message, most explicit first, without duplicates: closing keywords
 * ("Fixes #12", "closes owner/repo#12"), "gh-12", "issue 12" / "bug #12", then any other `#N`.
 * Never the pull request's own number ("Merge pull request #40", "PR #40"), nor HTML entities like `&#39;`.
 */
export function issueReferences(message: string): number[] {
  const out: number[] = [];
  const add = (m: string) => {
    const n = Number(m);
    if (n > 0 && !out.includes(n)) out.push(n);
  };
  const text = message.replace(/\b(merge pull request|pull request|PR)\s*#\d+/gi, '');
  const explicit =
    /\b(?:(?:close[sd]?|fix(?:e[sd])?|resolve[sd]?)\b:?\s+(?:[\w.-]+\/[\w.-]+)?#(\d{1,9})|gh-(\d{1,9})|(?:issue|bug)s?\s*#?(\d{1,9})|[\w.-]+\/[\w.-]+#(\d{1,9}))\b/gi;
  for (const m of text.matchAll(explicit)) add(m[1] ?? m[2] ?? m[3] ?? m[4]);
  for (const m of text.matchAll(/(?<![\w&/])#(\d{1,9})\b/g)) add(m[1]);
  return out;
}

/** The issue a commit message refers to: the first reference the export holds, else the first reference at all. */
export function matchIssue(messages: string[], issues?: Map<number, IssueText>): { number: number | null; issue: IssueText | null } {
  const refs = [...new Set(messages.flatMap(issueReferences))];
  const known = issues ? refs.find((n) => issues.has(n)) : undefined;
  if (known !== undefined) return { number: known, issue: issues!.get(known)! };
  return { number: refs[0] ?? null, issue: null };
}

export function issueProblemStatement(issue: IssueText): string {
  return `${issue.title.trim()}\n\n${issue.body.trim()}`.trim() + '\n';
}
