/**
 * Issue-fix candidates from a repository's own git history (SWE-bench's recipe; git only, no
 * containers): a first-parent commit that changes non-test code and tests together is a
 * candidate; the task state is its parent with the commit's test changes applied, the gold patch
 * its non-test changes. Running a candidate in the unit's image decides whether it becomes a task
 * (issue_verification.ts).
 *
 * A first-parent merge of a pull request is one candidate for the whole pull request (SWE-bench's
 * unit): base = the merge base of its two parents, fix_commit = the pull request's head. Releases
 * and merges of one branch into another ("Merge branch 'main' into dev") are skipped with the
 * reason. Submodule gitlinks are left out of every diff (the image holds no submodule checkouts);
 * renames are detected, so a moved data folder is a few lines, not its whole content twice.
 * Changes to docs, changelogs, CI and packaging are kept apart from the gold patch (`aux_files`).
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
/**
 * Not graded: documentation, changelogs and other prose, CI configuration and packaging metadata.
 * A fix's tests never depend on them, and a solver should not be asked to reproduce a changelog line.
 */
const AUX_FILE =
  /^(docs?\/|\.github\/|\.circleci\/|\.ci\/|ci\/)|(^|\/)(README|CHANGELOG|CHANGES|HISTORY|NEWS|AUTHORS|CONTRIBUTORS|LICENSE|COPYING|NOTICE)[^/]*$|\.(md|rst|adoc)$|^[^/]*\.txt$|(^|\/)requirements[^/]*\.(txt|in)$|^requirements\/|^(tox\.ini|setup\.cfg|setup\.py|pyproject\.toml|MANIFEST\.in|noxfile\.py|Makefile|\.coveragerc|\.gitignore|\.gitattributes|\.mailmap|\.pre-commit-config\.yaml|\.readthedocs\.ya?ml|\.travis\.yml|\.gitlab-ci\.yml|appveyor\.yml|azure-pipelines\.yml|codecov\.yml|\.flake8|mypy\.ini|\.pylintrc)$/i;

export const isTestFile = (path: string): boolean => TEST_FILE.test(path);
const isAuxFile = (path: string): boolean => !isTestFile(path) && AUX_FILE.test(path);
const isCode = (path: string): boolean => path.endsWith('.py') && !isTestFile(path) && !isAuxFile(path);

/** A release or version bump, by its message: never a fix, however much code it carries. */
const RELEASE = /^\s*(merge[^\n]*\brelease\b|(release|relase|prepare|bump( version)?( to)?|version|tag(ged)?)\b[^\n]*\bv?\d+\.\d+|v?\d+\.\d+(\.\d+)*\s*$)/i;
/** A pull request or merged branch named for a release: `version-11.0.1`, `release/2.0`, `v3.1`. */
const RELEASE_BRANCH = /^\s*Merge (pull request #\d+ from|(remote-tracking )?branch)\s+'?\S*?\b(release|version|v)[-_/]?\d+\.\d+/i;
/** A merge of one branch into another (keeping a branch up to date), not a pull request. */
const BRANCH_MERGE =
  /^\s*Merge (remote-tracking )?branch\s+'[^']+'( of \S+)?\s+into\s+\S+|^\s*Merge (remote-tracking )?branch\s+'(origin\/)?(main|master|develop|dev)'/i;
const PULL_REQUEST = /^\s*Merge pull request #(\d+)/i;

export interface IssueCandidate {
  /** The commit that fixes the code: for a pull request, its head. */
  fix_commit: string;
  /** The task's base_commit: the fix's first parent, or a pull request's merge base. */
  parent: string;
  /** The commit whose test changes make the test patch (the fix commit itself, or the one after it). */
  tests_commit: string;
  /** 'together': one commit changes code and tests; 'paired': a code-only fix then a tests-only commit; 'pull_request': a merged pull request. */
  shape: 'together' | 'paired' | 'pull_request';
  /** The first-parent commit the candidate was found at (the merge commit for a pull request). */
  mainline_commit: string;
  /** Non-test code files the fix changes (the gold patch). */
  code_files: string[];
  /** Docs, changelog, CI and packaging files the fix changes: kept apart, not graded. */
  aux_files: string[];
  /** Test files the tests commit changes (the test patch). */
  test_files: string[];
  /** Test modules (test_*.py, *_test.py) among them that exist after the tests commit: what is run. */
  test_modules: string[];
  /** Commit messages, the mainline one first (a pull request's merge message, then its commits'). */
  messages: string[];
  /** The pull request number a merge names, or null. */
  pull_request: number | null;
}

/** A first-parent commit that changes code but is no candidate, and why. */
export interface SkippedCommit {
  fix_commit: string;
  reason: string;
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
const DIFF_FLAGS = ['--no-color', '--no-ext-diff', '--no-textconv', '--ignore-submodules=all', '--src-prefix=a/', '--dst-prefix=b/'];

/** Paths that differ between two commits, both sides of a rename, submodule gitlinks left out. */
async function changedFiles(gitDir: string, from: string, to: string): Promise<string[]> {
  const out = await git(['--git-dir', gitDir, 'diff-tree', '-r', '-z', '--no-renames', '--ignore-submodules=all', '--name-only', from, to]);
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

/**
 * Whether any of the test modules imports one of the packages: by name, or, for a test module
 * that lives inside the package (h11/tests/test_io.py), by a relative import (`from .._abnf import`).
 */
async function importsAny(gitDir: string, commit: string, modules: string[], packages: string[]): Promise<boolean> {
  for (const m of modules) {
    const text = await git(['--git-dir', gitDir, 'show', `${commit}:${m}`]).catch(() => '');
    if (packages.some((p) => new RegExp(`^\\s*(from|import)\\s+${p}\\b`, 'm').test(text))) return true;
    if (packages.some((p) => m.startsWith(`${p}/`) || m.startsWith(`src/${p}/`)) && /^\s*from\s+\.+\w*\s+import\b/m.test(text)) return true;
  }
  return false;
}

interface MainlineCommit {
  sha: string;
  parents: string[];
  message: string;
}

/** Why a first-parent commit is not worth trying, or null: releases and branch-into-branch merges. */
export function skipReason(message: string, merge: boolean): string | null {
  const [subject, ...body] = message.split('\n');
  // A pull request's merge message holds its title on the first line of the body.
  const title = merge ? (body.find((l) => l.trim()) ?? '') : '';
  if (RELEASE.test(subject) || RELEASE.test(title) || (merge && RELEASE_BRANCH.test(subject))) return `a release or version bump ("${subject.slice(0, 80)}")`;
  if (merge && BRANCH_MERGE.test(subject)) return `a merge of one branch into another, not a pull request ("${subject.slice(0, 80)}")`;
  return null;
}

/**
 * Walks the first-parent history of `head` (newest first) and returns the candidates: commits
 * and merged pull requests changing non-test Python code and test modules together, and (the
 * extension) code-only fixes followed by a tests-only commit whose test modules import the fixed
 * package; and the code-changing commits skipped, with the reason.
 */
export async function findIssueCandidates(
  gitDir: string,
  head: string,
  opts: CandidateOptions = {},
): Promise<{ candidates: IssueCandidate[]; skipped: SkippedCommit[] }> {
  const maxCandidates = opts.maxCandidates ?? DEFAULT_MAX_CANDIDATES;
  const maxScan = opts.maxScan ?? DEFAULT_MAX_SCAN;
  const pair = opts.pairFollowUpTests ?? true;
  const log = await git(['--git-dir', gitDir, 'log', '--first-parent', `-n${maxScan}`, '--format=%H%x1f%P%x1f%B%x1e', head]);
  const commits: MainlineCommit[] = log
    .split('\x1e')
    .map((c) => c.replace(/^\n/, ''))
    .filter((c) => c.includes('\x1f'))
    .map((c) => {
      const [sha, parents, message] = c.split('\x1f');
      return { sha, parents: parents.split(' ').filter(Boolean), message: message.trim() };
    });
  const files = new Map<string, string[]>();
  const filesBetween = async (from: string, to: string) => {
    const key = `${from}..${to}`;
    let f = files.get(key);
    if (!f) {
      f = await changedFiles(gitDir, from, to);
      files.set(key, f);
    }
    return f;
  };
  // A pull request's own range: from the merge base of the mainline and its head, to its head.
  const rangeOf = async (c: MainlineCommit) => {
    if (c.parents.length < 2) return { from: c.parents[0], to: c.sha };
    const base = (await git(['--git-dir', gitDir, 'merge-base', c.parents[0], c.parents[1]]).catch(() => '')).trim();
    return { from: base || c.parents[0], to: base ? c.parents[1] : c.sha };
  };
  const out: IssueCandidate[] = [];
  const skipped: SkippedCommit[] = [];
  for (let i = 0; i < commits.length && out.length < maxCandidates; i++) {
    const c = commits[i];
    if (!c.parents.length) continue;
    const merge = c.parents.length > 1;
    const range = await rangeOf(c);
    const changed = await filesBetween(range.from, range.to);
    const code = changed.filter(isCode);
    if (!code.length) continue;
    const why = skipReason(c.message, merge);
    if (why) {
      skipped.push({ fix_commit: c.sha, reason: why });
      continue;
    }
    const tests = changed.filter(isTestFile);
    let tests_commit = range.to;
    let test_files = tests;
    let shape: IssueCandidate['shape'] = merge ? 'pull_request' : 'together';
    const messages = [c.message];
    if (merge) {
      const inner = await git(['--git-dir', gitDir, 'log', '--format=%B%x1e', `${range.from}..${range.to}`]).catch(() => '');
      messages.push(
        ...inner
          .split('\x1e')
          .map((m) => m.trim())
          .filter(Boolean),
      );
    }
    if (!tests.some((f) => TEST_MODULE.test(f) || f.endsWith('conftest.py'))) {
      if (merge || !pair || tests.length || i === 0) continue;
      // The commit after this one on the first-parent line (newer, so one index up).
      const next = commits[i - 1];
      if (next.parents.length !== 1) continue;
      const nextChanged = await filesBetween(next.parents[0], next.sha);
      if (nextChanged.some(isCode) || !nextChanged.some((f) => TEST_MODULE.test(f))) continue;
      const nextModules = [
        ...(await existingFiles(
          gitDir,
          next.sha,
          nextChanged.filter((f) => TEST_MODULE.test(f)),
        )),
      ];
      if (!(await importsAny(gitDir, next.sha, nextModules, packagesOf(code)))) continue;
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
    out.push({
      fix_commit: range.to,
      parent: range.from,
      tests_commit,
      shape,
      mainline_commit: c.sha,
      code_files: changed.filter((f) => !isTestFile(f) && !isAuxFile(f)),
      aux_files: changed.filter(isAuxFile),
      test_files,
      test_modules,
      messages,
      pull_request: merge ? Number(PULL_REQUEST.exec(c.message)?.[1] ?? 0) || null : null,
    });
  }
  return { candidates: out, skipped };
}

/**
 * The patches of a candidate, relative to the unit's commit `unitCommit` (see the header), renames
 * detected and gitlinks left out: the gold `patch` is code only, `aux_patch` the docs, changelog,
 * CI and packaging changes beside it.
 */
export async function candidatePatches(
  gitDir: string,
  unitCommit: string,
  cand: IssueCandidate,
): Promise<{ bug_patch: string; test_patch: string; patch: string; aux_patch: string; changed: string[] }> {
  const diff = (from: string, to: string, paths?: string[]) =>
    paths?.length === 0
      ? Promise.resolve('')
      : git(['--literal-pathspecs', '--git-dir', gitDir, 'diff', '--binary', '-M', ...DIFF_FLAGS, from, to, ...(paths ? ['--', ...paths] : [])]);
  const [bug_patch, test_patch, patch, aux_patch, changed] = await Promise.all([
    unitCommit === cand.parent ? Promise.resolve('') : diff(unitCommit, cand.parent),
    diff(cand.parent, cand.tests_commit, cand.test_files),
    diff(cand.parent, cand.fix_commit, cand.code_files),
    diff(cand.parent, cand.fix_commit, cand.aux_files),
    unitCommit === cand.parent ? Promise.resolve([]) : changedFiles(gitDir, unitCommit, cand.parent),
  ]);
  return { bug_patch, test_patch, patch, aux_patch, changed };
}
