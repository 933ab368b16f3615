import { describe, expect, it } from 'vitest';
import { countVerdicts, foldReport, mergeRuns } from '../pipeline/test_results.js';

const line = (o: object) => JSON.stringify(o);
const phase = (nodeid: string, when: string, outcome: string, extra: object = {}) => line({ event: 'test', nodeid, when, outcome, duration: 0.1, ...extra });

describe('folding the reporting plugin output', () => {
  const ids = ['t.py::a', 't.py::b', 't.py::c', 't.py::d', 't.py::e', 't.py::f'];
  const report = [
    line({ event: 'start' }),
    line({ event: 'collected', nodeids: ids }),
    phase('t.py::a', 'setup', 'passed'), phase('t.py::a', 'call', 'passed'), phase('t.py::a', 'teardown', 'passed'),
    phase('t.py::b', 'setup', 'passed'), phase('t.py::b', 'call', 'failed', { message: 'assert 1 == 2' }), phase('t.py::b', 'teardown', 'passed'),
    phase('t.py::c', 'setup', 'failed', { message: 'fixture boom' }), phase('t.py::c', 'teardown', 'passed'),
    phase('t.py::d', 'setup', 'skipped', { message: 'no db' }), phase('t.py::d', 'teardown', 'passed'),
    phase('t.py::e', 'setup', 'passed'), phase('t.py::e', 'call', 'skipped', { wasxfail: true }), phase('t.py::e', 'teardown', 'passed'),
    phase('t.py::f', 'setup', 'passed'), phase('t.py::f', 'call', 'passed'), phase('t.py::f', 'teardown', 'failed', { message: 'leak' }),
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
    const allPass = [line({ event: 'collected', nodeids: ['t.py::a'] }), phase('t.py::a', 'call', 'passed'), line({ event: 'finish', exitstatus: 0 })].join('\n');
    expect(foldReport(allPass, 1, false).problem).toMatch(/exited 1 but the report has no failing test/);
    expect(foldReport('', 1, false).problem).toMatch(/reporting plugin wrote nothing/);
    expect(foldReport(line({ event: 'collected', nodeids: [] }), 5, false).problem).toBe('no tests collected (pytest exit 5)');
  });

  it('keeps what a killed run reported and marks the rest missing, tolerating a torn last line', () => {
    const torn = [line({ event: 'collected', nodeids: ['t.py::a', 't.py::b'] }), phase('t.py::a', 'call', 'passed'), '{"event": "te'].join('\n');
    const run = foldReport(torn, null, true);
    expect(run.tests.map((t) => t.outcome)).toEqual(['passed', 'missing']);
    expect(run.problem).toMatch(/wall timeout .* 1 of 2 collected tests had reported/);
  });

  it('marks a test flaky when its outcome differs between runs', () => {
    const run = (outcome: string) =>
      foldReport([line({ event: 'collected', nodeids: ['t.py::a', 't.py::b'] }), phase('t.py::a', 'call', 'passed'), phase('t.py::b', 'call', outcome), line({ event: 'finish', exitstatus: 0 })].join('\n'), outcome === 'failed' ? 1 : 0, false);
    const verdicts = mergeRuns([run('passed'), run('failed')]);
    expect(verdicts.map((v) => [v.nodeid, v.flaky, v.runOutcomes])).toEqual([
      ['t.py::a', false, ['passed', 'passed']],
      ['t.py::b', true, ['passed', 'failed']],
    ]);
    expect(countVerdicts(verdicts)).toMatchObject({ collected: 2, passed: 2, flaky: 1, stable_passed: 1 });
  });
});
