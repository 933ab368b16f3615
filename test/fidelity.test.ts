/**
 * The traced run behaves as plain pytest (examples/fidelity/): suites that notice a runner (their
 * warnings turned into errors, spawn and forkserver children, mocks of what a reporter calls,
 * stubs in sys.modules, required_plugins, --import-mode=importlib, ids that embed the time, a
 * test looking for our modules) go through `worldline run` clone..trace on real Docker, and every
 * test's outcome equals plain `python3 -m pytest`'s in the same image, measured by validate's own
 * plain run. Suites that cannot start fail with pytest's first real error line and the log's path.
 */
import { cpSync, existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { packageRoot } from '../core/package.js';
import type { LedgerEntry } from '../pipeline/runtime/ledger.js';
import type { TraceStageRecord, ValidateRecord } from '../pipeline/runtime/records.js';
import { cli, sql, tempDir } from './helpers.js';

interface RunJson {
  units: { unit_id: string; repo: string; status: string; stage: string | null; reason: string | null }[];
}

/** Tests each suite has, all passing under plain pytest. */
const PASSING: Record<string, number> = {
  'warnings-error': 3,
  'addopts-w-error': 2,
  spawn: 4,
  mocks: 4,
  'sys-modules': 2,
  'required-plugins': 2,
  'importlib-mode': 2,
  invisible: 5,
};

describe('the traced run behaves as plain pytest', () => {
  let out: string;
  let run: RunJson;
  const unit = (name: string) => run.units.find((u) => u.repo === name)!;
  const entry = <R>(stage: string, name: string) =>
    JSON.parse(readFileSync(join(out, 'ledger', stage, `${unit(name).unit_id}.json`), 'utf8')) as LedgerEntry<R>;

  beforeAll(async () => {
    const dir = tempDir('fidelity');
    cpSync(join(packageRoot, 'examples', 'fidelity'), join(dir, 'fidelity'), { recursive: true });
    out = join(dir, 'out');
    const res = await cli([
      'run',
      '--manifest',
      join(dir, 'fidelity', 'manifest.jsonl'),
      '--out',
      out,
      '--stages',
      'clone,build,validate,trace,shard',
      '--test-timeout',
      '60',
      // The examples carry no license file; the dataset keeps them all.
      '--licenses',
      '*',
      '--json',
    ]);
    expect(res.code, res.stderr).toBe(1);
    run = JSON.parse(res.stdout) as RunJson;
  }, 900_000);

  it('validates and traces every suite with the outcomes plain pytest gives, test by test', () => {
    for (const [name, passed] of Object.entries(PASSING)) {
      expect(unit(name), name).toMatchObject({ status: 'ok' });
      const v = entry<ValidateRecord>('validate', name).record!;
      expect(v, name).toMatchObject({ collected: passed, passed, failed: 0, error: 0, flaky: 0, unstable_ids: 0 });
      expect(v.plain, name).toMatchObject({ compared: passed, equal: passed, mismatches: 0, ours_only: [], plain_only: [], problem: null });
      // The tracer changes no outcome either.
      expect(entry<TraceStageRecord>('trace', name).record, name).toMatchObject({ tests_traced: passed, parity_mismatches: 0, tracer_errors: 0 });
    }
  });

  it('counts ids that embed the time as unstable ids, not flaky tests', () => {
    const v = entry<ValidateRecord>('validate', 'unstable-ids').record!;
    expect(v).toMatchObject({ unstable_ids: 2, flaky: 0, stable_passed: 1 });
    expect(v.plain).toMatchObject({ mismatches: 0, problem: null });
  });

  it('fails a suite that cannot collect with the first real error and the log, never as a passing unit', async () => {
    expect(unit('collect-error')).toMatchObject({
      status: 'failed',
      stage: 'validate',
      reason: expect.stringMatching(/collection error.*tests\/test_broken\.py: ModuleNotFoundError: No module named 'module_that_is_not_installed'/),
    });
    expect(entry<ValidateRecord>('validate', 'collect-error').record).toMatchObject({ collected: 0, passed: 0 });
    const conftest = entry<ValidateRecord>('validate', 'conftest-error');
    expect(conftest.reason).toMatch(
      /^run 1: pytest exited 4 before its session started: ModuleNotFoundError: No module named 'hypothesis' \(tests\/conftest\.py\)$/,
    );
    expect(conftest.log).toBe(`logs/validate/${unit('conftest-error').unit_id}.log`);
    expect(readFileSync(join(out, conftest.log!), 'utf8')).toContain("No module named 'hypothesis'");
    const status = await cli(['status', '--out', out]);
    expect(status.stdout).toContain(`log: ${join(out, conftest.log!)}`);
    expect(status.stdout).toMatch(
      /failing because of:\n +1 +a module the environment lacks\n +1 +a suite that does not collect|failing because of:\n +2 +a module the environment lacks/,
    );
    expect(status.stdout).toMatch(/environments built: .*\d+ manifest/);
    expect(status.stdout).toMatch(/conftest-error-\w+ +not compared: plain pytest wrote no JUnit report \(exit 4\)/);
    const repos = await sql<{ repo: string; log: string | null; reason: string; plain_compared: bigint; plain_mismatches: bigint }>(
      `select repo, log, reason, plain_compared, plain_mismatches from '${out}/dataset/repos/data/*.parquet' order by repo`,
    );
    expect(repos.find((r) => r.repo === 'conftest-error')).toMatchObject({ log: conftest.log, reason: conftest.reason });
    expect(repos.find((r) => r.repo === 'mocks')).toMatchObject({ log: null, plain_compared: 4n, plain_mismatches: 0n });
    expect(existsSync(join(out, 'logs', 'parity', `${unit('mocks').unit_id}.log`))).toBe(true);
  });

  it('audit shows the comparison with plain pytest and the unstable ids', async () => {
    const total = Object.values(PASSING).reduce((a, b) => a + b, 0) + 1;
    const audit = await cli(['audit', join(out, 'dataset')]);
    expect(audit.stdout, audit.stderr).toContain(`against plain python3 -m pytest in the same image: 0 of ${total} compared tests differ`);
    expect(audit.stdout).toMatch(/, 2 unstable ids/);
  });
});
