/**
 * Parity with plain pytest, measured: the unit's suite run as `python3 -m pytest` in the same
 * image, with no Worldline code in the container at all (no /worldline/lib, no runner, no
 * plugin; pytest's own `--junitxml` for the outcomes), compared test by test with what our runs
 * recorded. A test whose outcome differs between two plain runs is flaky, not a mismatch; an id
 * one side has and the other does not is listed apart (an id that embeds the time, or a module
 * that imports under one and not the other). The JUnit file is written by the code under test's
 * own process, so it is evidence for this comparison only, never a source of outcomes.
 */
import { mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { outLayout } from '../runtime/layout.js';
import type { Unit } from '../runtime/manifest.js';
import type { PipelineOptions } from '../runtime/options.js';
import { redactText, unitRedactor } from '../runtime/part_redaction.js';
import type { PlainParity } from '../runtime/records.js';
import { type JunitCase, type JunitOutcome, junitKey, readJunit } from './junit.js';
import { firstErrorLine } from './pytest_output.js';
import type { Outcome, TestVerdict } from './pytest_report.js';
import { readResult } from './results.js';
import { freshWork, runSandboxed } from './sandbox.js';
import { TIMEOUT_EXIT } from './suite_run.js';

/** How many mismatches and one-sided ids a record keeps by name (the counts are whole). */
const NAMED = 20;

/** Our outcome in JUnit's classes: an xpass that is not strict is a pass there. */
const asJunit = (o: Outcome): JunitOutcome | 'missing' => (o === 'xpassed' ? 'passed' : o);

export interface PlainSpec {
  unit: Unit;
  imageId: string;
  srcLayout: boolean;
  options: PipelineOptions;
  /** pytest's arguments as our runs had them (suite_run.ts `suiteArgs`). */
  suiteArgs: string[];
}

interface PlainRun {
  /** pytest's exit status; TIMEOUT_EXIT when the suite timeout killed it. */
  exitCode: number;
  cases: JunitCase[] | null;
  output: string;
}

/** One plain `python3 -m pytest` run in a fresh container of the unit's image. */
async function plainRun(spec: PlainSpec, i: number): Promise<PlainRun> {
  const { unit, options } = spec;
  const work = freshWork(outLayout.work(options.out, 'validate', unit.id, `plain-${i}`));
  try {
    const result = await runSandboxed({
      image: spec.imageId,
      cmd: ['python3', '-m', 'pytest', ...spec.suiteArgs, '--junitxml=/worldline/out/junit.xml'],
      work,
      vars: unit.env.vars,
      srcLayout: spec.srcLayout,
      limits: options,
      timeoutMs: (options.suiteTimeoutS + 30) * 1000,
      labels: { 'worldline.unit': unit.id, 'worldline.stage': 'validate-plain' },
      ourCode: false,
    });
    const xml = readResult(work, 'junit.xml');
    return { exitCode: result.timedOut ? TIMEOUT_EXIT : (result.exitCode ?? TIMEOUT_EXIT), cases: xml === null ? null : readJunit(xml), output: result.output };
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
}

/**
 * Runs plain pytest once (twice when the first run disagrees with ours anywhere) and compares;
 * its output goes to the unit's `parity` log.
 */
export async function plainParity(spec: PlainSpec, verdicts: TestVerdict[]): Promise<PlainParity> {
  const runs = [await plainRun(spec, 1)];
  let parity = compare(verdicts, runs);
  // A second run tells flaky from mismatched; with no verdicts of ours (our run never started) there is nothing to tell.
  if (verdicts.length && (parity.mismatches || parity.ours_only.length || parity.plain_only.length)) {
    runs.push(await plainRun(spec, 2));
    parity = compare(verdicts, runs);
  }
  const { options, unit } = spec;
  mkdirSync(outLayout.logDir(options.out, 'parity'), { recursive: true });
  const log = runs.map((r, i) => `==== plain python3 -m pytest, run ${i + 1} (exit ${r.exitCode}) ====\n${r.output}`).join('\n');
  writeFileSync(outLayout.log(options.out, 'parity', unit.id), redactText(unitRedactor(options, unit), log));
  return parity;
}

/** Our verdicts against the plain runs' JUnit cases (the second plain run, when there is one, tells flaky from mismatched). */
export function compare(verdicts: TestVerdict[], runs: PlainRun[]): PlainParity {
  const exitCodes = runs.map((r) => r.exitCode);
  const first = runs[0];
  if (!first.cases) {
    const why = first.exitCode === TIMEOUT_EXIT ? 'it ran past the suite timeout' : `exit ${first.exitCode}`;
    const line = firstErrorLine(first.output);
    return empty(exitCodes, `plain pytest wrote no JUnit report (${why})${line ? `: ${line}` : ''}`);
  }
  // A later run that wrote no report (killed at the suite timeout) is no evidence of flakiness.
  const plain = runs.flatMap((r) => (r.cases ? [new Map(r.cases.map((c) => [c.key, c]))] : []));
  const ours = new Map(verdicts.filter((v) => !v.unstableId).map((v) => [junitKey(v.nodeid), v]));
  const parity = empty(exitCodes, null);
  for (const [key, v] of ours) {
    const seen = plain.map((m) => m.get(key));
    if (!seen[0]) {
      if (seen.slice(1).some(Boolean)) parity.plain_flaky++;
      else parity.ours_only.push(v.nodeid);
      continue;
    }
    parity.compared++;
    const plainFlaky = seen.some((c) => c?.outcome !== seen[0]?.outcome);
    if (v.flaky || plainFlaky) {
      parity.plain_flaky += plainFlaky ? 1 : 0;
      continue;
    }
    const mine = asJunit(v.outcome);
    if (mine === seen[0].outcome) parity.equal++;
    else {
      parity.mismatches++;
      if (parity.mismatched.length < NAMED) parity.mismatched.push({ node_id: v.nodeid, ours: v.outcome, plain: seen[0].outcome });
    }
  }
  const unstable = new Set(verdicts.filter((v) => v.unstableId).map((v) => junitKey(v.nodeid)));
  for (const c of first.cases) {
    // A module that skipped itself at import holds no test our report names either.
    if (ours.has(c.key) || unstable.has(c.key) || c.moduleSkip) continue;
    // An id of the first plain run that the second lacks embeds something that changes: unstable.
    if (plain.slice(1).some((m) => !m.has(c.key))) continue;
    parity.plain_only.push(c.collectError ? `${c.key} (collection error: ${c.message ?? ''})` : c.key);
  }
  parity.ours_only_count = parity.ours_only.length;
  parity.plain_only_count = parity.plain_only.length;
  parity.ours_only = parity.ours_only.slice(0, NAMED);
  parity.plain_only = parity.plain_only.slice(0, NAMED);
  return parity;
}

function empty(exitCodes: number[], problem: string | null): PlainParity {
  return {
    plain_runs: exitCodes.length,
    plain_exit_codes: exitCodes,
    compared: 0,
    equal: 0,
    mismatches: 0,
    mismatched: [],
    plain_flaky: 0,
    ours_only: [],
    ours_only_count: 0,
    plain_only: [],
    plain_only_count: 0,
    problem,
  };
}
