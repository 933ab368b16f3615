/**
 * Folds the reporting plugin's JSON Lines into one outcome per test and cross-checks them with
 * pytest's exit code: a suite can print anything, but it cannot make the plugin's hooks lie
 * and the exit code agree at the same time without being caught.
 */

import { createHmac, timingSafeEqual } from 'node:crypto';
import type { SuiteCounts } from '../runtime/records.js';

export type Outcome = 'passed' | 'failed' | 'error' | 'skipped' | 'xfailed' | 'xpassed' | 'missing';

export interface TestResult {
  nodeid: string;
  outcome: Outcome;
  /** Sum of setup, call and teardown durations, seconds. */
  duration: number;
  message: string | null;
}

export interface SuiteRun {
  /** pytest's exit status; 137 when the wall timeout killed it, null when it never exited. */
  exitCode: number | null;
  timedOut: boolean;
  tests: TestResult[];
  collectErrors: { nodeid: string; message: string | null }[];
  /** Whether the plugin saw the session finish. */
  finished: boolean;
  /** Why this run cannot be trusted, or null when it can. */
  problem: string | null;
}

interface PhaseReport {
  event: 'test';
  nodeid: string;
  when: 'setup' | 'call' | 'teardown';
  outcome: 'passed' | 'failed' | 'skipped';
  duration: number;
  wasxfail?: boolean;
  message?: string;
}

type ReportLine =
  | { event: 'start' }
  | { event: 'collected'; nodeids: string[] }
  | { event: 'collect_error'; nodeid: string; message: string | null }
  | PhaseReport
  | { event: 'finish'; exitstatus: number }
  /**
   * A phase reported as an attempt that does not count, in place of its report: pytest-rerunfailures
   * runs the test again from its setup (that new setup drops what the test reported so far),
   * pytest-retry reports the phase once more.
   */
  | { event: 'rerun'; nodeid: string; when: string }
  /**
   * One subtest of a test (the subtests fixture, unittest's subTest under pytest 9 or
   * pytest-subtests): a failing one fails its test. Sent by a test itself it can only fail it.
   */
  | { event: 'subtest'; nodeid: string; outcome: string; message?: string }
  /** The runner's (worldline_runs.py): the plugin sent a record no honest plugin sends; the report ends here. */
  | { event: 'tampered'; reason: string };

function phaseOutcome(phases: PhaseReport[]): { outcome: Outcome; message: string | null } {
  const by = (when: PhaseReport['when']) => phases.find((p) => p.when === when);
  const setup = by('setup');
  const call = by('call');
  const teardown = by('teardown');
  if (setup?.outcome === 'failed') return { outcome: 'error', message: setup.message ?? null };
  if (setup?.outcome === 'skipped') return { outcome: setup.wasxfail ? 'xfailed' : 'skipped', message: setup.message ?? null };
  if (!call) return { outcome: 'missing', message: 'no call phase was reported' };
  let result: { outcome: Outcome; message: string | null };
  if (call.outcome === 'failed') result = { outcome: 'failed', message: call.message ?? null };
  else if (call.outcome === 'skipped') result = { outcome: call.wasxfail ? 'xfailed' : 'skipped', message: call.message ?? null };
  else result = { outcome: call.wasxfail ? 'xpassed' : 'passed', message: null };
  if (teardown?.outcome === 'failed' && (result.outcome === 'passed' || result.outcome === 'xpassed')) {
    return { outcome: 'error', message: teardown.message ?? 'teardown failed' };
  }
  return result;
}

const FAILING: ReadonlySet<Outcome> = new Set(['failed', 'error']);

/** How a file of the runner's is checked: this container's key, and the file's name in the work folder, which every line must carry. */
export interface Signed {
  key: string;
  file: string;
}

/**
 * Lines of a file signed by the runner (tracers/worldline_runs.py: the reporting plugin's
 * records, or a driver's results) with this container's key: each must carry a valid HMAC, the
 * next sequence number and the name of the file it was signed for (a line moved from another
 * run's report or another file is named as such). Returns the lines, or why the file was tampered
 * with; `what` names the file and `by` its signer in that reason.
 */
export function signedLines<T = ReportLine>(
  reportText: string,
  { key, file }: Signed,
  what = 'the report',
  by = 'the reporting plugin',
): { lines: T[]; tampered: string | null } {
  const raws = reportText.split('\n');
  // A torn last line from a killed run is expected, and is not ours to trust.
  if (!reportText.endsWith('\n')) raws.pop();
  const lines: T[] = [];
  for (const [i, raw] of raws.entries()) {
    if (!raw) continue;
    const space = raw.indexOf(' ');
    const body = raw.slice(space + 1);
    const mac = createHmac('sha256', key).update(body, 'utf8').digest('hex');
    const given = raw.slice(0, space);
    if (space !== 64 || !timingSafeEqual(Buffer.from(given), Buffer.from(mac))) return { lines, tampered: `line ${i + 1} of ${what} is not signed by ${by}` };
    const line = JSON.parse(body) as T & { seq: number; file?: unknown };
    if (line.file !== file)
      return { lines, tampered: `line ${i + 1} of ${what} was signed for ${JSON.stringify(line.file ?? null)}, not ${file} (moved from another run or file)` };
    if (line.seq !== lines.length) return { lines, tampered: `line ${i + 1} of ${what} is out of sequence (lines were removed, repeated or reordered)` };
    lines.push(line);
  }
  return { lines, tampered: null };
}

/**
 * Parses one run's report. `exitCode` is what the container says pytest returned. With `signed`,
 * the report must be the runner's, signed for that file (every run of ours; unsigned reports are
 * what tests of the folding itself hand in). `outOfMemory`: the kernel killed pytest at the
 * container's memory limit, which stops a run as the suite timeout does.
 */
export function foldReport(reportText: string, exitCode: number | null, timedOut: boolean, signed?: Signed, outOfMemory = false): SuiteRun {
  let lines: ReportLine[] = [];
  let tampered: string | null = null;
  if (signed === undefined) {
    for (const raw of reportText.split('\n')) {
      if (!raw.trim()) continue;
      try {
        lines.push(JSON.parse(raw) as ReportLine);
      } catch {
        // A torn last line from a killed run is expected; anything else is not ours to trust.
      }
    }
  } else ({ lines, tampered } = signedLines(reportText, signed));
  tampered ??= lines.find((l): l is Extract<ReportLine, { event: 'tampered' }> => l.event === 'tampered')?.reason ?? null;
  const collected: string[] = [];
  const phases = new Map<string, PhaseReport[]>();
  const collectErrors: SuiteRun['collectErrors'] = [];
  const failedSubtest = new Map<string, string | null>();
  const retrying = new Set<string>();
  let finished = false;
  for (const line of lines) {
    if (line.event === 'collected') collected.push(...line.nodeids);
    else if (line.event === 'collect_error') collectErrors.push({ nodeid: line.nodeid, message: line.message });
    else if (line.event === 'finish') finished = true;
    else if (line.event === 'rerun') retrying.add(line.nodeid);
    else if (line.event === 'subtest' && line.outcome === 'failed' && !failedSubtest.has(line.nodeid)) failedSubtest.set(line.nodeid, line.message ?? null);
    else if (line.event === 'test') {
      if (line.when === 'setup' && retrying.delete(line.nodeid)) phases.delete(line.nodeid);
      const list = phases.get(line.nodeid) ?? [];
      list.push(line);
      phases.set(line.nodeid, list);
    }
  }
  // Tests reported but not collected can happen with plugins that generate items late. A session
  // stopped before its first test (interrupted at collection, an internal error, a usage error)
  // ran none of what it had collected: no tests.
  const stoppedAtCollection = (exitCode === 2 || exitCode === 3 || exitCode === 4) && phases.size === 0;
  const unique = stoppedAtCollection ? [] : [...new Set([...collected, ...phases.keys()])];
  const tests: TestResult[] = unique.map((nodeid) => {
    const ph = phases.get(nodeid) ?? [];
    // A test the timeout (or the memory limit) stopped before its teardown reported has no outcome to trust.
    const unfinished = (timedOut || outOfMemory) && !ph.some((p) => p.when === 'teardown');
    let { outcome, message } =
      ph.length && !unfinished
        ? phaseOutcome(ph)
        : {
            outcome: 'missing' as Outcome,
            message: unfinished ? `unfinished at ${timedOut ? 'the suite timeout' : 'the memory limit'}` : 'no result was reported',
          };
    if ((outcome === 'passed' || outcome === 'xpassed') && failedSubtest.has(nodeid))
      ({ outcome, message } = { outcome: 'failed', message: failedSubtest.get(nodeid)! });
    const duration = ph.reduce((s, p) => s + (p.duration || 0), 0);
    return { nodeid, outcome, message, duration: Math.round(duration * 1e6) / 1e6 };
  });
  const run: SuiteRun = { exitCode, timedOut, tests, collectErrors, finished, problem: null };
  run.problem =
    tampered !== null
      ? `the report was tampered with: ${tampered}`
      : signed !== undefined
        ? (signedCheck(lines, exitCode) ?? crossCheck(run, lines.length > 0))
        : crossCheck(run, lines.length > 0);
  return run;
}

/** What only a signed report lets us check: no test phase reported twice, and pytest's own exit status. */
function signedCheck(lines: ReportLine[], exitCode: number | null): string | null {
  // The runner's rule (worldline_runs.py _Report): a rerun stands in for its phase's report, and
  // the test's next setup starts a new attempt.
  const seen = new Set<string>();
  const retrying = new Set<string>();
  for (const line of lines) {
    if (line.event !== 'test' && line.event !== 'rerun') continue;
    if (line.event === 'test' && line.when === 'setup' && retrying.delete(line.nodeid))
      for (const when of ['setup', 'call', 'teardown']) seen.delete(`${when} ${line.nodeid}`);
    const k = `${line.when} ${line.nodeid}`;
    if (seen.has(k)) return `the report was tampered with: ${line.nodeid} reported its ${line.when} phase twice`;
    if (line.event === 'rerun') retrying.add(line.nodeid);
    else seen.add(k);
  }
  const finish = lines.find((l) => l.event === 'finish') as { exitstatus: number } | undefined;
  if (finish && exitCode !== null && finish.exitstatus !== exitCode)
    return `pytest finished with status ${finish.exitstatus} but the process exited ${exitCode}: something ran after the session`;
  return null;
}

function crossCheck(run: SuiteRun, anyReport: boolean): string | null {
  const failing = run.tests.filter((t) => FAILING.has(t.outcome)).length;
  if (run.timedOut) {
    const reported = run.tests.filter((t) => t.outcome !== 'missing').length;
    return `the suite exceeded its wall timeout and was killed; ${reported} of ${run.tests.length} collected tests had reported`;
  }
  if (!anyReport) return `pytest exited ${run.exitCode} before its session started`;
  switch (run.exitCode) {
    case 0:
      if (failing) return `pytest exited 0 but the report has ${failing} failing test(s): the report cannot be trusted`;
      break;
    case 1:
      if (!failing && !run.collectErrors.length) return 'pytest exited 1 but the report has no failing test: the report cannot be trusted';
      break;
    case 2:
      return run.collectErrors.length
        ? `pytest was interrupted by ${run.collectErrors.length} collection error(s), first: ${run.collectErrors[0].nodeid}: ${run.collectErrors[0].message ?? ''}`.trim()
        : 'pytest was interrupted (exit 2)';
    case 3:
      return 'pytest hit an internal error (exit 3)';
    case 4:
      return 'pytest rejected its command line (exit 4: usage error)';
    case 5:
      return 'no tests collected (pytest exit 5)';
    default:
      return `pytest ended with unexpected exit status ${run.exitCode}`;
  }
  if (!run.finished) return `pytest exited ${run.exitCode} but the session never finished in the report`;
  return null;
}

export interface TestVerdict {
  nodeid: string;
  /** Outcome of the first run (the reference run). */
  outcome: Outcome;
  runOutcomes: Outcome[];
  /** The same test id had different outcomes in different runs. */
  flaky: boolean;
  /**
   * The id was not there in every run (one that embeds the time, a random number or a memory
   * address): not a flaky test, but no test later stages can name again either.
   */
  unstableId: boolean;
  duration: number;
  message: string | null;
}

/** The problem suite_run.ts gives a run the kernel stopped at the container's memory limit. */
export const OUT_OF_MEMORY = 'out of memory (killed at the';

/** A limit that can stop a suite before its end, with the tests that finished kept. */
export type SuiteLimit = 'suite timeout' | 'memory';

/**
 * Runs whose only problem is the suite timeout (a suite longer than its budget) or the memory
 * limit (a test that needs more than the container has: x-transformers' largest models): each
 * keeps the tests that finished in every run, and `unfinished` counts the collected ones that did
 * not; `by` names the limits that stopped them. Null when no run was cut short, one has any other problem
 * (tampering, a test the watchdog killed), or no test finished in every run.
 */
export function finishedPart(runs: SuiteRun[]): { runs: SuiteRun[]; unfinished: number; by: SuiteLimit[] } | null {
  const byTime = (r: SuiteRun) => r.timedOut && !!r.problem?.startsWith('the suite exceeded its wall timeout');
  const byMemory = (r: SuiteRun) => !r.timedOut && !!r.problem?.startsWith(OUT_OF_MEMORY);
  const cutShort = (r: SuiteRun) => byTime(r) || byMemory(r);
  if (!runs.some(cutShort) || runs.some((r) => r.problem && !cutShort(r))) return null;
  const finished = runs.map((r) => new Set(r.tests.filter((t) => t.outcome !== 'missing').map((t) => t.nodeid)));
  const kept = new Set([...finished[0]].filter((id) => finished.every((f) => f.has(id))));
  // Nothing to keep: the limit that stopped the run is the unit's reason, not an empty suite.
  if (!kept.size) return null;
  const collected = new Set(runs.flatMap((r) => r.tests.map((t) => t.nodeid)));
  return {
    runs: runs.map((r) => ({ ...r, tests: r.tests.filter((t) => kept.has(t.nodeid)), problem: null })),
    unfinished: collected.size - kept.size,
    by: [...new Set(runs.filter(cutShort).map((r): SuiteLimit => (byTime(r) ? 'suite timeout' : 'memory')))],
  };
}

/**
 * Merges N runs: a test whose outcome differs between runs is flaky; an id that some run did not
 * have at all is an unstable id (its outcome there is `missing`), never counted as flaky.
 */
export function mergeRuns(runs: SuiteRun[]): TestVerdict[] {
  const byRun = runs.map((r) => new Map(r.tests.map((t) => [t.nodeid, t])));
  const ids = [...new Set(runs.flatMap((r) => r.tests.map((t) => t.nodeid)))];
  return ids.map((nodeid) => {
    const per = byRun.map((m) => m.get(nodeid));
    const runOutcomes = per.map((t) => t?.outcome ?? 'missing');
    const first = per.find((t) => t) as TestResult;
    const unstableId = per.some((t) => !t);
    return {
      nodeid,
      outcome: runOutcomes[0],
      runOutcomes,
      flaky: !unstableId && new Set(runOutcomes).size > 1,
      unstableId,
      duration: first.duration,
      message: per.find((t) => t && t.outcome !== 'passed')?.message ?? null,
    };
  });
}

export function countVerdicts(verdicts: TestVerdict[]): SuiteCounts {
  const c: SuiteCounts = {
    collected: verdicts.length,
    passed: 0,
    failed: 0,
    error: 0,
    skipped: 0,
    xfailed: 0,
    xpassed: 0,
    missing: 0,
    flaky: 0,
    unstable_ids: 0,
    stable_passed: 0,
  };
  for (const v of verdicts) {
    c[v.outcome] += 1;
    if (v.flaky) c.flaky += 1;
    if (v.unstableId) c.unstable_ids += 1;
    if (v.runOutcomes.every((o) => o === 'passed')) c.stable_passed += 1;
  }
  return c;
}
