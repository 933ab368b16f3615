/**
 * Issue-fix candidates from a repository's own git history (SWE-bench's recipe; git only, no
 * containers): a first-parent commit that changes non-test code and tests together is a
 * candidate; the task state is its parent with the commit's test changes applied, the gold patch
 * its non-test changes. Running a candidate in the unit's image decides whether it becomes a task
 * (issue_verification.ts).
 *
 * Extension: a code-only fix commit immediately followed (first parent) by a tests-only commit
 * whose test modules import the fixed package is paired into one candidate (fix from the first,
 * tests from the second), the shape of a fix landed before its regression test.
 *
 * Tasks are expressed relative to the unit's commit U, whose checkout is /repo in the image:
 * base_commit = the fix's parent P (SWE-bench meaning), bug_patch = the diff U -> P over every
 * file (so base + bug_patch is P's tree; verified in the container path by path, against the
 * mirror), test_patch = P -> tests commit over the test files, patch = P -> fix commit over the
 * non-test files. gradeSubmission and AgentEnv apply bug_patch then test_patch, unchanged.
 * bug_patch must include test files too: U's test files are usually newer than P's (often they
 * already hold the new tests), and test_patch, a diff against P, only applies on P's.
 */
import { git } from '../../core/git.js';

/** Test files: the same rule grading uses to put test files back (tests/ or test/ folders, test_*.py, *_test.py, conftest.py). */
const TEST_FILE = /(^|\/)(tests?\/|test_[^/]*\.py$|[^/]*_test\.py$|conftest\.py$)/;
/** Test modules pytest is pointed at: test_*.py and *_test.py. */
const TEST_MODULE = /(^|\/)(test_[^/]*|[^/]*_test)\.py$/;

export const isTestFile = (path: string): boolean => TEST_FILE.test(path);
const isCode = (path: string): boolean => path.endsWith('.py') && !isTestFile(path);

interface IssueCandidate {
  /** The commit that fixes the code. */
  fix_commit: string;
  /** Its first parent: the task's base_commit. */
  parent: string;
  /** The commit whose test changes make the test patch (the fix commit itself, or the one after it). */
  tests_commit: string;
  /** 'together': one commit changes code and tests; 'paired': a code-only fix then a tests-only commit. */
  shape: 'together' | 'paired';
  /** Non-test files the fix changes (the gold patch). */
  code_files: string[];
  /** Test files the tests commit changes (the test patch). */
  test_files: string[];
  /** Test modules (test_*.py, *_test.py) among them that exist after the tests commit: what is run. */
  test_modules: string[];
  messages: string[];
}

export interface CandidateOptions {
  /** Candidates returned at most (newest first). */
  maxCandidates?: number;
  /** First-parent commits walked at most. */
  maxScan?: number;
  /** Pair a code-only fix with the tests-only commit right after it (default true). */
  pairFollowUpTests?: boolean;
}

const DEFAULT_MAX_CANDIDATES = 20;
const DEFAULT_MAX_SCAN = 1000;
const DIFF_FLAGS = ['--no-color', '--no-ext-diff', '--no-textconv', '--no-renames', '--src-prefix=a/', '--dst-prefix=b/'];

async function changedFiles(gitDir: string, from: string, to: string): Promise<string[]> {
  const out = await git(['--git-dir', gitDir, 'diff-tree', '-r', '-z', '--no-renames', '--name-only', from, to]);
  return out.split('\0').filter(Boolean);
}

async function existingFiles(gitDir: string, commit: string, paths: string[]): Promise<Set<string>> {
  if (!paths.length) return new Set();
  const out = await git(['--literal-pathspecs', '--git-dir', gitDir, 'ls-tree', '-r', '-z', '--name-only', '--full-tree', commit, '--', ...paths]);
  return new Set(out.split('\0').filter(Boolean));
}

/** Top-level importable names of changed code files: `pkg/x.py` -> pkg, `src/pkg/x.py` -> pkg, `mod.py` -> mod. */
export function packagesOf(codeFiles: string[]): string[] {
  const names = new Set<string>();
  for (const f of codeFiles) {
    const parts = f.split('/');
    const rest = parts[0] === 'src' && parts.length > 1 ? parts.slice(1) : parts;
    const top = rest.length === 1 ? rest[0].replace(/\.py$/, '') : rest[0];
    if (/^[A-Za-z_]\w*$/.test(top)) names.add(top);
  }
  return [...names];
}

async function importsAny(gitDir: string, commit: string, modules: string[], packages: string[]): Promise<boolean> {
  for (const m of modules) {
    const text = await git(['--git-dir', gitDir, 'show', `${commit}:${m}`]).catch(() => '');
    if (packages.some((p) => new RegExp(`^\\s*(from|import)\\s+${p}\\b`, 'm').test(text))) return true;
  }
  return false;
}

/**
 * Walks the first-parent history of `head` (newest first) and returns the candidates: commits
 * changing non-test Python code and test modules together, and (the extension) code-only fixes
 * followed by a tests-only commit whose test modules import the fixed package.
 */
export async function findIssueCandidates(gitDir: string, head: string, opts: CandidateOptions = {}): Promise<IssueCandidate[]> {
  const maxCandidates = opts.maxCandidates ?? DEFAULT_MAX_CANDIDATES;
  const maxScan = opts.maxScan ?? DEFAULT_MAX_SCAN;
  const pair = opts.pairFollowUpTests ?? true;
  const log = await git(['--git-dir', gitDir, 'log', '--first-parent', `-n${maxScan}`, '--format=%H%x1f%P%x1f%B%x1e', head]);
  const commits = log
    .split('\x1e')
    .map((c) => c.replace(/^\n/, ''))
    .filter((c) => c.includes('\x1f'))
    .map((c) => {
      const [sha, parents, message] = c.split('\x1f');
      return { sha, parent: parents.split(' ').filter(Boolean)[0] ?? null, message: message.trim() };
    });
  const files = new Map<string, string[]>();
  const filesOf = async (i: number) => {
    const c = commits[i];
    if (!c.parent) return [];
    let f = files.get(c.sha);
    if (!f) {
      f = await changedFiles(gitDir, c.parent, c.sha);
      files.set(c.sha, f);
    }
    return f;
  };
  const out: IssueCandidate[] = [];
  for (let i = 0; i < commits.length && out.length < maxCandidates; i++) {
    const c = commits[i];
    if (!c.parent) continue;
    const changed = await filesOf(i);
    const code = changed.filter((f) => !isTestFile(f));
    const tests = changed.filter(isTestFile);
    if (!code.some(isCode)) continue;
    let tests_commit = c.sha;
    let test_files = tests;
    let shape: IssueCandidate['shape'] = 'together';
    const messages = [c.message];
    if (!tests.some((f) => TEST_MODULE.test(f) || f.endsWith('conftest.py'))) {
      if (!pair || tests.length || i === 0) continue;
      // The commit after this one on the first-parent line (newer, so one index up).
      const next = commits[i - 1];
      const nextChanged = await filesOf(i - 1);
      if (nextChanged.some(isCode) || !nextChanged.some((f) => TEST_MODULE.test(f))) continue;
      const nextModules = [
        ...(await existingFiles(
          gitDir,
          next.sha,
          nextChanged.filter((f) => TEST_MODULE.test(f)),
        )),
      ];
      if (!(await importsAny(gitDir, next.sha, nextModules, packagesOf(code.filter(isCode))))) continue;
      tests_commit = next.sha;
      test_files = nextChanged.filter(isTestFile);
      shape = 'paired';
      messages.push(next.message);
    }
    const test_modules = [
      ...(await existingFiles(
        gitDir,
        tests_commit,
        test_files.filter((f) => TEST_MODULE.test(f)),
      )),
    ].sort();
    if (!test_modules.length) continue;
    out.push({ fix_commit: c.sha, parent: c.parent, tests_commit, shape, code_files: code, test_files, test_modules, messages });
  }
  return out;
}

/** The three patches of a candidate, relative to the unit's commit `unitCommit` (see the header). */
export async function candidatePatches(
  gitDir: string,
  unitCommit: string,
  cand: IssueCandidate,
): Promise<{ bug_patch: string; test_patch: string; patch: string; changed: string[] }> {
  const diff = (from: string, to: string, paths?: string[]) =>
    git(['--literal-pathspecs', '--git-dir', gitDir, 'diff', '--binary', ...DIFF_FLAGS, from, to, ...(paths ? ['--', ...paths] : [])]);
  const [bug_patch, test_patch, patch, changed] = await Promise.all([
    unitCommit === cand.parent ? Promise.resolve('') : diff(unitCommit, cand.parent),
    diff(cand.parent, cand.tests_commit, cand.test_files),
    diff(cand.parent, cand.fix_commit, cand.code_files),
    unitCommit === cand.parent ? Promise.resolve([]) : changedFiles(gitDir, unitCommit, cand.parent),
  ]);
  return { bug_patch, test_patch, patch, changed };
}
