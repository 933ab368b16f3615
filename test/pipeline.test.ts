/**
 * End to end through the CLI, on real Docker: the real corpus (Debian's packages of third-party
 * projects) and the hostile examples, read back from the Parquet shards with DuckDB.
 */
import { createHash } from 'node:crypto';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { beforeAll, describe, expect, inject, it } from 'vitest';
import { packageRoot } from '../core/package.js';
import { type CwmFrame, parseEpisode, renderEpisode } from '../datasets/cwm_format.js';
import { readRows } from '../datasets/reader.js';
import { CORPUS } from './corpus.js';
import { CORPUS_NAMES } from './global-setup.js';
import { cli, sql, tempDir } from './helpers.js';

interface RunJson {
  exit_code: number;
  manifest_errors: number;
  units: { unit_id: string; repo: string; status: string; stage: string | null; reason: string | null; ran: string[] }[];
}

const shardHashes = (out: string) => {
  const manifest = JSON.parse(readFileSync(join(out, 'dataset', 'manifest.json'), 'utf8')) as { shards: { path: string }[] };
  return manifest.shards.map((s) => [
    s.path,
    createHash('sha256')
      .update(readFileSync(join(out, 'dataset', s.path)))
      .digest('hex'),
  ]);
};

describe('the real corpus, end to end', () => {
  let out: string;
  let first: RunJson;
  let manifestFile: string;

  beforeAll(async () => {
    const corpusRoot = inject('corpusRoot');
    const dir = tempDir('corpus-run');
    out = join(dir, 'out');
    manifestFile = join(dir, 'manifest.jsonl');
    const lines = CORPUS_NAMES.map((name) => {
      const p = CORPUS[name];
      const commit = readFileSync(join(corpusRoot, name, '.git', 'refs', 'heads', 'main'), 'utf8').trim();
      return JSON.stringify({ repo: join(corpusRoot, name), commit, env: { apt: p.apt, pytest_args: p.pytestArgs } });
    });
    writeFileSync(manifestFile, lines.join('\n') + '\n');
    const res = await cli(['run', '--manifest', manifestFile, '--out', out, '--stages', 'clone,build,validate,trace,shard', '--json', '--concurrency', '2']);
    if (res.code !== 0) console.error(res.stderr);
    expect(res.code).toBe(0);
    first = JSON.parse(res.stdout) as RunJson;
  }, 900_000);

  it('records the per-test counts shared/corpus/README.md lists for Python 3.11, read back through DuckDB', async () => {
    expect(first.units.map((u) => u.status)).toEqual(CORPUS_NAMES.map(() => 'ok'));
    const repos = await sql<{ repo: string; collected: bigint; passed: bigint; failed: bigint; skipped: bigint; python_version: string; traceable: boolean }>(
      `select regexp_extract(repo, '[^/]+$') as repo, collected, passed, failed, skipped, python_version, traceable from '${out}/dataset/repos/data/*.parquet' order by repo`,
    );
    const expected = [...CORPUS_NAMES].sort().map((name) => {
      const e = CORPUS[name].expected;
      return {
        repo: name,
        collected: BigInt(e.collected),
        passed: BigInt(e.passed),
        failed: BigInt(e.failed),
        skipped: BigInt(e.skipped),
        python_version: expect.stringMatching(/^3\.11\./),
        traceable: true,
      };
    });
    expect(repos).toEqual(expected);
    const perRepo = await sql<{ repo: string; n: bigint; passed: bigint }>(
      `select regexp_extract(repo, '[^/]+$') as repo, count(*) as n, count(*) filter (where outcome = 'passed' and not flaky) as passed from '${out}/dataset/tests/data/*.parquet' group by all order by repo`,
    );
    expect(perRepo).toEqual(
      [...CORPUS_NAMES].sort().map((name) => ({ repo: name, n: BigInt(CORPUS[name].expected.collected), passed: BigInt(CORPUS[name].expected.passed) })),
    );
    const ids = await sql<{ node_id: string; file: string; run_outcomes: string[] }>(
      `select node_id, file, run_outcomes from '${out}/dataset/tests/data/*.parquet' where node_id like 'toolz/tests/test_itertoolz.py::test_groupby%' order by node_id`,
    );
    expect(ids[0]).toEqual({
      node_id: 'toolz/tests/test_itertoolz.py::test_groupby',
      file: 'toolz/tests/test_itertoolz.py',
      run_outcomes: ['passed', 'passed'],
    });
  });

  it('records provenance: resolved commit, license from the Debian copyright file, sizes and counts', async () => {
    const rows = await sql<{ repo: string; commit: string; license: string; license_file: string; py_file_count: bigint; size_bytes: bigint }>(
      `select regexp_extract(repo, '[^/]+$') as repo, commit, license, license_file, py_file_count, size_bytes from '${out}/dataset/repos/data/*.parquet' order by repo`,
    );
    for (const r of rows) {
      expect(r.commit).toMatch(/^[0-9a-f]{40}$/);
      expect(r.license_file).toBe('COPYING');
      expect(r.license).not.toBe('unknown');
      expect(r.py_file_count).toBeGreaterThan(3n);
    }
    expect(Object.fromEntries(rows.map((r) => [r.repo, r.license]))).toMatchObject({ toolz: 'BSD-3-Clause', h11: 'MIT' });
  });

  it('traces every passing test with in-scope line events, without changing any outcome', async () => {
    const status = JSON.parse((await cli(['status', '--out', out, '--json'])).stdout) as { stages: Record<string, { ok: number; failed: number }> };
    expect(status.stages.trace).toEqual({ ok: CORPUS_NAMES.length, failed: 0 });
    const ledger = CORPUS_NAMES.map((name) => {
      const id = first.units.find((u) => u.repo === name)!.unit_id;
      return [name, JSON.parse(readFileSync(join(out, 'ledger', 'trace', `${id}.json`), 'utf8')).record] as const;
    });
    for (const [name, rec] of ledger) {
      expect(rec.parity_mismatches, `${name}: ${rec.mismatched}`).toBe(0);
      expect(rec.tests_traced).toBe(CORPUS[name].expected.collected);
      expect(rec.tests_with_line_events).toBe(CORPUS[name].expected.passed);
      expect(rec.tracer_errors).toBe(0);
    }
    const perRepo = await sql<{ repo: string; tests: bigint; lines: bigint; py: string }>(
      `select regexp_extract(repo, '[^/]+$') as repo, count(distinct node_id) as tests, sum(line_events) as lines, min(python_version) as py from '${out}/dataset/traces/data/*.parquet' group by all order by repo`,
    );
    expect(perRepo.map((r) => r.repo)).toEqual([...CORPUS_NAMES].sort());
    for (const r of perRepo) {
      expect(r.tests).toBe(BigInt(CORPUS[r.repo].expected.passed));
      expect(r.lines).toBeGreaterThan(0n);
      expect(r.py).toMatch(/^3\.11\./);
    }
  });

  it('every episode parses back and re-renders byte for byte, and the TS renderer agrees with the tracer', async () => {
    const bad: string[] = [];
    let n = 0;
    for await (const row of readRows(join(out, 'dataset'), { config: 'traces', columns: ['node_id', 'context', 'text'] })) {
      const text = row.text as string;
      const parsed = parseEpisode(text);
      if (parsed.context !== row.context || renderEpisode(parsed.context, parsed.frames) !== text) bad.push(row.node_id as string);
      n += 1;
    }
    expect(bad).toEqual([]);
    expect(n).toBeGreaterThan(1000);
    // Rendering from the stored frame structs (a second implementation of the format) on a sample.
    for await (const row of readRows(join(out, 'dataset'), { config: 'traces', columns: ['context', 'frames', 'text'], limit: 500 })) {
      expect(renderEpisode(row.context as string, row.frames as CwmFrame[])).toBe(row.text);
    }
  });

  // No stage runs, but shard rewrites every trace row of the corpus (about 50 s on a busy 2-core
  // machine): the hang guard is the file's beforeAll scale, not the 60 s default.
  it('does no work on a second run and leaves byte-identical shards', async () => {
    const before = shardHashes(out);
    const res = await cli(['run', '--manifest', manifestFile, '--out', out, '--stages', 'clone,build,validate,trace,shard', '--json']);
    expect(res.code).toBe(0);
    const again = JSON.parse(res.stdout) as RunJson;
    expect(again.units.map((u) => u.ran)).toEqual(CORPUS_NAMES.map(() => []));
    expect(shardHashes(out)).toEqual(before);
  }, 300_000);
});

describe('hostile and broken input', () => {
  let out: string;
  let manifestFile: string;
  let run: RunJson;
  const unit = (name: string) => run.units.find((u) => u.repo.endsWith(`/${name}`) || u.repo === name)!;

  beforeAll(async () => {
    const dir = tempDir('hostile');
    out = join(dir, 'out');
    manifestFile = join(dir, 'manifest.jsonl');
    const examples = readFileSync(join(packageRoot, 'examples', 'manifest.jsonl'), 'utf8')
      .trim()
      .split('\n')
      .map((l) => {
        const o = JSON.parse(l) as { repo: string };
        return JSON.stringify({ ...o, repo: join(packageRoot, 'examples', o.repo) });
      });
    const lines = [...examples.slice(0, 3), '{"repo": "/nowhere", "colour": "blue"', `{"repo": "file://${dir}/does-not-exist.git"}`, ...examples.slice(3)];
    writeFileSync(manifestFile, lines.join('\n') + '\n');
    const res = await cli([
      'run',
      '--manifest',
      manifestFile,
      '--out',
      out,
      '--stages',
      'clone,build,validate,trace,shard',
      '--json',
      '--suite-timeout',
      '15',
      '--test-timeout',
      '0',
    ]);
    expect(res.code).toBe(1);
    run = JSON.parse(res.stdout) as RunJson;
  }, 900_000);

  it('records every broken unit with a precise reason while the others finish', () => {
    expect(run.manifest_errors).toBe(1);
    expect(unit('does-not-exist.git')).toMatchObject({
      status: 'failed',
      stage: 'clone',
      reason: expect.stringMatching(/^cannot get file:\/\/.*does-not-exist\.git: git clone failed: fatal: .*does-not-exist\.git/),
    });
    expect(unit('broken-install')).toMatchObject({
      status: 'failed',
      stage: 'build',
      reason: expect.stringMatching(/image build failed: .*returned a non-zero code: 3/),
    });
    // Past its 15 s suite timeout with no per-test timeout: the test that finished is kept, and traced alone.
    expect(unit('hangs')).toMatchObject({ status: 'ok' });
    const hangs = JSON.parse(readFileSync(join(out, 'ledger', 'validate', `${unit('hangs').unit_id}.json`), 'utf8'));
    expect(hangs.record).toMatchObject({ runs: 1, collected: 1, passed: 1, unfinished: 1 });
    const traced = JSON.parse(readFileSync(join(out, 'ledger', 'trace', `${unit('hangs').unit_id}.json`), 'utf8'));
    expect(traced).toMatchObject({ status: 'ok', record: { tests_traced: 1 } });
    expect(unit('no-tests')).toMatchObject({ status: 'failed', stage: 'validate', reason: 'run 1: no tests collected (pytest exit 5)' });
    for (const name of ['calc', 'textstats', 'fake-passed', 'flaky']) expect(unit(name)).toMatchObject({ status: 'ok' });
  });

  it('reports the malformed manifest line by number through status', async () => {
    const res = await cli(['status', '--out', out, '--json']);
    const status = JSON.parse(res.stdout) as { manifest_errors: { line: number; message: string }[]; failures: { stage: string }[] };
    expect(status.manifest_errors).toEqual([{ file: manifestFile, line: 4, message: expect.stringMatching(/^not valid JSON/) }]);
    expect(status.failures.map((f) => f.stage).sort()).toEqual(['build', 'clone', 'validate']);
    const text = await cli(['status', '--out', out]);
    expect(text.stdout).toMatch(/manifest\.jsonl:4: not valid JSON/);
  });

  it('records a test that prints fake PASSED lines as failed, and an alternating test as flaky', async () => {
    const rows = await sql<{ node_id: string; outcome: string; flaky: boolean; run_outcomes: string[] }>(
      `select node_id, outcome, flaky, run_outcomes from '${out}/dataset/tests/data/*.parquet' where repo like '%fake-passed' or repo like '%flaky' order by node_id`,
    );
    const fake = rows.filter((r) => r.node_id.includes('fake'));
    expect(fake.length).toBeGreaterThan(0);
    expect(fake.some((r) => r.outcome === 'failed' && !r.flaky)).toBe(true);
    const alternating = rows.find((r) => r.node_id.endsWith('::test_alternates_between_runs'));
    expect(alternating).toMatchObject({ flaky: true, run_outcomes: ['passed', 'failed'] });
  });

  it('puts src/ on the import path, applies env vars, and counts skips and xfails', async () => {
    const rows = await sql<{
      repo: string;
      src_layout: boolean;
      passed: bigint;
      skipped: bigint;
      xfailed: bigint;
      license: string;
      status: string;
      reason: string | null;
    }>(
      `select regexp_extract(repo, '[^/]+$') as repo, src_layout, passed, skipped, xfailed, license, status, reason from '${out}/dataset/repos/data/*.parquet' where repo like '%calc' or repo like '%textstats' order by repo`,
    );
    expect(rows).toEqual([
      { repo: 'calc', src_layout: true, passed: 14n, skipped: 0n, xfailed: 0n, license: 'MIT', status: 'ok', reason: null },
      { repo: 'textstats', src_layout: false, passed: 9n, skipped: 1n, xfailed: 1n, license: 'Apache-2.0', status: 'ok', reason: null },
    ]);
    const failed = await sql<{ n: bigint }>(`select count(*) as n from '${out}/dataset/repos/data/*.parquet' where status = 'failed' and reason is not null`);
    expect(failed[0].n).toBe(3n);
  });

  it('--retry-failed retries only the failed units and loses nothing already written', async () => {
    const before = await sql<{ n: bigint }>(`select count(*) as n from '${out}/dataset/tests/data/*.parquet'`);
    const res = await cli([
      'run',
      '--manifest',
      manifestFile,
      '--out',
      out,
      '--stages',
      'clone,build,validate,trace,shard',
      '--json',
      '--suite-timeout',
      '15',
      '--test-timeout',
      '0',
      '--retry-failed',
    ]);
    expect(res.code).toBe(1);
    const retry = JSON.parse(res.stdout) as RunJson;
    for (const u of retry.units) {
      if (u.status === 'ok') expect(u.ran).toEqual([]);
      else expect(u.ran.length).toBeGreaterThan(0);
    }
    expect(retry.units.filter((u) => u.ran.length).length).toBe(3);
    const after = await sql<{ n: bigint }>(`select count(*) as n from '${out}/dataset/tests/data/*.parquet'`);
    expect(after[0].n).toBe(before[0].n);
  }, 300_000);
});

describe('the real corpus on Python 3.13 (trixie base)', () => {
  it('validates and traces every passing test with outcome parity, and every episode parses back', async () => {
    const dir = tempDir('py313');
    const out = join(dir, 'out');
    const manifestFile = join(dir, 'manifest.jsonl');
    const corpusRoot = inject('corpusRoot');
    writeFileSync(
      manifestFile,
      CORPUS_NAMES.map((name) =>
        JSON.stringify({ repo: join(corpusRoot, name), python: '3.13', env: { apt: CORPUS[name].apt, pytest_args: CORPUS[name].pytestArgs } }),
      ).join('\n') + '\n',
    );
    // Every passing test must keep an episode under the default caps: the unit's budget is shared
    // across its tests, so a large early test cannot starve the later ones (issue 15).
    const res = await cli(['run', '--manifest', manifestFile, '--out', out, '--stages', 'clone,build,validate,trace,shard', '--json', '--validate-runs', '1']);
    expect(res.code, res.stderr).toBe(0);
    const units = (JSON.parse(res.stdout) as RunJson).units;
    const rows = await sql<{ repo: string; python_version: string; pytest_version: string; passed: bigint; image: string }>(
      `select regexp_extract(repo, '[^/]+$') as repo, python_version, pytest_version, passed, image from '${out}/dataset/repos/data/*.parquet' order by repo`,
    );
    for (const row of rows) {
      expect(row.python_version).toMatch(/^3\.13\./);
      expect(row.pytest_version).toMatch(/^8\./);
      expect(row.image).toMatch(new RegExp(`^worldline/env:${row.repo}-[0-9a-f]{12}$`));
    }
    // Counts on 3.13 are not the 3.11 table's (toolz 0.12 has two tests that fail on 3.13); h11 matches.
    expect(rows.find((r) => r.repo === 'h11')!.passed).toBe(BigInt(CORPUS.h11.expected.passed));
    for (const row of rows) expect(row.passed, row.repo).toBeGreaterThan(0n);
    for (const u of units) {
      const rec = JSON.parse(readFileSync(join(out, 'ledger', 'trace', `${u.unit_id}.json`), 'utf8')).record;
      const passed = rows.find((r) => u.repo === r.repo)!.passed;
      expect(rec.parity_mismatches, `${u.repo}: ${rec.mismatched}`).toBe(0);
      expect(BigInt(rec.tests_with_line_events), u.repo).toBeGreaterThanOrEqual(passed);
      expect(rec.python_version).toMatch(/^3\.13\./);
    }
    // Every passing test has an episode (in-scope line events), failing ones may too.
    const untraced = await sql<{ n: bigint }>(
      `select count(*) as n from '${out}/dataset/tests/data/*.parquet' t where t.outcome = 'passed' and not exists (select 1 from '${out}/dataset/traces/data/*.parquet' e where e.unit_id = t.unit_id and e.node_id = t.node_id)`,
    );
    expect(untraced[0].n).toBe(0n);
    const bad: string[] = [];
    for await (const row of readRows(join(out, 'dataset'), { config: 'traces', columns: ['node_id', 'text'] })) {
      const text = row.text as string;
      const parsed = parseEpisode(text);
      if (renderEpisode(parsed.context, parsed.frames) !== text) bad.push(row.node_id as string);
    }
    expect(bad).toEqual([]);
  }, 600_000);
});
