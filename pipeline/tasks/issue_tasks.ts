/**
 * Issue-fix tasks mined from a repository's own git history (SWE-bench's recipe, on our images):
 * a first-parent commit that changes non-test code and tests together is a candidate; the task
 * state is its parent with the commit's test changes applied, the gold patch its non-test
 * changes. FAIL_TO_PASS and PASS_TO_PASS come from running the touched test modules before the
 * fix (task state) and after it (task state + gold patch) in the unit's image; a candidate is kept
 * only when at least one test goes fail -> pass.
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
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { TaskRecord } from '../../schemas/tasks.js';
import type { BuildRecord } from '../stages/build.js';
import { mirrorPath, type CloneRecord } from '../stages/clone.js';
import { runContainer } from '../sandbox/sandbox.js';
import { git } from '../../core/git.js';
import { tracersDir } from '../../core/package.js';
import { shQuote } from '../../core/shell.js';
import type { StageContext } from '../runtime/stage.js';
import { pytestCommand, TIMEOUT_EXIT } from '../sandbox/suite_run.js';
import { foldReport, type SuiteRun } from '../sandbox/pytest_report.js';
import { issueProblemStatement, matchIssue, type IssueText } from './issue_export.js';

/** Test files: the same rule grading uses to put test files back (tests/ or test/ folders, test_*.py, *_test.py, conftest.py). */
export const TEST_FILE = /(^|\/)(tests?\/|test_[^/]*\.py$|[^/]*_test\.py$|conftest\.py$)/;
/** Test modules pytest is pointed at: test_*.py and *_test.py. */
const TEST_MODULE = /(^|\/)(test_[^/]*|[^/]*_test)\.py$/;

export const isTestFile = (path: string): boolean => TEST_FILE.test(path);
const isCode = (path: string): boolean => path.endsWith('.py') && !isTestFile(path);

// ---------------------------------------------------------------------------------------------
// Candidates from history (git only, no containers)

export interface IssueCandidate {
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

export const DEFAULT_MAX_CANDIDATES = 20;
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
    if (!f) files.set(c.sha, (f = await changedFiles(gitDir, c.parent, c.sha)));
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
      const nextModules = [...(await existingFiles(gitDir, next.sha, nextChanged.filter((f) => TEST_MODULE.test(f))))];
      if (!(await importsAny(gitDir, next.sha, nextModules, packagesOf(code.filter(isCode))))) continue;
      tests_commit = next.sha;
      test_files = nextChanged.filter(isTestFile);
      shape = 'paired';
      messages.push(next.message);
    }
    const test_modules = [...(await existingFiles(gitDir, tests_commit, test_files.filter((f) => TEST_MODULE.test(f))))].sort();
    if (!test_modules.length) continue;
    out.push({ fix_commit: c.sha, parent: c.parent, tests_commit, shape, code_files: code, test_files, test_modules, messages });
  }
  return out;
}

/** The three patches of a candidate, relative to the unit's commit `unitCommit` (see the header). */
export async function candidatePatches(gitDir: string, unitCommit: string, cand: IssueCandidate): Promise<{ bug_patch: string; test_patch: string; patch: string; changed: string[] }> {
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

// ---------------------------------------------------------------------------------------------
// Running candidates in the unit's image

export interface IssueMiningOptions extends CandidateOptions {
  /** The issue export, by number (see readIssueExport); without it the commit message is the problem statement. */
  issues?: Map<number, IssueText>;
  /** Per-test timeout (pytest-timeout) while running; the code before a fix may hang. Default: options.mutantTestTimeoutS. */
  testTimeoutS?: number;
  /** Runs after the fix; a test must pass in every one to count (flaky ones drop out). Default 2. */
  afterRuns?: number;
  /**
   * A candidate whose three patches together exceed this many bytes is dropped (an old parent far
   * below the unit's commit makes a huge bug patch; dataset rows have a size cap). Default 1 MB.
   */
  maxPatchBytes?: number;
}

export interface IssueMiningOutcome {
  tasks: TaskRecord[];
  /** Candidates found in history and run. */
  candidates: number;
  /** Candidates dropped, each with why. */
  dropped: { fix_commit: string; reason: string }[];
}

interface CandidateRun {
  failed: string | null;
  index: string;
  before: SuiteRun | null;
  after: SuiteRun[];
}

function runScript(pytest: string, modules: string[], suiteTimeoutS: number, afterRuns: number): string {
  const run = (name: string) =>
    `WORLDLINE_REPORT=$O/report-${name}.jsonl timeout -k 10 ${suiteTimeoutS} ${pytest} ${modules.map(shQuote).join(' ')} > $O/output-${name}.log 2>&1; echo $? > $O/exit-${name}`;
  return [
    'O=/worldline/out',
    'cd /repo',
    'fail() { echo "$1" > $O/failed; cat $O/apply.log >> $O/failed 2>/dev/null; exit 0; }',
    'if [ -s $O/bug.patch ]; then git apply --whitespace=nowarn $O/bug.patch 2>$O/apply.log || fail "the bug patch (unit commit -> fix parent) does not apply"; fi',
    // Stage exactly the paths the bug patch touched, so the index can be checked against the parent's tree.
    'if [ -s $O/changed.z ]; then git --literal-pathspecs add -A -f --pathspec-from-file=$O/changed.z --pathspec-file-nul 2>$O/apply.log || fail "cannot stage the task state"; fi',
    'git ls-files -s -z > $O/index.z',
    'git apply --whitespace=nowarn $O/test.patch 2>$O/apply.log || fail "the test patch does not apply on the fix parent"',
    run('before'),
    'git apply --whitespace=nowarn $O/fix.patch 2>$O/apply.log || fail "the gold patch does not apply on the task state"',
    `i=1; while [ $i -le ${afterRuns} ]; do ${run('after-$i')}; i=$((i+1)); done`,
    '',
  ].join('\n');
}

function readRun(work: string, name: string): SuiteRun | null {
  const exitFile = join(work, `exit-${name}`);
  if (!existsSync(exitFile)) return null;
  const exitCode = Number(readFileSync(exitFile, 'utf8').trim());
  const report = existsSync(join(work, `report-${name}.jsonl`)) ? readFileSync(join(work, `report-${name}.jsonl`), 'utf8') : '';
  const timedOut = exitCode === TIMEOUT_EXIT || exitCode === 137;
  return foldReport(report, timedOut ? null : exitCode, timedOut);
}

/**
 * Checks, from the container's index after the bug patch, that every path the patch touched now
 * has the parent's exact mode and blob (or is gone where the parent has no such path).
 */
async function checkParentTree(gitDir: string, parent: string, changed: string[], indexZ: string): Promise<string | null> {
  if (!changed.length) return null;
  const index = new Map<string, string>();
  for (const entry of indexZ.split('\0').filter(Boolean)) {
    const tab = entry.indexOf('\t');
    const [mode, sha] = entry.slice(0, tab).split(' ');
    index.set(entry.slice(tab + 1), `${mode} ${sha}`);
  }
  const expected = new Map<string, string>();
  const tree = await git(['--literal-pathspecs', '--git-dir', gitDir, 'ls-tree', '-r', '-z', '--full-tree', parent, '--', ...changed]);
  for (const entry of tree.split('\0').filter(Boolean)) {
    const tab = entry.indexOf('\t');
    const [mode, , sha] = entry.slice(0, tab).split(' ');
    expected.set(entry.slice(tab + 1), `${mode} ${sha}`);
  }
  const wrong = changed.filter((p) => index.get(p) !== expected.get(p));
  return wrong.length ? `the task state differs from the fix parent's tree at ${wrong.length} path(s), first: ${wrong[0]}` : null;
}

/** Mines issue-fix tasks for a unit: candidates from history, each run in a fresh container of the unit's image. */
export async function mineIssueTasks(ctx: StageContext, clone: CloneRecord, build: BuildRecord, opts: IssueMiningOptions = {}): Promise<IssueMiningOutcome> {
  const { unit, options } = ctx;
  const gitDir = mirrorPath(unit);
  const outcome: IssueMiningOutcome = { tasks: [], candidates: 0, dropped: [] };
  if (!existsSync(join(gitDir, 'HEAD'))) return outcome;
  const candidates = await findIssueCandidates(gitDir, clone.commit, opts);
  outcome.candidates = candidates.length;
  const afterRuns = Math.max(1, opts.afterRuns ?? 2);
  const testTimeoutS = opts.testTimeoutS ?? options.mutantTestTimeoutS;
  // An explicit rootdir keeps node ids relative to /repo whatever files are named on the command line.
  const pytest = pytestCommand(['--rootdir=/repo', ...unit.env.pytest_args], testTimeoutS, build.pytest_timeout).map(shQuote).join(' ');
  const suiteTimeoutS = Math.min(options.suiteTimeoutS, 900);
  const seen = new Set<string>();
  for (const [i, cand] of candidates.entries()) {
    const drop = (reason: string) => outcome.dropped.push({ fix_commit: cand.fix_commit, reason });
    const patches = await candidatePatches(gitDir, clone.commit, cand);
    if (!patches.patch.trim() || !patches.test_patch.trim()) {
      drop('empty gold or test patch');
      continue;
    }
    const bytes = Buffer.byteLength(patches.bug_patch) + Buffer.byteLength(patches.test_patch) + Buffer.byteLength(patches.patch);
    if (bytes > (opts.maxPatchBytes ?? 1 << 20)) {
      drop(`the patches take ${bytes} bytes, over the limit of ${opts.maxPatchBytes ?? 1 << 20}`);
      continue;
    }
    const work = join(options.out, 'work', 'issues', unit.id, String(i));
    rmSync(work, { recursive: true, force: true });
    mkdirSync(work, { recursive: true });
    let result: CandidateRun;
    try {
      writeFileSync(join(work, 'bug.patch'), patches.bug_patch);
      writeFileSync(join(work, 'test.patch'), patches.test_patch);
      writeFileSync(join(work, 'fix.patch'), patches.patch);
      writeFileSync(join(work, 'changed.z'), patches.changed.map((p) => `${p}\0`).join(''));
      writeFileSync(join(work, 'run.sh'), runScript(pytest, cand.test_modules, suiteTimeoutS, afterRuns));
      await runContainer({
        image: build.image_id,
        cmd: ['sh', '/worldline/out/run.sh'],
        env: { ...unit.env.vars, PYTHONPATH: clone.src_layout ? '/worldline/lib:/repo/src' : '/worldline/lib', PYTHONHASHSEED: '0', PYTHONDONTWRITEBYTECODE: '1', TZ: 'UTC' },
        binds: [`${tracersDir}:/worldline/lib:ro`, `${work}:/worldline/out`],
        limits: { memoryBytes: options.memoryMb * 1024 * 1024, pids: options.pids, cpus: options.cpus },
        timeoutMs: ((suiteTimeoutS + 30) * (1 + afterRuns) + 60) * 1000,
        labels: { 'worldline.unit': unit.id, 'worldline.stage': 'forage', 'worldline.issue': cand.fix_commit },
      });
      const failedFile = join(work, 'failed');
      result = {
        failed: existsSync(failedFile) ? readFileSync(failedFile, 'utf8').trim().split('\n').slice(0, 3).join(' | ') : null,
        index: existsSync(join(work, 'index.z')) ? readFileSync(join(work, 'index.z'), 'utf8') : '',
        before: readRun(work, 'before'),
        after: Array.from({ length: afterRuns }, (_, k) => readRun(work, `after-${k + 1}`)).filter((r): r is SuiteRun => r !== null),
      };
    } finally {
      rmSync(work, { recursive: true, force: true });
    }
    if (result.failed) {
      drop(result.failed);
      continue;
    }
    const mismatch = await checkParentTree(gitDir, cand.parent, patches.changed, result.index);
    if (mismatch) {
      drop(mismatch);
      continue;
    }
    if (!result.before || result.before.timedOut) {
      drop('the run before the fix did not finish in time');
      continue;
    }
    if (result.after.length < afterRuns || result.after.some((r) => r.problem !== null)) {
      drop(`the run after the fix cannot be trusted: ${result.after.find((r) => r.problem)?.problem ?? 'it did not finish'}`);
      continue;
    }
    const inModules = (id: string) => cand.test_modules.includes(id.split('::')[0]);
    const before = new Map(result.before.tests.map((t) => [t.nodeid, t.outcome]));
    const afterIds = [...new Set(result.after.flatMap((r) => r.tests.map((t) => t.nodeid)))].filter(inModules).sort();
    const passAfter = afterIds.filter((id) => result.after.every((r) => r.tests.find((t) => t.nodeid === id)?.outcome === 'passed'));
    const F2P = passAfter.filter((id) => before.get(id) !== 'passed');
    const P2P = passAfter.filter((id) => before.get(id) === 'passed');
    if (!F2P.length) {
      drop('no test fails before the fix and passes after it');
      continue;
    }
    const hash = createHash('sha256').update(`${cand.fix_commit}\0${cand.tests_commit}`).digest('hex').slice(0, 8);
    const instanceId = `${unit.slug}.${clone.commit.slice(0, 8)}.issue__${hash}`;
    if (seen.has(instanceId)) continue;
    seen.add(instanceId);
    const { number, issue } = matchIssue(cand.messages, opts.issues);
    outcome.tasks.push({
      instance_id: instanceId,
      kind: 'issue_fix',
      repo: unit.repo,
      unit_id: unit.id,
      base_commit: cand.parent,
      patch: patches.patch,
      test_patch: patches.test_patch,
      bug_patch: patches.bug_patch,
      problem_statement: issue ? issueProblemStatement(issue) : cand.messages[0] + '\n',
      hints_text: null,
      FAIL_TO_PASS: F2P,
      PASS_TO_PASS: P2P,
      operator: null,
      mutated_function: null,
      fix_commit: cand.fix_commit,
      issue_number: number === null ? null : String(number),
      image_id: build.image_id,
      python_version: build.python_version,
    });
  }
  return outcome;
}

/**
 * Puts an issue task from elsewhere (a SWE-bench import) on a unit: its bug_patch becomes the
 * diff from the unit's commit to the task's base_commit, which the unit's mirror must hold.
 * Its FAIL_TO_PASS and PASS_TO_PASS are taken as given.
 */
export async function adoptIssueTask(
  task: Omit<TaskRecord, 'unit_id' | 'image_id' | 'python_version'>,
  ctx: StageContext,
  clone: CloneRecord,
  build: BuildRecord,
): Promise<TaskRecord> {
  if (task.kind !== 'issue_fix') throw new Error(`${task.instance_id}: only issue_fix tasks can be put on another unit (kind ${task.kind})`);
  const gitDir = mirrorPath(ctx.unit);
  try {
    await git(['--git-dir', gitDir, 'cat-file', '-e', `${task.base_commit}^{commit}`]);
  } catch {
    throw new Error(`${task.instance_id}: base_commit ${task.base_commit} is not in the history of ${ctx.unit.repo}`);
  }
  const bug_patch = clone.commit === task.base_commit ? '' : await git(['--git-dir', gitDir, 'diff', '--binary', ...DIFF_FLAGS, clone.commit, task.base_commit]);
  return { ...task, bug_patch, unit_id: ctx.unit.id, image_id: build.image_id, python_version: build.python_version };
}
