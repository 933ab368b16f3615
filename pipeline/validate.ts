/**
 * Stage `validate`: runs the unit's suite N times, one run after another in one sandboxed
 * container (no network; memory, pids and CPU limits; a wall timeout per run), so state a run
 * leaves behind can change the next run and show up as flakiness. Outcomes come from our
 * reporting plugin, written outside /repo, cross-checked with pytest's exit code.
 */
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { TestRecord } from '../schemas/tests.js';
import type { BuildRecord } from './build.js';
import type { CloneRecord } from './clone.js';
import { runContainer } from './docker.js';
import { writeFileAtomic } from './ledger.js';
import { tracersDir } from './paths.js';
import { shQuote } from './shell.js';
import { failed, ok, requireRecord, type Stage, type StageContext } from './stage.js';
import { countVerdicts, foldReport, mergeRuns, type SuiteCounts, type SuiteRun, type TestVerdict } from './test_results.js';

export interface ValidateRecord extends SuiteCounts {
  image_id: string;
  python_version: string;
  pytest_version: string;
  runs: number;
  exit_codes: number[];
  traceable: boolean;
}

/** Bump when how the suite is run changes in a way the key's other fields do not show. */
const VALIDATE_REVISION = 1;

/** Exit status `timeout(1)` returns when the time limit hit. */
const TIMEOUT_EXIT = 124;

function pluginHash(): string {
  return createHash('sha256').update(readFileSync(join(tracersDir, 'worldline_report.py'))).digest('hex').slice(0, 12);
}

export function testsPartPath(out: string, unitId: string): string {
  return join(out, 'parts', 'tests', `${unitId}.jsonl`);
}

/** The pytest command line every Worldline run uses, plus the unit's own arguments. */
export function pytestCommand(pytestArgs: string[], testTimeoutS: number, hasTimeoutPlugin: boolean): string[] {
  const cmd = ['python3', '-m', 'pytest', '-p', 'worldline_report', '-p', 'no:cacheprovider', '-q', '-rN', '--color=no'];
  // pytest-timeout registers itself through its entry point; naming it with -p again is an error.
  if (hasTimeoutPlugin && testTimeoutS > 0) cmd.push(`--timeout=${testTimeoutS}`);
  return [...cmd, ...pytestArgs];
}

function runScript(runs: number, suiteTimeoutS: number, pytest: string[]): string {
  const cmd = pytest.map(shQuote).join(' ');
  return [
    'cd /repo',
    `i=1; while [ $i -le ${runs} ]; do`,
    `  WORLDLINE_REPORT=/worldline/out/report-$i.jsonl timeout -k 10 ${suiteTimeoutS} ${cmd} > /worldline/out/output-$i.log 2>&1`,
    '  code=$?; echo $code > /worldline/out/exit-$i',
    `  [ $code -eq ${TIMEOUT_EXIT} ] && break`,
    '  i=$((i+1))',
    'done',
    '',
  ].join('\n');
}

function readIfExists(path: string): string | null {
  return existsSync(path) ? readFileSync(path, 'utf8') : null;
}

export function testFile(nodeid: string): string {
  return nodeid.split('::')[0];
}

export const validateStage: Stage<ValidateRecord> = {
  name: 'validate',
  key(ctx) {
    const build = requireRecord<BuildRecord>(ctx, 'build');
    const o = ctx.options;
    return {
      image: build.image_id,
      runs: o.validateRuns,
      testTimeout: o.testTimeoutS,
      suiteTimeout: o.suiteTimeoutS,
      limits: [o.memoryMb, o.cpus, o.pids],
      pytest_args: ctx.unit.env.pytest_args,
      vars: ctx.unit.env.vars,
      plugin: pluginHash(),
      revision: VALIDATE_REVISION,
    };
  },
  async run(ctx: StageContext) {
    const { unit, options } = ctx;
    const clone = requireRecord<CloneRecord>(ctx, 'clone');
    const build = requireRecord<BuildRecord>(ctx, 'build');
    const work = join(options.out, 'work', 'validate', unit.id);
    rmSync(work, { recursive: true, force: true });
    mkdirSync(work, { recursive: true });
    const pytest = pytestCommand(unit.env.pytest_args, options.testTimeoutS, build.pytest_timeout);
    writeFileSync(join(work, 'run.sh'), runScript(options.validateRuns, options.suiteTimeoutS, pytest));
    ctx.log(`validate ${unit.id}: ${options.validateRuns} run(s) in ${build.image}`);
    const started = Date.now();
    const result = await runContainer({
      image: build.image_id,
      cmd: ['sh', '/worldline/out/run.sh'],
      env: {
        ...unit.env.vars,
        PYTHONPATH: clone.src_layout ? '/worldline/lib:/repo/src' : '/worldline/lib',
        PYTHONHASHSEED: '0',
        PYTHONDONTWRITEBYTECODE: '1',
        TZ: 'UTC',
      },
      binds: [`${tracersDir}:/worldline/lib:ro`, `${work}:/worldline/out`],
      limits: { memoryBytes: options.memoryMb * 1024 * 1024, pids: options.pids, cpus: options.cpus },
      // Each run has its own limit inside; this one catches a container that will not die.
      timeoutMs: (options.suiteTimeoutS + 30) * options.validateRuns * 1000,
      labels: { 'worldline.unit': unit.id, 'worldline.stage': 'validate' },
    });
    const seconds = (Date.now() - started) / 1000;

    const runs: SuiteRun[] = [];
    const logParts: string[] = [result.output];
    for (let i = 1; i <= options.validateRuns; i++) {
      const exitText = readIfExists(join(work, `exit-${i}`));
      const report = readIfExists(join(work, `report-${i}.jsonl`));
      logParts.push(`==== run ${i} ====\n${readIfExists(join(work, `output-${i}.log`)) ?? '(no output)'}`);
      if (exitText === null && report === null) break;
      const exitCode = exitText === null ? null : Number(exitText.trim());
      const timedOut = exitCode === null || exitCode === TIMEOUT_EXIT;
      const run = foldReport(report ?? '', timedOut ? null : exitCode, timedOut);
      if (timedOut) run.problem = `${run.problem} (suite timeout: ${options.suiteTimeoutS} s)`;
      else if (exitCode === 137) run.problem = `killed (exit 137: out of memory at ${options.memoryMb} MB?)`;
      runs.push(run);
    }
    mkdirSync(join(options.out, 'logs', 'validate'), { recursive: true });
    writeFileSync(join(options.out, 'logs', 'validate', `${unit.id}.log`), logParts.join('\n'));
    rmSync(work, { recursive: true, force: true });

    if (!runs.length) return failed(`the suite did not start (container exit ${result.exitCode}): ${result.output.trim().slice(-300)}`);
    const problem = runs.map((r, i) => (r.problem ? `run ${i + 1}: ${r.problem}` : null)).find((p) => p);
    const verdicts = mergeRuns(runs);
    const counts = countVerdicts(verdicts);
    const record: ValidateRecord = {
      image_id: build.image_id,
      python_version: build.python_version,
      pytest_version: build.pytest_version,
      runs: runs.length,
      exit_codes: runs.map((r) => r.exitCode ?? TIMEOUT_EXIT),
      ...counts,
      traceable: counts.stable_passed > 0,
    };
    ctx.log(`validate ${unit.id}: ${counts.collected} collected, ${counts.passed} passed, ${counts.failed} failed, ${counts.flaky} flaky (${seconds.toFixed(1)} s)`);
    if (problem) return failed(problem, record);
    writeFileAtomic(testsPartPath(options.out, unit.id), verdicts.map((v) => JSON.stringify(testRow(v, clone, build, ctx))).join('\n') + '\n');
    if (!record.traceable) {
      return failed(`not traceable: no test passed in every run (${counts.collected} collected, ${counts.passed} passed in run 1)`, record);
    }
    return ok(record);
  },
};

function testRow(v: TestVerdict, clone: CloneRecord, build: BuildRecord, ctx: StageContext): TestRecord {
  return {
    unit_id: ctx.unit.id,
    repo: ctx.unit.repo,
    commit: clone.commit,
    node_id: v.nodeid,
    file: testFile(v.nodeid),
    outcome: v.outcome,
    run_outcomes: v.runOutcomes,
    flaky: v.flaky,
    message: v.message,
    duration_seconds: v.duration,
    image_id: build.image_id,
    python_version: build.python_version,
    pytest_version: build.pytest_version,
  };
}
