/**
 * Issue-fix tasks mined from a hand-built repository with a real bug (commit 3), its real fix
 * (commit 4, "... (#3)") and the test that catches it (commit 5): the fix becomes a task whose
 * FAIL_TO_PASS is the new test, whose problem statement is issue #3's text from an issue export,
 * and which grades unresolved without a fix and resolved with the gold patch, each in a fresh
 * container of the unit's image.
 */
import { execFileSync } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { beforeAll, describe, expect, inject, it } from 'vitest';
import { type GradeEnv, gradeSubmission } from '../pipeline/agent/grading.js';
import { Ledger } from '../pipeline/runtime/ledger.js';
import { readManifest } from '../pipeline/runtime/manifest.js';
import { DEFAULTS, type PipelineOptions } from '../pipeline/runtime/options.js';
import type { BuildRecord, CloneRecord } from '../pipeline/runtime/records.js';
import type { StageContext } from '../pipeline/runtime/stage.js';
import { readResult } from '../pipeline/sandbox/results.js';
import { runSandboxed } from '../pipeline/sandbox/sandbox.js';
import { withoutTestPaths } from '../pipeline/sandbox/suite_run.js';
import {
  addedNames,
  changedSignatures,
  collectionErrorText,
  judgeFix,
  loadTimeouts,
  messageSignals,
  missingAddedName,
  patchSignals,
} from '../pipeline/tasks/fix_evidence.js';
import { candidatePatches, findIssueCandidates, isTestFile, packagesOf, skipReason } from '../pipeline/tasks/issue_candidates.js';
import { issueReferences, matchIssue, parseIssueExport, readIssueExport } from '../pipeline/tasks/issue_export.js';
import { behaviourStatement, chooseStatement, quotedGoldLine } from '../pipeline/tasks/issue_statement.js';
import { type IssueMiningOutcome, mineIssueTasks } from '../pipeline/tasks/issue_verification.js';
import { modelStatementWriter } from '../pipeline/tasks/statement_model.js';
import type { TaskRecord } from '../schemas/tasks.js';
import { buildCorpusHistory, GOLD_LINES } from './fixtures/corpus_history.js';
import { buildHistoryRepo, FIXTURE_GIT_ENV } from './fixtures/history_repo.js';
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
    expect(issues.get(7)).toEqual({ number: 7, title: 'Seven', body: '', labels: [] });
    expect(issues.get(3)!.labels).toEqual(['bug']);
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
    const { candidates: cands } = await findIssueCandidates(gitDir, shas[4]);
    expect(cands.map((c) => [c.fix_commit, c.parent, c.tests_commit, c.shape, c.test_modules])).toEqual([
      [shas[3], shas[2], shas[4], 'paired', ['tests/test_unique.py']],
      [shas[2], shas[1], shas[2], 'together', ['tests/test_unique.py']],
      [shas[1], shas[0], shas[1], 'together', ['tests/test_slugify.py']],
    ]);
    expect(cands[0].messages[0]).toBe('Fix unique_slug looping forever when several suffixes are taken (#3)');
    expect((await findIssueCandidates(gitDir, shas[4], { pairFollowUpTests: false })).candidates).toHaveLength(2);
    expect((await findIssueCandidates(gitDir, shas[4], { maxCandidates: 1 })).candidates).toHaveLength(1);
    // At the fix commit itself, the test commit after it is not history yet: nothing to pair.
    expect((await findIssueCandidates(gitDir, shas[3])).candidates.map((c) => c.fix_commit)).toEqual([shas[2], shas[1]]);

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

  it('pairs a code-only fix with the tests-only commit after it when the tests import the package relatively', async () => {
    // h11 26ec787 (a fix) and ccfe8f9 ("Add a test for 26ec787"): h11/tests import `from .._abnf import ...`.
    const dir = join(tempDir('issue-relative'), 'pkg');
    mkdirSync(join(dir, 'web', 'tests'), { recursive: true });
    const git = (...args: string[]) =>
      execFileSync('git', ['-c', 'commit.gpgsign=false', ...args], { cwd: dir, env: { ...process.env, ...FIXTURE_GIT_ENV }, encoding: 'utf8' }).trim();
    const commit = (message: string, files: Record<string, string>) => {
      for (const [path, text] of Object.entries(files)) writeFileSync(join(dir, path), text);
      git('add', '-A');
      git('commit', '-q', '-m', message);
      return git('rev-parse', 'HEAD');
    };
    git('init', '-q', '-b', 'main');
    commit('Import', {
      'web/__init__.py': '',
      'web/_abnf.py': 'chunk_header = r"[0-9a-fA-F]+"\n',
      'web/tests/__init__.py': '',
      'web/tests/test_abnf.py': 'from .._abnf import chunk_header\n\n\ndef test_hex():\n    assert chunk_header\n',
    });
    const fix = commit('Fix issue #133 by allowing whitespace in chunk headers', { 'web/_abnf.py': 'chunk_header = r"[0-9a-fA-F]+[ \\t]*"\n' });
    const tests = commit('Add a test for the chunk header fix', {
      'web/tests/test_abnf.py': 'import re\n\nfrom .._abnf import chunk_header\n\n\ndef test_whitespace():\n    assert re.fullmatch(chunk_header, "a ")\n',
    });
    const { candidates } = await findIssueCandidates(join(dir, '.git'), tests);
    expect(candidates.map((c) => [c.fix_commit, c.tests_commit, c.shape, c.test_modules])).toEqual([[fix, tests, 'paired', ['web/tests/test_abnf.py']]]);
  });
});

describe('issue references, fix evidence and statements (no containers)', () => {
  it('recognises closing keywords, gh-N, owner/repo#N and "Issue N", never the pull request number', () => {
    expect(issueReferences('Fix sliced() for negative n\n\nFixes gh-21')).toEqual([21]);
    expect(issueReferences('Closes owner/repo#5; see #9')).toEqual([5, 9]);
    expect(issueReferences('Make repeat() lazy (#1250)\n\nIssue 1214 asked for it.')).toEqual([1214, 1250]);
    expect(issueReferences('Merge pull request #40 from someone/fix-thing\n\nFix thing')).toEqual([]);
    expect(issueReferences('Merge pull request #40 from someone/issue-3\n\nresolves #3')).toEqual([3]);
    expect(matchIssue(['Merge pull request #40 from a/b', 'Fix x\n\nIssue 1214'])).toEqual({ number: 1214, issue: null });
    expect(matchIssue(['Fix y (#3)'], new Map([[3, { number: 3, title: 't', body: '', labels: ['bug'] }]])).number).toBe(3);
  });

  it('skips releases and branch-into-branch merges, not pull requests', () => {
    expect(skipReason('Release v7.0.6.', false)).toMatch(/^a release or version bump/);
    expect(skipReason('Version 11.0.0', false)).toMatch(/^a release/);
    expect(skipReason('Merge pull request #1142 from more-itertools/version-11.0.1\n\nVersion 11.0.1', true)).toMatch(/^a release/);
    expect(skipReason("Merge branch 'master' into feature-x", true)).toMatch(/^a merge of one branch into another/);
    expect(skipReason('Merge pull request #1200 from Sanjays2402/fix/sliced-negative-n', true)).toBeNull();
    expect(skipReason('Fix the 2.0 regression in parse()', false)).toBeNull();
  });

  it('calls a failure on a name the gold patch adds a feature, any other failure behavioural', () => {
    const patch = [
      '--- a/pkg/m.py',
      '+++ b/pkg/m.py',
      '@@ -1,2 +1,5 @@',
      '-def slugify(text):',
      '+def slugify(text, max_len=None):',
      '+    return text[:max_len]',
      '+def penultimate(seq):',
      '--- /dev/null',
      '+++ b/pkg/extra.py',
      '',
    ].join('\n');
    const added = addedNames(patch);
    expect(['max_len', 'penultimate', 'extra'].every((n) => added.has(n))).toBe(true);
    expect(added.has('slugify')).toBe(false);
    expect(missingAddedName("ImportError: cannot import name 'penultimate' from 'pkg.m'", added)).toBe('penultimate');
    expect(missingAddedName("TypeError: slugify() got an unexpected keyword argument 'max_len'", added)).toBe('max_len');
    expect(missingAddedName("ModuleNotFoundError: No module named 'pkg.extra'", added)).toBe('extra');
    expect(missingAddedName("AttributeError: 'NoneType' object has no attribute 'group'", added)).toBeNull();
    expect(missingAddedName('assert 3 == 4', added)).toBeNull();
    const dunder = addedNames('--- a/m.py\n+++ b/m.py\n@@ -1 +1,2 @@\n+    def __getitem__(self, i):\n');
    expect(missingAddedName("TypeError: 'seekable' object is not subscriptable", dunder)).toBe('__getitem__');
    expect(missingAddedName("TypeError: 'seekable' object is not iterable", dunder)).toBeNull();
    // pytest's own output for a module that cannot import a name (Python 3.11, pytest 7): the report has only its first line.
    const log = [
      '==================================== ERRORS ====================================',
      '_______________________ ERROR collecting tests/test_p.py _______________________',
      "ImportError while importing test module '/tmp/pt/tests/test_p.py'.",
      'Traceback:',
      'tests/test_p.py:1: in <module>',
      '    from pkg import penultimate',
      "E   ImportError: cannot import name 'penultimate' from 'pkg' (/tmp/pt/pkg/__init__.py)",
      '!!!!!!!!!!!!!!!!!!!! Interrupted: 1 error during collection !!!!!!!!!!!!!!!!!!!!',
    ].join('\n');
    const collected = collectionErrorText(log);
    expect([...collected.keys()]).toEqual(['tests/test_p.py']);
    expect(missingAddedName(collected.get('tests/test_p.py')!, added)).toBe('penultimate');
    // A timeout before the fix counts only in a test the test patch touches.
    const timedOut = loadTimeouts('@@ -70,6 +70,9 @@ def test_old(self):\n+    def test_negative(self):\n+        pass\n');
    expect(timedOut('tests/t.py::C::test_slow', 'Failed: Timeout >20.0s')).toBe(true);
    expect(timedOut('tests/t.py::C::test_negative', 'Failed: Timeout >20.0s')).toBe(false);
    expect(timedOut('tests/t.py::test_old[1]', 'Failed: Timeout >20.0s')).toBe(false);
    expect(timedOut('tests/t.py::C::test_slow', 'AssertionError')).toBe(false);
    const feature = judgeFix([{ nodeid: 't.py::a', message: "ImportError: cannot import name 'penultimate'" }], patch, []);
    expect(feature.feature).toMatch(/^a feature, not a fix: .*'penultimate'/);
    const assertion = { nodeid: 't.py::a', message: 'AssertionError: assert 3 == 4' };
    const missing = { nodeid: 't.py::b', message: "ImportError: cannot import name 'penultimate'" };
    const signals = messageSignals(['Fix slugify on long text'], 7, { number: 7, title: 'slugify crashes', body: '', labels: ['type: bug'] });
    expect(judgeFix([assertion, { ...assertion, nodeid: 't.py::c' }, missing], patch, signals)).toEqual({
      feature: null,
      fix_confidence: 0.8,
      signals: ['behavioural_failures:2/3', 'message:fix', 'issue:#7', 'label:type: bug', 'issue_text:crashes'],
    });
    // Half or more failing on added names is a feature; behaviour alone, with no sign of a fix, is not enough.
    expect(judgeFix([assertion, missing], patch, signals).feature).toMatch(/^a feature, not a fix: 1 of 2 FAIL_TO_PASS tests/);
    expect(judgeFix([assertion], patch, []).feature).toMatch(/^not shown to be a fix: confidence 0.6 below 0.7/);
    const featureTitle = messageSignals(['Merge pull request #9 from a/fix-x\n\nAdd a cache_info() to fix #8'], 8, null);
    expect(featureTitle).toEqual(['message:fix', 'issue:#8', '-feature_word:add']);
    // toolz 10e97e4: reverting a speed-up that broke isiterable() is a regression fix, not a performance change.
    const revert = messageSignals(
      ['Merge pull request #551 from LincolnPuzey/revert-isiterable-change\n\nRevert "Faster isiterable when x isn\'t iterable"'],
      null,
      null,
    );
    expect(revert).toEqual(['message:revert']);
    expect(judgeFix([assertion], patch, featureTitle)).toMatchObject({ fix_confidence: 0.6, feature: expect.stringMatching(/^not shown to be a fix/) });
  });

  it('counts an error the old code did not raise, in code the fix changes, and reads feature signals from the gold patch', () => {
    // more-itertools 0e6acdf: a guard added inside an existing function, no fix word in the message.
    const guard = [
      '--- a/more_itertools/more.py',
      '+++ b/more_itertools/more.py',
      '@@ -230,6 +230,9 @@ def chunked(iterable, n, strict=False):',
      '     list is yielded.',
      ' ',
      '     """',
      '+    if n is not None and n < 0:',
      "+        raise ValueError('n must be at least 0')",
      '+',
      '     iterator = iter(partial(take, n, iter(iterable)), [])',
      '',
    ].join('\n');
    expect(patchSignals(guard)).toEqual([]);
    const failure = {
      nodeid: 'tests/test_more.py::ChunkedTests::test_negative',
      message: 'AssertionError: "n must be at least 0" does not match "Stop argument for islice()"',
    };
    const signals = messageSignals(['Raise a clear ValueError for negative n in chunked()'], null, null);
    expect(judgeFix([failure], guard, signals)).toEqual({
      feature: null,
      fix_confidence: 0.7,
      signals: ['behavioural_failures:1/1', 'failure:expected_error'],
    });
    // h11 60782ad and dff7cc3: pytest's own words, and an error class expected in a comparison.
    const rewrite = '--- a/m.py\n+++ b/m.py\n@@ -1 +1 @@\n-    return int(value)\n+    return parse(value)\n';
    for (const message of [
      "Failed: DID NOT RAISE <class 'h11._util.LocalProtocolError'>",
      "AssertionError: assert [Data(data=b'...nk_end=False)] == [<class 'h11....otocolError'>]",
    ]) {
      expect(judgeFix([{ nodeid: 't.py::a', message }], rewrite, []).signals).toContain('failure:expected_error');
    }
    // h11 fdab133: the old code raised on valid input, from a raise the fix takes out.
    const strict =
      '--- a/h11/_headers.py\n+++ b/h11/_headers.py\n@@ -160,2 +160,2 @@ def normalize_and_validate(headers, _parsed=False):\n-                raise LocalProtocolError("multiple Content-Length headers")\n+                pass\n';
    const raised = { nodeid: 't.py::a', message: 'h11._util.LocalProtocolError: multiple Content-Length headers' };
    expect(judgeFix([raised], strict, [])).toMatchObject({ feature: null, signals: ['behavioural_failures:1/1', 'failure:removed_error'] });
    // h11 7370645: a test calling a method with the parameters the gold patch gives it tests a new signature.
    const signature =
      '--- a/r.py\n+++ b/r.py\n@@ -40,2 +40,2 @@ class ReceiveBuffer:\n-    def maybe_extract_until_next(self, needle):\n+    def maybe_extract_until_next(self, regex, max_len):\n';
    expect(changedSignatures(signature)).toEqual(new Set(['maybe_extract_until_next']));
    const call = { nodeid: 't.py::a', message: 'TypeError: ReceiveBuffer.maybe_extract_until_next() takes 2 positional arguments but 3 were given' };
    expect(judgeFix([call], signature, ['message:fixed']).feature).toMatch(/^a feature, not a fix: .*'maybe_extract_until_next'/);
    expect(judgeFix([call], rewrite, ['message:fixed']).feature).toBeNull();
    // A plain wrong value is behaviour alone; an expected error in a new function is not a change to existing code.
    const assertion = { nodeid: 't.py::a', message: 'AssertionError: assert 3 == 4' };
    expect(judgeFix([assertion], rewrite, [])).toMatchObject({ fix_confidence: 0.6, feature: expect.stringMatching(/^not shown to be a fix/) });
    const added = '--- a/m.py\n+++ b/m.py\n@@ -10,0 +11,3 @@ class Cache:\n+    def check(self, n):\n+        if n < 0:\n+            raise ValueError(n)\n';
    expect(judgeFix([{ nodeid: 't.py::a', message: 'Failed: DID NOT RAISE' }], added, []).fix_confidence).toBe(0.6);
    const feature = [
      '--- a/pkg/m.py',
      '+++ b/pkg/m.py',
      '@@ -10,3 +10,8 @@ class Cache:',
      '+    def cache_info(self):',
      '+        return self._info',
      '+',
      '+def _helper():',
      '+    pass',
      '',
    ].join('\n');
    expect(patchSignals(feature)).toEqual(['-patch:new_public_name:cache_info']);
    const release = "--- a/pkg/__init__.py\n+++ b/pkg/__init__.py\n@@ -1 +1 @@\n-__version__ = '1.0'\n+__version__ = '1.1'\n";
    expect(patchSignals(release)).toEqual(['-patch:version_bump']);
    // cachetools bb4b37c: expire() starts returning the expired pairs and its docstring says so (a
    // feature asked for in "Fix #292"); a forgotten return adds the statement under a docstring that already promised it.
    const newReturn = [
      '--- a/src/cachetools/__init__.py',
      '+++ b/src/cachetools/__init__.py',
      '@@ -469,19 +467,26 @@ class TTLCache(_TimedCache):',
      '     def expire(self, time=None):',
      '-        """Remove expired items from the cache."""',
      '+        """Remove expired items from the cache and return an iterable of the',
      '+        expired `(key, value)` pairs.',
      '+',
      '+        """',
      '         if time is None:',
      '@@ -596,3 +599,5 @@ class TTLCache(_TimedCache):',
      '+        expired = []',
      '         while curr is not root:',
      '             curr = curr.next',
      '+        return expired',
      '',
    ].join('\n');
    expect(patchSignals(newReturn)).toEqual(['-patch:new_return_value:expire']);
    const forgotten = '--- a/m.py\n+++ b/m.py\n@@ -1,4 +1,5 @@\n def total(xs):\n     """Return the sum of xs."""\n     s = sum(xs)\n+    return s\n';
    expect(patchSignals(forgotten)).toEqual([]);
    const changedReturn =
      '--- a/m.py\n+++ b/m.py\n@@ -1,3 +1,3 @@\n def total(xs):\n-    """Sum."""\n-    return 0\n+    """Return the sum."""\n+    return sum(xs)\n';
    expect(patchSignals(changedReturn)).toEqual([]);
    // toolz 7764358: special methods a class did not have are a protocol it newly offers; rewriting one it had is not.
    const protocol =
      '--- a/f.py\n+++ b/f.py\n@@ -520,2 +520,6 @@ class Compose(object):\n+    def __repr__(self):\n+        return "Compose"\n+    def __eq__(self, other):\n+        return True\n';
    expect(patchSignals(protocol)).toEqual(['-patch:new_public_name:__eq__', '-patch:new_public_name:__repr__']);
    const rewritten = '--- a/f.py\n+++ b/f.py\n@@ -520,2 +520,2 @@ class R:\n-    def __hash__(self):\n+    def __hash__(self):  # equal ranges hash alike\n';
    expect(patchSignals(rewritten)).toEqual([]);
    const reprFailure = {
      nodeid: 't.py::test_compose_metadata',
      message: "AssertionError: assert '<toolz.funct...7f65d6fc3190>' == 'Compose(<fun...f65d7c29e30>)'",
    };
    expect(judgeFix([reprFailure], protocol, [...messageSignals(['Fix #31: compose'], 31, null), ...patchSignals(protocol)])).toMatchObject({
      fix_confidence: 0.4,
      feature: expect.stringMatching(/^not shown to be a fix/),
    });
    // Behaviour alone, in a patch that adds a public method, stays below the bar.
    expect(judgeFix([assertion], feature, patchSignals(feature))).toMatchObject({
      fix_confidence: 0.4,
      feature: expect.stringMatching(/^not shown to be a fix/),
    });
  });

  it('writes the statement from the failing tests, without any line of the gold patch', () => {
    const patch = '--- a/m.py\n+++ b/m.py\n@@ -1 +1 @@\n-    return total - 1\n+    return total\n';
    const text = behaviourStatement(
      [
        { nodeid: 'tests/test_m.py::test_total', message: 'AssertionError: assert 2 == 3\n    return total - 1' },
        { nodeid: 'tests/test_m.py::TestX::test_y', message: null },
      ],
      patch,
    );
    expect(text).toContain('`test_total` (tests/test_m.py):');
    expect(text).toContain('AssertionError: assert 2 == 3');
    expect(text).toContain('`TestX::test_y` (tests/test_m.py)');
    expect(quotedGoldLine(text, patch)).toBeNull();
    expect(quotedGoldLine('see: return total - 1', patch)).toBe('return total - 1');
  });
});

describe('statements written by a model through the OpenAI-compatible client (scripted loopback server)', () => {
  it('uses a statement that does not quote the gold patch, rejects one that does, and falls back when the server fails', async () => {
    const replies: { status: number; content?: string }[] = [
      { status: 200, content: 'total() is off by one\n\nCalling total([1, 2]) gives 2; I expected 3.' },
      { status: 200, content: 'total() is off by one\n\nThe code says `return total - 1`.' },
      { status: 500 },
    ];
    const seen: { messages: { role: string; content: string }[] }[] = [];
    const server = createServer((req, res) => {
      let raw = '';
      req.on('data', (d) => (raw += d));
      req.on('end', () => {
        seen.push(JSON.parse(raw));
        const r = replies.shift()!;
        res.writeHead(r.status, { 'content-type': 'application/json' });
        res.end(
          JSON.stringify(
            r.content
              ? {
                  id: 'x',
                  object: 'chat.completion',
                  created: 0,
                  model: 'scripted',
                  choices: [{ index: 0, finish_reason: 'stop', message: { role: 'assistant', content: r.content } }],
                }
              : { error: { message: 'down' } },
          ),
        );
      });
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    try {
      const write = modelStatementWriter({ baseURL: `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`, model: 'scripted', maxRetries: 0 });
      const patch = '--- a/m.py\n+++ b/m.py\n@@ -1 +1 @@\n-    return total - 1\n+    return total\n';
      const failures = [{ nodeid: 'tests/test_m.py::test_total', message: 'AssertionError: assert 2 == 3' }];
      const patches = { patch, test_patch: '--- a/tests/test_m.py\n+++ b/tests/test_m.py\n@@ -1 +1,2 @@\n+def test_total(): assert total([1, 2]) == 3\n' };
      const logs: string[] = [];
      const log = (m: string) => logs.push(m);
      expect(await chooseStatement(null, failures, patches, write, log)).toEqual({
        statement: 'total() is off by one\n\nCalling total([1, 2]) gives 2; I expected 3.\n',
        source: 'model',
      });
      const rejected = await chooseStatement(null, failures, patches, write, log);
      expect(rejected.source).toBe('failing_tests');
      expect(rejected.statement).toContain('`test_total` (tests/test_m.py)');
      const down = await chooseStatement(null, failures, patches, write, log);
      expect(down.source).toBe('failing_tests');
      expect(logs).toEqual([expect.stringMatching(/quotes the gold patch/), expect.stringMatching(/^the statement model failed/)]);
      // The model saw the failures and the tests, never the gold patch.
      expect(seen).toHaveLength(3);
      expect(seen[0].messages[1].content).toContain('tests/test_m.py::test_total: AssertionError: assert 2 == 3');
      expect(seen[0].messages[1].content).toContain('def test_total()');
      expect(JSON.stringify(seen)).not.toContain('return total - 1');
      // A linked issue wins; one that quotes the gold patch does not.
      const issue = { number: 4, title: 'total is wrong', body: 'It returns one less.', labels: [] };
      expect((await chooseStatement(issue, failures, patches, write, log)).source).toBe('issue');
      expect((await chooseStatement({ ...issue, body: 'See `return total - 1`' }, failures, patches, write, log)).source).toBe('failing_tests');
      expect(seen).toHaveLength(3);
    } finally {
      server.close();
    }
  });
});

describe('manifest settings that must not break task runs', () => {
  it('leaves test paths out of runs that name their own tests, keeping option values', () => {
    expect(withoutTestPaths(['tests', '-k', 'not slow', '--deselect', 'tests/test_a.py::test_x', 'src/pkg', '-x', '--tb=short'])).toEqual([
      '-k',
      'not slow',
      '--deselect',
      'tests/test_a.py::test_x',
      '-x',
      '--tb=short',
    ]);
  });

  it("keeps the unit's PYTHONPATH after the src layout's in a real container, with nothing of ours on it", async () => {
    const work = join(tempDir('pythonpath'), 'work');
    mkdirSync(work, { recursive: true });
    await runSandboxed({
      image: inject('base311'),
      cmd: ['sh', '-c', 'echo "$PYTHONPATH" > /worldline/out/p'],
      work,
      vars: { PYTHONPATH: '/repo/extra' },
      srcLayout: true,
      limits: DEFAULTS,
      timeoutMs: 60_000,
      labels: { 'worldline.stage': 'test-pythonpath' },
    });
    expect(readResult(work, 'p')!.trim()).toBe('/repo/src:/repo/extra');
  }, 120_000);
});

describe('a history of every shape on real corpus code (toolz), scanned without containers', () => {
  it('finds the fix, the feature and the pull request; skips the release and the branch merge; ignores docs, submodule and rename', async () => {
    const dir = tempDir('corpus-history');
    const shas = buildCorpusHistory(join(inject('corpusRoot'), 'toolz'), join(dir, 'toolz'));
    const gitDir = join(dir, 'toolz', '.git');
    const { candidates, skipped } = await findIssueCandidates(gitDir, shas.rename);
    expect(candidates.map((c) => [c.mainline_commit, c.fix_commit, c.shape])).toEqual([
      [shas.pr, shas.prHead, 'pull_request'],
      [shas.feature, shas.feature, 'together'],
      [shas.fix1, shas.fix1, 'together'],
    ]);
    expect(skipped).toEqual([
      { fix_commit: shas.branch, reason: expect.stringMatching(/^a merge of one branch into another/) },
      { fix_commit: shas.release, reason: expect.stringMatching(/^a release or version bump/) },
    ]);
    const [pr, , fix] = candidates;
    expect(pr.parent).toBe(shas.feature);
    expect(pr.pull_request).toBe(12);
    expect(pr.messages).toHaveLength(3);
    // The gold patch is code; the changelog line goes apart; renames and the gitlink stay small.
    const patches = await candidatePatches(gitDir, shas.rename, fix);
    expect(fix.code_files).toEqual(['toolz/itertoolz.py']);
    expect(patches.patch).toContain('+    return sum(1 for i in seq)');
    expect(patches.patch).not.toContain('CHANGELOG');
    expect(patches.aux_patch).toContain('+- count() no longer drops the first element of an iterator');
    expect(patches.bug_patch).toContain('rename from toolz/resources/records/r000.json');
    expect(patches.bug_patch).not.toContain('Subproject commit');
    expect(Buffer.byteLength(patches.bug_patch)).toBeLessThan(64 * 1024);
    expect(patches.changed).not.toContain('vendor/helpers');
    // base + bug_patch is the fix parent's tree (gitlink aside); test and gold patches apply on it.
    const work = join(dir, 'work');
    execFileSync('git', ['clone', '-q', join(dir, 'toolz'), work]);
    const g = (...args: string[]) => execFileSync('git', args, { cwd: work, encoding: 'utf8' });
    // The history goes on past the unit commit this scan used (the fix-titled features after it).
    g('checkout', '-q', shas.rename);
    writeFileSync(join(dir, 'bug.diff'), patches.bug_patch);
    writeFileSync(join(dir, 'test.diff'), patches.test_patch);
    writeFileSync(join(dir, 'fix.diff'), patches.patch);
    g('apply', join(dir, 'bug.diff'));
    g('add', '-A');
    expect(g('diff', '--cached', '--name-only', '--ignore-submodules=all', fix.parent).trim()).toBe('');
    g('apply', join(dir, 'test.diff'));
    g('apply', join(dir, 'fix.diff'));
    for (const line of GOLD_LINES.slice(1)) expect(patches.patch).not.toContain(line);
  });

  it('reads a new protocol and a documented new return value from the gold patches of fix-titled features', async () => {
    const dir = tempDir('corpus-history-signals');
    const shas = buildCorpusHistory(join(inject('corpusRoot'), 'toolz'), join(dir, 'toolz'));
    const gitDir = join(dir, 'toolz', '.git');
    const { candidates } = await findIssueCandidates(gitDir, shas.returns, { maxCandidates: 2 });
    expect(candidates.map((c) => [c.fix_commit, c.shape])).toEqual([
      [shas.returns, 'together'],
      [shas.protocol, 'together'],
    ]);
    const signals = async (i: number) => patchSignals((await candidatePatches(gitDir, shas.returns, candidates[i])).patch);
    expect(await signals(0)).toEqual(['-patch:new_return_value:do']);
    expect(await signals(1)).toEqual([
      '-patch:new_public_name:__eq__',
      '-patch:new_public_name:__hash__',
      '-patch:new_public_name:__ne__',
      '-patch:new_public_name:__repr__',
    ]);
    for (const c of candidates) expect(messageSignals(c.messages, null, null)).toEqual(['message:fix']);
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
    // The two features (a new function, a new parameter) fail only on the names they add.
    expect(mined.dropped).toEqual([
      { fix_commit: shas[2], reason: expect.stringMatching(/^a feature, not a fix: .*'unique_slug'/) },
      { fix_commit: shas[1], reason: expect.stringMatching(/^a feature, not a fix: .*'max_len'.*unexpected keyword argument/) },
    ]);
    expect(mined.fates.map((f) => [f.fix_commit, f.fate])).toEqual([
      [shas[3], 'kept'],
      [shas[2], 'dropped'],
      [shas[1], 'dropped'],
    ]);
    expect(mined.fates.every((f) => f.seconds > 0)).toBe(true);
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
      statement_source: 'issue',
      aux_patch: null,
    });
    expect(task.fix_signals).toEqual(['behavioural_failures:1/1', 'message:fix', 'issue:#3', 'issue_text:hangs']);
    expect(task.fix_confidence).toBeCloseTo(0.9);
    expect(task.instance_id).toMatch(new RegExp(`^slugs\\.${shas[4].slice(0, 8)}\\.issue__[0-9a-f]{8}$`));
    expect(task.patch).toContain('+        n += 1');
    expect(task.test_patch).toContain('+def test_several_taken_suffixes():');
    // The task state never holds the fix: the bug patch takes the unit's commit back to the parent.
    expect(task.bug_patch).toContain('-        n += 1');
    expect(mined.tasks).toHaveLength(1);
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
