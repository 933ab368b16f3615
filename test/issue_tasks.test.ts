/**
 * Issue-fix tasks mined from a hand-built repository with a real bug (commit 3), its real fix
 * (commit 4, "... (#3)") and the test that catches it (commit 5): the fix becomes a task whose
 * FAIL_TO_PASS is the new test, whose problem statement is issue #3's text from an issue export,
 * and which grades unresolved without a fix and resolved with the gold patch, each in a fresh
 * container of the unit's image.
 */
import { execFileSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { beforeAll, describe, expect, inject, it } from 'vitest';
import { type GradeEnv, gradeSubmission } from '../pipeline/agent/grading.js';
import { Ledger } from '../pipeline/runtime/ledger.js';
import { readManifest } from '../pipeline/runtime/manifest.js';
import { DEFAULTS, type PipelineOptions } from '../pipeline/runtime/options.js';
import type { BuildRecord, CloneRecord } from '../pipeline/runtime/records.js';
import type { StageContext } from '../pipeline/runtime/stage.js';
import { candidatePatches, findIssueCandidates, isTestFile, packagesOf } from '../pipeline/tasks/issue_candidates.js';
import { issueReferences, matchIssue, parseIssueExport, readIssueExport } from '../pipeline/tasks/issue_export.js';
import { type IssueMiningOutcome, mineIssueTasks } from '../pipeline/tasks/issue_verification.js';
import type { TaskRecord } from '../schemas/tasks.js';
import { buildHistoryRepo } from './fixtures/history_repo.js';
import { cli, tempDir } from './helpers.js';

const ISSUE_3 = {
  number: 3,
  title: 'unique_slug hangs when hello-2 is already taken',
  body: 'Calling `unique_slug("Hello", {"hello", "hello-2", "hello-3"})` never returns; I expected "hello-4".',
};

describe('issue export and history scan (no containers)', () => {
  it('parses an issue export, naming bad lines, and matches #N in commit messages', () => {
    const text = [
      JSON.stringify({ ...ISSUE_3, url: 'https://example.invalid/3', labels: ['bug'] }),
      '',
      JSON.stringify({ number: '7', title: 'Seven', body: null }),
      '{"number": 8, "title": ',
      JSON.stringify({ number: -1, title: 'x' }),
      JSON.stringify({ number: 9 }),
      JSON.stringify({ number: 3, title: 'again', body: '' }),
    ].join('\n');
    const { issues, errors } = parseIssueExport(text, 'issues.jsonl');
    expect([...issues.keys()]).toEqual([3, 7]);
    expect(issues.get(7)).toEqual({ number: 7, title: 'Seven', body: '' });
    expect(errors.map((e) => [e.line, e.message.split(':')[0]])).toEqual([
      [4, 'not valid JSON'],
      [5, '"number" must be a positive integer'],
      [6, '"title" must be a string'],
      [7, 'issue #3 appears twice'],
    ]);
    const dir = tempDir('issues');
    writeFileSync(join(dir, 'bad.jsonl'), text);
    expect(() => readIssueExport(join(dir, 'bad.jsonl'))).toThrow(/bad\.jsonl:4: not valid JSON/);
    expect(issueReferences('Fix #12 and #3, see #12; not &#39; or a#5')).toEqual([12, 3]);
    expect(matchIssue(['Fix x (#12, #3)'], issues)).toEqual({ number: 3, issue: issues.get(3) });
    expect(matchIssue(['Fix x (#12)'], issues)).toEqual({ number: 12, issue: null });
    expect(matchIssue(['Fix x'], issues)).toEqual({ number: null, issue: null });
  });

  it('classifies test files as grading does and names the packages of code files', () => {
    for (const f of ['tests/test_a.py', 'pkg/tests/data.json', 'test/x.py', 'test_a.py', 'pkg/a_test.py', 'conftest.py', 'pkg/conftest.py'])
      expect(isTestFile(f), f).toBe(true);
    for (const f of ['pkg/a.py', 'pkg/testing.py', 'contest.py', 'README.md', 'latest/a.py']) expect(isTestFile(f), f).toBe(false);
    expect(packagesOf(['slugs/__init__.py', 'src/other/x.py', 'mod.py', 'setup.py'])).toEqual(['slugs', 'other', 'mod', 'setup']);
  });

  it("finds the fixture's commits that change code with tests, and pairs the code-only fix with the test after it", async () => {
    const dir = tempDir('issue-scan');
    const shas = buildHistoryRepo(join(dir, 'slugs'));
    const gitDir = join(dir, 'slugs', '.git');
    const cands = await findIssueCandidates(gitDir, shas[4]);
    expect(cands.map((c) => [c.fix_commit, c.parent, c.tests_commit, c.shape, c.test_modules])).toEqual([
      [shas[3], shas[2], shas[4], 'paired', ['tests/test_unique.py']],
      [shas[2], shas[1], shas[2], 'together', ['tests/test_unique.py']],
      [shas[1], shas[0], shas[1], 'together', ['tests/test_slugify.py']],
    ]);
    expect(cands[0].messages[0]).toBe('Fix unique_slug looping forever when several suffixes are taken (#3)');
    expect(await findIssueCandidates(gitDir, shas[4], { pairFollowUpTests: false })).toHaveLength(2);
    expect(await findIssueCandidates(gitDir, shas[4], { maxCandidates: 1 })).toHaveLength(1);
    // At the fix commit itself, the test commit after it is not history yet: nothing to pair.
    expect((await findIssueCandidates(gitDir, shas[3])).map((c) => c.fix_commit)).toEqual([shas[2], shas[1]]);

    // base + bug_patch is the parent's tree, test files included; test_patch and patch apply on top.
    const { bug_patch, test_patch, patch } = await candidatePatches(gitDir, shas[4], cands[0]);
    const work = join(dir, 'work');
    const g = (...args: string[]) => execFileSync('git', args, { cwd: work, encoding: 'utf8' });
    execFileSync('git', ['clone', '-q', join(dir, 'slugs'), work]);
    for (const [name, text] of Object.entries({ bug_patch, test_patch, patch })) writeFileSync(join(dir, `${name}.diff`), text);
    g('apply', join(dir, 'bug_patch.diff'));
    g('add', '-A');
    expect(g('write-tree').trim()).toBe(g('rev-parse', `${shas[2]}^{tree}`).trim());
    g('apply', join(dir, 'test_patch.diff'));
    g('apply', join(dir, 'patch.diff'));
    g('add', '-A');
    expect(g('write-tree').trim()).toBe(g('rev-parse', `${shas[4]}^{tree}`).trim());
    expect(patch).toContain('+        n += 1');
    expect(patch).not.toContain('tests/');
    expect(test_patch).toContain('+def test_several_taken_suffixes():');
    expect(test_patch).not.toContain('slugs/__init__.py');
  });
});

describe('issue-fix tasks from the fixture repository, run in its image', () => {
  let out: string;
  let shas: string[];
  let mined: IssueMiningOutcome;
  let task: TaskRecord;
  let options: PipelineOptions;

  beforeAll(async () => {
    process.env.WORLDLINE_MIRRORS = join(inject('workRoot'), 'mirrors');
    const dir = tempDir('issue-tasks');
    shas = buildHistoryRepo(join(dir, 'slugs'));
    const manifest = join(dir, 'manifest.jsonl');
    writeFileSync(manifest, JSON.stringify({ repo: join(dir, 'slugs'), commit: shas[4] }) + '\n');
    out = join(dir, 'out');
    const res = await cli(['run', '--manifest', manifest, '--out', out, '--stages', 'clone,build,validate,trace', '--validate-runs', '1']);
    expect(res.code, res.stderr).toBe(0);
    writeFileSync(join(dir, 'issues.jsonl'), [JSON.stringify({ number: 1, title: 'Unrelated', body: 'x' }), JSON.stringify(ISSUE_3)].join('\n') + '\n');
    const unit = readManifest(manifest).units[0];
    const ledger = new Ledger(out);
    options = { ...DEFAULTS, out, testTimeoutS: 10 };
    const ctx: StageContext = { unit, options, ledger, log: () => undefined, deadline: null };
    const clone = ledger.get<CloneRecord>('clone', unit.id)!.record!;
    const build = ledger.get<BuildRecord>('build', unit.id)!.record!;
    mined = await mineIssueTasks(ctx, clone, build, { issues: readIssueExport(join(dir, 'issues.jsonl')), testTimeoutS: 5 });
    task = mined.tasks.find((t) => t.fix_commit === shas[3])!;
  }, 600_000);

  it('turns the real bug fix into a task: the new test fails before and passes after, the issue text is the statement', () => {
    expect(mined.candidates).toBe(3);
    expect(mined.dropped).toEqual([]);
    expect(task, JSON.stringify(mined.tasks.map((t) => t.fix_commit))).toBeDefined();
    expect(task).toMatchObject({
      kind: 'issue_fix',
      base_commit: shas[2],
      fix_commit: shas[3],
      issue_number: '3',
      operator: null,
      FAIL_TO_PASS: ['tests/test_unique.py::test_several_taken_suffixes'],
      PASS_TO_PASS: ['tests/test_unique.py::test_free_slug_is_kept', 'tests/test_unique.py::test_taken_slug_gets_a_suffix'],
      problem_statement: `${ISSUE_3.title}\n\n${ISSUE_3.body}\n`,
    });
    expect(task.instance_id).toMatch(new RegExp(`^slugs\\.${shas[4].slice(0, 8)}\\.issue__[0-9a-f]{8}$`));
    expect(task.patch).toContain('+        n += 1');
    expect(task.test_patch).toContain('+def test_several_taken_suffixes():');
    // The task state never holds the fix: the bug patch takes the unit's commit back to the parent.
    expect(task.bug_patch).toContain('-        n += 1');
    // The other candidates are features landed with their tests; without #N their statement is the commit message.
    const maxLen = mined.tasks.find((t) => t.fix_commit === shas[1])!;
    expect(maxLen).toMatchObject({
      issue_number: null,
      problem_statement: 'slugify: optional max_len\n',
      FAIL_TO_PASS: ['tests/test_slugify.py::test_truncates_at_a_word_boundary'],
    });
    expect(maxLen.PASS_TO_PASS).toEqual(['tests/test_slugify.py::test_drops_punctuation', 'tests/test_slugify.py::test_lowercases_and_joins']);
    expect(new Set(mined.tasks.map((t) => t.instance_id)).size).toBe(mined.tasks.length);
  });

  it('grades unresolved with no submission and resolved with the gold patch, each in a fresh container', async () => {
    const env = (name: string): GradeEnv => ({
      options,
      srcLayout: false,
      vars: {},
      pytestArgs: [],
      hasTimeoutPlugin: true,
      work: join(out, 'work', 'grade-issue', name),
    });
    const empty = await gradeSubmission(task, null, env('empty'));
    expect(empty.resolved).toBe(false);
    expect(empty.fail_to_pass.failed).toEqual(task.FAIL_TO_PASS);
    expect(empty.pass_to_pass.failed).toEqual([]);
    const gold = await gradeSubmission(task, task.patch, env('gold'));
    expect(gold, JSON.stringify(gold)).toMatchObject({ resolved: true, applied: true, problem: null });
  }, 300_000);
});
