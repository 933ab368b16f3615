/**
 * Issue exports: the text of a repository's issues (JSON Lines of `{number, title, body}`), the
 * `#N` references in commit messages that tie a fix to one of them, and the problem statement
 * an issue-fix task takes from the issue it fixes (see issue_verification.ts).
 */
import { readFileSync } from 'node:fs';

export interface IssueText {
  number: number;
  title: string;
  body: string;
}

interface IssueExportError {
  file: string;
  line: number;
  message: string;
}

/**
 * Parses an issue export: JSON Lines, one `{number, title, body}` a line (other keys, as a GitHub
 * API dump has, are ignored). Bad lines are reported with their line number; the rest are kept.
 */
export function parseIssueExport(text: string, file: string): { issues: Map<number, IssueText>; errors: IssueExportError[] } {
  const issues = new Map<number, IssueText>();
  const errors: IssueExportError[] = [];
  text.split('\n').forEach((raw, i) => {
    const line = i + 1;
    if (!raw.trim()) return;
    const fail = (message: string) => errors.push({ file, line, message });
    let obj: unknown;
    try {
      obj = JSON.parse(raw);
    } catch (e) {
      return fail(`not valid JSON: ${(e as Error).message}`);
    }
    if (!obj || typeof obj !== 'object' || Array.isArray(obj)) return fail('each line must be a JSON object {number, title, body}');
    const o = obj as Record<string, unknown>;
    const number = typeof o.number === 'string' && /^\d+$/.test(o.number) ? Number(o.number) : o.number;
    if (typeof number !== 'number' || !Number.isSafeInteger(number) || number <= 0) return fail('"number" must be a positive integer');
    if (typeof o.title !== 'string') return fail('"title" must be a string');
    if (o.body !== undefined && o.body !== null && typeof o.body !== 'string') return fail('"body" must be a string or null');
    if (issues.has(number)) return fail(`issue #${number} appears twice`);
    issues.set(number, { number, title: o.title, body: (o.body as string | null | undefined) ?? '' });
  });
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

/** `#N` references in a commit message, in order, without duplicates (not HTML entities like `&#39;`). */
export function issueReferences(message: string): number[] {
  const out: number[] = [];
  for (const m of message.matchAll(/(?<![\w&])#(\d{1,9})\b/g)) {
    const n = Number(m[1]);
    if (n > 0 && !out.includes(n)) out.push(n);
  }
  return out;
}

/** The issue a commit message refers to: the first `#N` the export holds, else the first `#N` at all. */
export function matchIssue(messages: string[], issues?: Map<number, IssueText>): { number: number | null; issue: IssueText | null } {
  const refs = messages.flatMap(issueReferences);
  const known = issues ? refs.find((n) => issues.has(n)) : undefined;
  if (known !== undefined) return { number: known, issue: issues!.get(known)! };
  return { number: refs[0] ?? null, issue: null };
}

export function issueProblemStatement(issue: IssueText): string {
  return `${issue.title.trim()}\n\n${issue.body.trim()}`.trim() + '\n';
}
