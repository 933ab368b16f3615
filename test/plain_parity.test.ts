/**
 * The pieces of the plain-pytest comparison that need no container: pytest's JUnit XML read back
 * (keys as pytest's writer mangles node ids), the comparison's rules (flaky between plain runs,
 * unstable ids, one-sided ids), and the first real error line of pytest's console output. The
 * texts are pytest's own output (7.2 and 8.3, captured from the base images); the whole path runs
 * on real containers in fidelity.test.ts.
 */
import { describe, expect, it } from 'vitest';
import { junitKey, readJunit } from '../pipeline/sandbox/junit.js';
import { compare } from '../pipeline/sandbox/plain_parity.js';
import { firstErrorLine } from '../pipeline/sandbox/pytest_output.js';
import type { Outcome, TestVerdict } from '../pipeline/sandbox/pytest_report.js';

const XML = `<?xml version="1.0" encoding="utf-8"?><testsuites><testsuite name="pytest" errors="2" failures="2" skipped="2" tests="8" time="0.1" timestamp="2026-12-04T14:00:00" hostname="worldline">
<testcase classname="tests.test_a" name="test_pass" time="0.001" />
<testcase classname="tests.test_a.TestK" name="test_param[a/b::c-1]" time="0.001"><system-out>hi &lt;there&gt;</system-out></testcase>
<testcase classname="tests.test_a" name="test_fail" time="0.001"><failure message="assert 1 == 2">def test_fail():
&gt;       assert 1 == 2
E       assert 1 == 2</failure></testcase>
<testcase classname="tests.test_a" name="test_skip" time="0.000"><skipped type="pytest.skip" message="later">tests/test_a.py:9: later</skipped></testcase>
<testcase classname="tests.test_a" name="test_xfail" time="0.000"><skipped type="pytest.xfail" message="known" /></testcase>
<testcase classname="tests.test_a" name="test_setup_error" time="0.000"><error message="failed on setup with &quot;RuntimeError: no&quot;">boom</error></testcase>
<testcase classname="tests.test_a" name="test_fail_and_teardown" time="0.000"><failure message="x">x</failure><error message="failed on teardown with &quot;E&quot;">y</error></testcase>
<testcase classname="" name="tests.test_broken" time="0.000"><error message="collection failure">ImportError</error></testcase>
<testcase classname="" name="tests.test_pandas" time="0.000"><skipped message="could not import 'numpy': No module named 'numpy'" type="pytest.skip">tests/test_pandas.py:7: could not import 'numpy'</skipped></testcase>
</testsuite></testsuites>`;

const verdict = (nodeid: string, outcome: Outcome, extra: Partial<TestVerdict> = {}): TestVerdict => ({
  nodeid,
  outcome,
  runOutcomes: [outcome, outcome],
  flaky: false,
  unstableId: false,
  duration: 0,
  message: null,
  ...extra,
});

describe("pytest's JUnit XML", () => {
  it('reads each test case into an outcome, keyed as pytest mangles node ids', () => {
    const cases = readJunit(XML);
    expect(cases.map((c) => [c.key, c.outcome])).toEqual([
      ['tests.test_a::test_pass', 'passed'],
      ['tests.test_a.TestK::test_param[a/b::c-1]', 'passed'],
      ['tests.test_a::test_fail', 'failed'],
      ['tests.test_a::test_skip', 'skipped'],
      ['tests.test_a::test_xfail', 'xfailed'],
      ['tests.test_a::test_setup_error', 'error'],
      ['tests.test_a::test_fail_and_teardown', 'failed'],
      ['::tests.test_broken', 'error'],
      ['::tests.test_pandas', 'skipped'],
    ]);
    expect(cases[5].message).toBe('failed on setup with "RuntimeError: no"');
    expect(cases.filter((c) => c.collectError).map((c) => c.key)).toEqual(['::tests.test_broken']);
    expect(cases.filter((c) => c.moduleSkip).map((c) => c.key)).toEqual(['::tests.test_pandas']);
    // Parameters keep their slashes and colons; the path becomes dotted, without .py.
    expect(junitKey('tests/test_a.py::TestK::test_param[a/b::c-1]')).toBe('tests.test_a.TestK::test_param[a/b::c-1]');
    expect(junitKey('pkg/mod.py::pkg.mod.func')).toBe('pkg.mod::pkg.mod.func');
  });
});

describe('the comparison with plain pytest', () => {
  const cases = readJunit(XML);
  const ours = [
    verdict('tests/test_a.py::test_pass', 'passed'),
    verdict('tests/test_a.py::TestK::test_param[a/b::c-1]', 'xpassed'),
    verdict('tests/test_a.py::test_fail', 'passed'),
    verdict('tests/test_a.py::test_skip', 'skipped'),
    verdict('tests/test_a.py::test_xfail', 'xfailed'),
    verdict('tests/test_a.py::test_setup_error', 'error'),
    verdict('tests/test_a.py::test_fail_and_teardown', 'failed', { flaky: true, runOutcomes: ['failed', 'passed'] }),
    verdict('tests/test_a.py::test_ours_only', 'passed'),
    verdict('tests/test_a.py::test_now[12:00]', 'passed', { unstableId: true }),
  ];

  it('counts equal outcomes (a non-strict xpass is a pass in JUnit), names mismatches, leaves flaky tests, unstable ids and module skips out', () => {
    const p = compare(ours, [{ exitCode: 1, cases, output: '' }]);
    expect(p).toMatchObject({ plain_runs: 1, compared: 7, equal: 5, mismatches: 1, plain_flaky: 0, problem: null });
    expect(p.mismatched).toEqual([{ node_id: 'tests/test_a.py::test_fail', ours: 'passed', plain: 'failed' }]);
    expect(p.ours_only).toEqual(['tests/test_a.py::test_ours_only']);
    expect(p.plain_only).toEqual(['::tests.test_broken (collection error: collection failure)']);
  });

  it('takes a test whose outcome differs between two plain runs as flaky, not as a mismatch', () => {
    const second = cases.map((c) => (c.key === 'tests.test_a::test_fail' ? { ...c, outcome: 'passed' as const } : c));
    const p = compare(ours, [
      { exitCode: 1, cases, output: '' },
      { exitCode: 1, cases: second, output: '' },
    ]);
    expect(p).toMatchObject({ plain_runs: 2, mismatches: 0, plain_flaky: 1, equal: 5 });
  });

  it("keeps the first run's findings when the second plain run wrote no report (killed at the suite timeout)", () => {
    const p = compare(ours, [
      { exitCode: 1, cases, output: '' },
      { exitCode: 124, cases: null, output: '' },
    ]);
    expect(p).toMatchObject({ plain_runs: 2, plain_exit_codes: [1, 124], compared: 7, equal: 5, mismatches: 1, plain_flaky: 0 });
    expect(p.plain_only).toEqual(['::tests.test_broken (collection error: collection failure)']);
  });

  it('says why when plain pytest wrote no report, with its first error line', () => {
    const output =
      "ImportError while loading conftest '/repo/tests/conftest.py'.\ntests/conftest.py:1: in <module>\n    import hypothesis\nE   ModuleNotFoundError: No module named 'hypothesis'\n";
    expect(compare(ours, [{ exitCode: 4, cases: null, output }]).problem).toBe(
      "plain pytest wrote no JUnit report (exit 4): ModuleNotFoundError: No module named 'hypothesis' (tests/conftest.py)",
    );
  });
});

describe("the first real error line of pytest's output", () => {
  it('names the exception and the file for a test module that fails to import', () => {
    const output = [
      '==================================== ERRORS ====================================',
      '__________________ ERROR collecting tests/test_broken.py ___________________',
      "ImportError while importing test module '/repo/tests/test_broken.py'.",
      'Hint: make sure your test modules/packages have valid Python names.',
      'Traceback:',
      '/usr/lib/python3.11/importlib/__init__.py:126: in import_module',
      '    return _bootstrap._gcd_import(name[level:], package)',
      'tests/test_broken.py:1: in <module>',
      '    import module_that_is_not_installed  # noqa: F401',
      "E   ModuleNotFoundError: No module named 'module_that_is_not_installed'",
    ].join('\n');
    expect(firstErrorLine(output)).toBe("ModuleNotFoundError: No module named 'module_that_is_not_installed' (tests/test_broken.py)");
  });

  it("gives pytest's own words for a usage error", () => {
    const output =
      'ERROR: usage: __main__.py [options] [file_or_dir] [file_or_dir] [...]\n__main__.py: error: unrecognized arguments: --cov=src\n  inifile: /repo/setup.cfg\n  rootdir: /repo\n';
    expect(firstErrorLine(output)).toBe('pytest: error: unrecognized arguments: --cov=src');
    expect(firstErrorLine('ERROR: file or directory not found: tests\n')).toBe('file or directory not found: tests');
  });

  it('reads the last line of a traceback pytest crashed with at start-up (a warning turned into an error)', () => {
    const output = [
      'Traceback (most recent call last):',
      '  File "/usr/lib/python3/dist-packages/_pytest/config/__init__.py", line 1150, in _warn_about_missing_assertion',
      '    warnings.warn(',
      'pytest.PytestAssertRewriteWarning: Module already imported so cannot be rewritten: worldline_report',
    ].join('\n');
    expect(firstErrorLine(output)).toBe('pytest.PytestAssertRewriteWarning: Module already imported so cannot be rewritten: worldline_report');
    expect(firstErrorLine('....F\n1 failed, 4 passed in 0.1s\n')).toBeNull();
  });
});
