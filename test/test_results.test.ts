import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, inject, it } from 'vitest';
import type { ValidateRecord } from '../pipeline/runtime/records.js';
import { countVerdicts, finishedPart, foldReport, mergeRuns } from '../pipeline/sandbox/pytest_report.js';
import { runSandboxed } from '../pipeline/sandbox/sandbox.js';
import { pytestCommand, readRunFiles, runnerCommand, writeReportKey } from '../pipeline/sandbox/suite_run.js';
import { cli, gitRepo, tempDir } from './helpers.js';

const line = (o: object) => JSON.stringify(o);
const phase = (nodeid: string, when: string, outcome: string, extra: object = {}) => line({ event: 'test', nodeid, when, outcome, duration: 0.1, ...extra });

describe('folding the reporting plugin output', () => {
  const ids = ['t.py::a', 't.py::b', 't.py::c', 't.py::d', 't.py::e', 't.py::f'];
  const report = [
    line({ event: 'start' }),
    line({ event: 'collected', nodeids: ids }),
    phase('t.py::a', 'setup', 'passed'),
    phase('t.py::a', 'call', 'passed'),
    phase('t.py::a', 'teardown', 'passed'),
    phase('t.py::b', 'setup', 'passed'),
    phase('t.py::b', 'call', 'failed', { message: 'assert 1 == 2' }),
    phase('t.py::b', 'teardown', 'passed'),
    phase('t.py::c', 'setup', 'failed', { message: 'fixture boom' }),
    phase('t.py::c', 'teardown', 'passed'),
    phase('t.py::d', 'setup', 'skipped', { message: 'no db' }),
    phase('t.py::d', 'teardown', 'passed'),
    phase('t.py::e', 'setup', 'passed'),
    phase('t.py::e', 'call', 'skipped', { wasxfail: true }),
    phase('t.py::e', 'teardown', 'passed'),
    phase('t.py::f', 'setup', 'passed'),
    phase('t.py::f', 'call', 'passed'),
    phase('t.py::f', 'teardown', 'failed', { message: 'leak' }),
    line({ event: 'finish', exitstatus: 1 }),
  ].join('\n');

  it('gives one outcome per test from its phases', () => {
    const run = foldReport(report, 1, false);
    expect(run.problem).toBeNull();
    expect(run.tests.map((t) => [t.nodeid, t.outcome, t.message])).toEqual([
      ['t.py::a', 'passed', null],
      ['t.py::b', 'failed', 'assert 1 == 2'],
      ['t.py::c', 'error', 'fixture boom'],
      ['t.py::d', 'skipped', 'no db'],
      ['t.py::e', 'xfailed', null],
      ['t.py::f', 'error', 'leak'],
    ]);
  });

  it('rejects a report that disagrees with the exit code', () => {
    expect(foldReport(report, 0, false).problem).toMatch(/exited 0 but the report has 3 failing/);
    const allPass = [line({ event: 'collected', nodeids: ['t.py::a'] }), phase('t.py::a', 'call', 'passed'), line({ event: 'finish', exitstatus: 0 })].join(
      '\n',
    );
    expect(foldReport(allPass, 1, false).problem).toMatch(/exited 1 but the report has no failing test/);
    expect(foldReport('', 1, false).problem).toBe('pytest exited 1 before its session started');
    expect(foldReport(line({ event: 'collected', nodeids: [] }), 5, false).problem).toBe('no tests collected (pytest exit 5)');
  });

  it('takes the last attempt of a test a rerun plugin retried, as each plugin reports its attempts', () => {
    const rerun = line({ event: 'rerun', nodeid: 't.py::a', when: 'call' });
    const [setup, call, teardown] = [phase('t.py::a', 'setup', 'passed'), phase('t.py::a', 'call', 'passed'), phase('t.py::a', 'teardown', 'passed')];
    const fold = (...ls: string[]) =>
      foldReport([line({ event: 'collected', nodeids: ['t.py::a'] }), ...ls, line({ event: 'finish', exitstatus: 0 })].join('\n'), 0, false);
    // pytest-rerunfailures 10 (Debian's), 16 (the attempt's teardown after its rerun), pytest-retry (the call again).
    for (const run of [fold(setup, rerun, setup, call, teardown), fold(setup, rerun, teardown, setup, call, teardown), fold(setup, rerun, call, teardown)]) {
      expect(run.problem).toBeNull();
      expect(run.tests.map((t) => [t.nodeid, t.outcome])).toEqual([['t.py::a', 'passed']]);
    }
  });

  it('collects nothing from a session that stopped before its first test, whatever it had collected', () => {
    const collected = line({ event: 'collected', nodeids: ['t.py::a', 't.py::b'] });
    for (const exit of [2, 3, 4]) expect(foldReport(collected, exit, false).tests, `exit ${exit}`).toEqual([]);
    // A suite killed at its timeout keeps its collected tests, as missing: the reason counts them.
    expect(foldReport(collected, null, true).tests.map((t) => t.outcome)).toEqual(['missing', 'missing']);
  });

  it('keeps what a killed run reported and marks the rest missing, tolerating a torn last line', () => {
    const torn = [
      line({ event: 'collected', nodeids: ['t.py::a', 't.py::b'] }),
      phase('t.py::a', 'call', 'passed'),
      phase('t.py::a', 'teardown', 'passed'),
      '{"event": "te',
    ].join('\n');
    const run = foldReport(torn, null, true);
    expect(run.tests.map((t) => t.outcome)).toEqual(['passed', 'missing']);
    expect(run.problem).toMatch(/wall timeout .* 1 of 2 collected tests had reported/);
  });

  it('marks a test flaky when its outcome differs between runs', () => {
    const run = (outcome: string) =>
      foldReport(
        [
          line({ event: 'collected', nodeids: ['t.py::a', 't.py::b'] }),
          phase('t.py::a', 'call', 'passed'),
          phase('t.py::b', 'call', outcome),
          line({ event: 'finish', exitstatus: 0 }),
        ].join('\n'),
        outcome === 'failed' ? 1 : 0,
        false,
      );
    const verdicts = mergeRuns([run('passed'), run('failed')]);
    expect(verdicts.map((v) => [v.nodeid, v.flaky, v.runOutcomes])).toEqual([
      ['t.py::a', false, ['passed', 'passed']],
      ['t.py::b', true, ['passed', 'failed']],
    ]);
    expect(countVerdicts(verdicts)).toMatchObject({ collected: 2, passed: 2, flaky: 1, stable_passed: 1 });
  });
});

describe('signed reports (validate, trace, grading)', () => {
  let key = '';

  /** Runs the real plugin on `tests` in the bookworm base image under the runner, which hands it the key, as every suite run does. */
  async function signedRun(tests: string): Promise<{ report: string; exit: number | null }> {
    const dir = tempDir('signed');
    writeFileSync(join(dir, 'test_x.py'), tests);
    key = writeReportKey(dir);
    await runSandboxed({
      image: inject('base311'),
      cmd: runnerCommand(1, 60, 0, [...pytestCommand([], 0, false), '/worldline/out/test_x.py']),
      work: dir,
      vars: {},
      srcLayout: false,
      limits: { memoryMb: 512, pids: 128, cpus: 1 },
      timeoutMs: 60_000,
      labels: { 'worldline.stage': 'test-signed' },
    });
    const run = readRunFiles(dir, 1);
    return { report: run.report ?? '', exit: run.exitCode };
  }

  it('accepts what the plugin signed and catches rewritten, cut, injected and post-session tampering', async () => {
    const { report, exit } = await signedRun('def test_ok():\n    pass\n\ndef test_bad():\n    assert 1 == 2\n');
    expect(exit).toBe(1);
    const honest = foldReport(report, exit, false, { key, file: 'report-1.jsonl' });
    expect(honest.problem).toBeNull();
    expect(honest.tests.map((t) => [t.nodeid, t.outcome])).toEqual([
      ['test_x.py::test_ok', 'passed'],
      ['test_x.py::test_bad', 'failed'],
    ]);
    // Unsigned, the same report reads as plain JSON Lines would not: every line carries a MAC.
    expect(report.split('\n')[0]).toMatch(/^[0-9a-f]{64} \{/);
    expect(foldReport(report, exit, false, { key: 'x'.repeat(64), file: 'report-1.jsonl' }).problem).toMatch(/not signed by the reporting plugin/);
    const forged = report.replace('"outcome": "failed"', '"outcome": "passed"');
    expect(forged).not.toBe(report);
    expect(foldReport(forged, 0, false, { key, file: 'report-1.jsonl' }).problem).toMatch(/line \d+ of the report is not signed/);
    const lines = report.trim().split('\n');
    const cut = lines.filter((l) => !(l.includes('test_bad') && l.includes('"when": "call"'))).join('\n') + '\n';
    expect(foldReport(cut, 0, false, { key, file: 'report-1.jsonl' }).problem).toMatch(/out of sequence/);
    expect(foldReport(lines.slice(0, -1).join('\n') + '\n', 1, false, { key, file: 'report-1.jsonl' }).problem).toMatch(/never finished/);
    // pytest said 1; a process that exits 0 anyway had something run after the session.
    expect(foldReport(report, 0, false, { key, file: 'report-1.jsonl' }).problem).toMatch(/finished with status 1 but the process exited 0/);
    // Signed for run 1's file: moved into run 2's place (a test that hides a failing second run), it is caught and named.
    expect(foldReport(report, exit, false, { key, file: 'report-2.jsonl' }).problem).toBe(
      'the report was tampered with: line 1 of the report was signed for "report-1.jsonl", not report-2.jsonl (moved from another run or file)',
    );
  }, 120_000);

  it('code under test can neither read the key nor reroute the hooks', async () => {
    const { report, exit } = await signedRun(
      [
        'import os, sys',
        'def test_key_is_gone():',
        '    assert "WORLDLINE_REPORT_FD" not in os.environ and "WORLDLINE_REPORT" not in os.environ',
        '    assert not os.get_inheritable(sys.modules["worldline_report"]._state["fd"]), "the report pipe would reach subprocesses"',
        '    for fd in os.listdir("/proc/self/fd"):',
        '        try:',
        '            assert not os.readlink("/proc/self/fd/" + fd).endswith("/key"), "the key file is still open"',
        '        except FileNotFoundError:',
        '            pass',
        'def test_reroute():',
        '    sys.modules["worldline_report"]._emit = lambda record: None',
        '    assert False',
        '',
      ].join('\n'),
    );
    const run = foldReport(report, exit, false, { key, file: 'report-1.jsonl' });
    expect(run.problem).toBeNull();
    expect(run.tests[0].message).toBeNull();
    expect(run.tests.map((t) => [t.nodeid, t.outcome])).toEqual([
      ['test_x.py::test_key_is_gone', 'passed'],
      ['test_x.py::test_reroute', 'failed'],
    ]);
  }, 120_000);

  it('takes subtests as parts of their test (a failing one fails it) and a rerun attempt as no result, not as a phase reported twice', async () => {
    // pytest-subtests from Debian, as pytest 9 has them built in (fastmcp's and gpytorch's suites were refused as tampered);
    // pytest-rerunfailures from Debian, whose first attempt of a flaky test is reported as `rerun`.
    const dir = tempDir('subtests');
    const repo = gitRepo(join(dir, 'repo'), {
      'tests/test_sub.py': [
        'import unittest',
        '',
        'def test_fixture(subtests):',
        '    for i in range(3):',
        '        with subtests.test(i=i):',
        '            assert i != 1',
        '',
        'def test_plain():',
        '    pass',
        '',
        'class TestCase(unittest.TestCase):',
        '    def test_sub(self):',
        '        for i in range(2):',
        '            with self.subTest(i=i):',
        '                self.assertLess(i, 2)',
        '',
      ].join('\n'),
      'tests/test_flaky.py': [
        'import os, pytest',
        '',
        '@pytest.mark.flaky(reruns=2)',
        'def test_passes_at_its_second_attempt():',
        '    if not os.path.exists("/tmp/attempted"):',
        '        open("/tmp/attempted", "w").close()',
        '        assert False, "first attempt"',
        '',
      ].join('\n'),
    });
    const manifest = join(dir, 'manifest.jsonl');
    writeFileSync(manifest, `${JSON.stringify({ repo, python: '3.11', env: { apt: ['python3-pytest-subtests', 'python3-pytest-rerunfailures'] } })}\n`);
    const out = join(dir, 'out');
    const res = await cli(['run', '--manifest', manifest, '--out', out, '--stages', 'clone,resolve,build,validate', '--licenses', '*']);
    expect(res.code, `${res.stdout}\n${res.stderr}`).toBe(0);
    const ledger = join(out, 'ledger', 'validate');
    const validated = JSON.parse(readFileSync(join(ledger, readdirSync(ledger)[0]), 'utf8')) as { status: string; record: ValidateRecord };
    expect(validated.status).toBe('ok');
    expect(validated.record).toMatchObject({ collected: 4, passed: 3, failed: 1 });
  }, 600_000);

  it('the runner, which alone signs, records as tampered a stream no honest plugin sends', async () => {
    /** The problem of a run whose test module (`body`) writes down the plugin's pipe to the runner. */
    const problemOf = async (...body: string[]) => {
      const { report, exit } = await signedRun(['import atexit, json, os, sys', 'fd = sys.modules["worldline_report"]._state["fd"]', ...body, ''].join('\n'));
      return foldReport(report, exit, false, { key, file: 'report-1.jsonl' }).problem;
    };
    const pass = 'json.dumps({"event": "test", "nodeid": "test_x.py::test_lie", "when": "call", "outcome": "passed", "duration": 0})';
    // A passing call phase sent ahead of pytest's own (failing) one.
    expect(await problemOf('def test_lie():', `    os.write(fd, (${pass} + "\\n").encode())`, '    assert False')).toBe(
      'the report was tampered with: test_x.py::test_lie reported its call phase twice',
    );
    expect(await problemOf('def test_garbage():', '    os.write(fd, b"not json\\n")')).toBe(
      'the report was tampered with: the plugin sent a line that is no JSON record',
    );
    // After the plugin closed its end, on a copy kept for after pytest's session.
    expect(await problemOf('late = os.dup(fd)', 'def test_lie():', `    atexit.register(os.write, late, (${pass} + "\\n").encode())`)).toBe(
      'the report was tampered with: the plugin sent a record after the session finished',
    );
  }, 240_000);
});

describe('a suite longer than its time limit', () => {
  it('keeps the tests that finished in every run, and trace runs only those', async () => {
    const dir = tempDir('cut-short');
    const repo = gitRepo(join(dir, 'repo'), {
      'tests/test_a.py': ['def test_1():', '    pass', '', 'def test_2():', '    pass', '', 'def test_3():', '    assert 1 + 1 == 2', ''].join('\n'),
      'tests/test_b.py': ['import time', '', 'def test_slow():', '    time.sleep(120)', '', 'def test_after():', '    pass', ''].join('\n'),
    });
    const manifest = join(dir, 'manifest.jsonl');
    writeFileSync(manifest, `${JSON.stringify({ repo, python: '3.11' })}\n`);
    const out = join(dir, 'out');
    // Traced whole, the suite would meet its traced limit (10 s x 2) in test_slow too.
    const args = ['run', '--manifest', manifest, '--out', out, '--stages', 'clone,build,validate,trace', '--licenses', '*'];
    const res = await cli([...args, '--suite-timeout', '10', '--trace-slowdown', '2', '--no-plain-parity']);
    expect(res.code, `${res.stdout}\n${res.stderr}`).toBe(0);
    const record = <R>(stage: string) => {
      const ledger = join(out, 'ledger', stage);
      return JSON.parse(readFileSync(join(ledger, readdirSync(ledger)[0]), 'utf8')) as { status: string; record: R };
    };
    // One run of the two asked: a run past the timeout is not repeated (the runner stops there).
    expect(record<ValidateRecord>('validate').record).toMatchObject({ runs: 1, collected: 3, passed: 3, unfinished: 2, traceable: true });
    const rows = (part: string) =>
      readdirSync(join(out, 'parts', part)).flatMap((f) =>
        readFileSync(join(out, 'parts', part, f), 'utf8')
          .split('\n')
          .filter(Boolean)
          .map((l) => (JSON.parse(l) as { node_id: string }).node_id),
      );
    expect(rows('tests').sort()).toEqual(['tests/test_a.py::test_1', 'tests/test_a.py::test_2', 'tests/test_a.py::test_3']);
    expect(record<{ tests_traced: number }>('trace')).toMatchObject({ status: 'ok', record: { tests_traced: 3 } });
    expect(new Set(rows('traces'))).toEqual(new Set(['tests/test_a.py::test_1', 'tests/test_a.py::test_2', 'tests/test_a.py::test_3']));
  }, 600_000);

  it('keeps the tests that finished before one the memory limit stopped', async () => {
    const dir = tempDir('out-of-memory');
    const repo = gitRepo(join(dir, 'repo'), {
      'tests/test_a.py': ['def test_1():', '    pass', ''].join('\n'),
      // Writes every page: the kernel, not Python's MemoryError, stops it at the container's limit.
      'tests/test_b.py': [
        'def test_hog():',
        "    held = [b'x' * (64 << 20) for _ in range(64)]",
        '    assert held',
        '',
        'def test_after():',
        '    pass',
        '',
      ].join('\n'),
    });
    const manifest = join(dir, 'manifest.jsonl');
    writeFileSync(manifest, `${JSON.stringify({ repo, python: '3.11' })}\n`);
    const out = join(dir, 'out');
    const args = ['run', '--manifest', manifest, '--out', out, '--stages', 'clone,build,validate', '--licenses', '*', '--memory', '512', '--no-plain-parity'];
    const res = await cli(args);
    expect(res.code, `${res.stdout}\n${res.stderr}`).toBe(0);
    const ledger = join(out, 'ledger', 'validate');
    const entry = JSON.parse(readFileSync(join(ledger, readdirSync(ledger)[0]), 'utf8')) as { status: string; record: ValidateRecord };
    expect(entry.status).toBe('ok');
    expect(entry.record).toMatchObject({ collected: 1, passed: 1, unfinished: 2, traceable: true });
    expect(res.stderr + res.stdout).toMatch(/the memory limit \(512 MB\) stopped it with 2 test\(s\) unfinished/);
  }, 600_000);

  it('keeps nothing from a run with another problem beside the timeout', () => {
    const report = [line({ event: 'collected', nodeids: ['t.py::a', 't.py::b'] }), phase('t.py::a', 'setup', 'passed'), phase('t.py::a', 'call', 'passed')];
    // Its teardown never reported: unfinished, so nothing finished.
    const run = foldReport([...report, phase('t.py::b', 'setup', 'passed'), ''].join('\n'), null, true);
    expect(run.tests.map((t) => t.outcome)).toEqual(['missing', 'missing']);
    const done = foldReport([...report, phase('t.py::a', 'teardown', 'passed'), ''].join('\n'), null, true);
    done.problem = 'the suite exceeded its wall timeout and was killed; 1 of 2 collected tests had reported';
    expect(finishedPart([done])).toMatchObject({
      unfinished: 1,
      by: ['suite timeout'],
      runs: [{ problem: null, tests: [{ nodeid: 't.py::a', outcome: 'passed' }] }],
    });
    expect(finishedPart([{ ...done, problem: 'the report was tampered with: t.py::a reported its call phase twice' }])).toBeNull();
    expect(finishedPart([{ ...done, timedOut: false, problem: null }])).toBeNull();
    // Stopped at the memory limit: the same rule, said as such.
    const killed = foldReport(
      [...report, phase('t.py::a', 'teardown', 'passed'), phase('t.py::b', 'setup', 'passed'), ''].join('\n'),
      137,
      false,
      undefined,
      true,
    );
    expect(killed.tests.map((t) => `${t.outcome} ${t.message ?? ''}`.trim())).toEqual(['passed', 'missing unfinished at the memory limit']);
    killed.problem = 'out of memory (killed at the 512 MB limit)';
    expect(finishedPart([killed])).toMatchObject({ unfinished: 1, by: ['memory'], runs: [{ problem: null, tests: [{ nodeid: 't.py::a' }] }] });
    // Stopped in its first test: nothing to keep, and the limit stays the run's problem.
    const first = foldReport(
      [line({ event: 'collected', nodeids: ['t.py::a'] }), phase('t.py::a', 'setup', 'passed'), ''].join('\n'),
      137,
      false,
      undefined,
      true,
    );
    expect(finishedPart([{ ...first, problem: 'out of memory (killed at the 512 MB limit)' }])).toBeNull();
  });
});
