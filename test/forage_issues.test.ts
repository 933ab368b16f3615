/** forage through the CLI on a repository with real history: issue-fix tasks beside mutations, worked by the oracle. */
import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, inject, it } from 'vitest';
import { readRows } from '../datasets/reader.js';
import type { TraceCut } from '../pipeline/runtime/records.js';
import type { TaskRecord } from '../schemas/tasks.js';
import type { TrajectoryRecord } from '../schemas/trajectories.js';
import { buildCorpusHistory, GOLD_LINES } from './fixtures/corpus_history.js';
import { buildHistoryRepo } from './fixtures/history_repo.js';
import { cli, sql, tempDir } from './helpers.js';

describe('forage with issue-fix mining', () => {
  it('mines the real fix as an issue task with the issue text, next to mutation tasks, and the oracle resolves both kinds', async () => {
    const dir = tempDir('forage-issues');
    buildHistoryRepo(join(dir, 'slugs'));
    const manifest = join(dir, 'manifest.jsonl');
    writeFileSync(manifest, JSON.stringify({ repo: join(dir, 'slugs') }) + '\n');
    const issues = join(dir, 'issues.jsonl');
    writeFileSync(
      issues,
      JSON.stringify({ number: 3, title: 'unique_slug hangs when hello-2 is taken', body: 'unique_slug("Hello", {"hello", "hello-2"}) never returns.' }) + '\n',
    );
    const out = join(dir, 'out');
    const res = await cli([
      'run',
      '--manifest',
      manifest,
      '--out',
      out,
      '--validate-runs',
      '1',
      '--issues',
      issues,
      '--mutations-per-unit',
      '2',
      '--mutant-test-timeout',
      '5',
    ]);
    expect(res.code, res.stderr).toBe(0);
    const tasks: TaskRecord[] = [];
    for await (const r of readRows(join(out, 'dataset'), { config: 'tasks' })) tasks.push(r as unknown as TaskRecord);
    const fix = tasks.find((t) => t.kind === 'issue_fix' && t.issue_number === '3')!;
    expect(fix).toBeDefined();
    expect(fix.FAIL_TO_PASS).toEqual(['tests/test_unique.py::test_several_taken_suffixes']);
    expect(fix.problem_statement).toContain('unique_slug hangs when hello-2 is taken');
    expect(fix.instance_id).toMatch(/^slugs\.[0-9a-f]{8}\.issue__[0-9a-f]{8}$/);
    // The run's mix (CWM's 55% issue fixes by default): of all ways to shrink one kind, the
    // share closest to 55%, then the most tasks; the rest are dropped, never invented.
    const forage = JSON.parse(readFileSync(join(out, 'ledger', 'forage', `${readdirSync(join(out, 'ledger', 'forage'))[0]}`), 'utf8')) as {
      record: { mutation_tasks: number; issue_tasks: number; trace_cuts: TraceCut[] };
    };
    // The fix's test hung before it (the issue): it was measured timing out at the mutant test
    // timeout, and its trace there stops at that budget, not at the one an unmeasured test earns.
    const cut = forage.record.trace_cuts.find((c) => c.task_id === fix.instance_id && c.phase === 'before');
    expect(cut?.node_id).toBe(fix.FAIL_TO_PASS[0]);
    expect(cut?.reason).toMatch(/^(trace cap reached by a test known to time out|over its budget of [1-9]\.\d s)$/);
    const I = forage.record.issue_tasks;
    const M = forage.record.mutation_tasks;
    expect(I).toBeGreaterThan(0);
    const options = [...Array.from({ length: M + 1 }, (_, m) => [I, m]), ...Array.from({ length: I + 1 }, (_, i) => [i, M])].filter(([i, m]) => i + m > 0);
    const [keepI, keepM] = options.sort(
      (x, y) => Math.abs(x[0] / (x[0] + x[1]) - 0.55) - Math.abs(y[0] / (y[0] + y[1]) - 0.55) || y[0] + y[1] - (x[0] + x[1]),
    )[0];
    expect(tasks.filter((t) => t.kind === 'issue_fix').length).toBe(keepI);
    expect(tasks.filter((t) => t.kind === 'mutation_fix').length).toBe(keepM);
    const pct = (x: number) => `${(x * 100).toFixed(1)}%`;
    expect(res.stdout).toContain(`tasks: ${keepI} issue-fix + ${keepM} mutation-fix = ${pct(keepI / (keepI + keepM))} issue-fix (target 55.0%`);
    const published = JSON.parse(readFileSync(join(out, 'dataset', 'manifest.json'), 'utf8')) as {
      provenance: { mix: { target: number; after: { share: number } } };
    };
    expect(published.provenance.mix).toMatchObject({ target: 0.55, after: { share: keepI / (keepI + keepM) } });
    const trajectories: TrajectoryRecord[] = [];
    for await (const r of readRows(join(out, 'dataset'), { config: 'trajectories' })) trajectories.push(r as unknown as TrajectoryRecord);
    expect(trajectories.map((t) => t.task_id).sort()).toEqual(tasks.map((t) => t.instance_id).sort());
    expect(trajectories.every((t) => t.resolved)).toBe(true);
    const exported = await cli(['export', join(out, 'dataset')]);
    expect(exported.code).toBe(0);
    const rows = exported.stdout
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as Record<string, unknown>);
    expect(rows.map((r) => r.instance_id).sort()).toEqual(tasks.map((t) => t.instance_id).sort());
    const exportedFix = rows.find((r) => r.instance_id === fix.instance_id)!;
    expect(exportedFix.FAIL_TO_PASS).toBe(JSON.stringify(fix.FAIL_TO_PASS));
    expect(exportedFix.base_commit).toBe(fix.base_commit);
    // SWE-bench's own fields cannot describe a mutation's state (it needs bug_patch).
    expect((await cli(['export', join(out, 'dataset'), '--swebench-only'])).code).toBe(2);
    const bad = join(dir, 'bad-issues.jsonl');
    writeFileSync(bad, '{"number": 1, "title": "x", "body": "y"}\nnot json\n');
    const usage = await cli(['forage', '--manifest', manifest, '--out', out, '--issues', bad]);
    expect(usage.code).toBe(2);
    expect(usage.stderr).toMatch(/bad-issues\.jsonl:2/);
    // Re-sharding with another share keeps only issue fixes, and their trajectories and traces.
    const mutationTraces = await sql<{ n: bigint }>(
      `select count(*) as n from '${out}/dataset/traces/data/*.parquet' t join '${out}/dataset/tasks/data/*.parquet' k on t.task_id = k.instance_id where k.kind = 'mutation_fix'`,
    );
    expect(Number(mutationTraces[0].n)).toBeGreaterThan(0);
    const onlyIssues = await cli(['shard', '--out', out, '--issue-fix-share', '1']);
    expect(onlyIssues.code, onlyIssues.stderr).toBe(0);
    expect(onlyIssues.stdout).toContain(`tasks: ${I} issue-fix + 0 mutation-fix = 100.0% issue-fix`);
    const ids = async (q: string) => (await sql<{ id: string }>(q)).map((r) => r.id).sort();
    const kept = await ids(`select instance_id as id from '${out}/dataset/tasks/data/*.parquet'`);
    expect(await ids(`select instance_id as id from '${out}/dataset/tasks/data/*.parquet' where kind = 'issue_fix'`)).toEqual(kept);
    expect(kept).toHaveLength(I);
    expect(await ids(`select task_id as id from '${out}/dataset/trajectories/data/*.parquet'`)).toEqual(kept);
    const traced = await ids(`select distinct task_id as id from '${out}/dataset/traces/data/*.parquet' where task_id is not null`);
    expect(traced.filter((id) => !kept.includes(id))).toEqual([]);
    expect((await cli(['shard', '--out', out, '--issue-fix-share', '1.5'])).code).toBe(2);
  }, 900_000);

  it('on real toolz code with every commit shape: keeps the fix and the pull request, drops the feature, two fix-titled features and a change no test fails before, skips the release and the branch merge, and says so in status and audit', async () => {
    const dir = tempDir('forage-corpus-history');
    const shas = buildCorpusHistory(join(inject('corpusRoot'), 'toolz'), join(dir, 'toolz'));
    const manifest = join(dir, 'manifest.jsonl');
    // A test path in pytest_args (a common manifest) must not run the named tests twice.
    writeFileSync(manifest, JSON.stringify({ repo: join(dir, 'toolz'), env: { pytest_args: ['toolz/tests'] } }) + '\n');
    const issues = join(dir, 'issues.jsonl');
    writeFileSync(
      issues,
      JSON.stringify({ number: 7, title: 'count() loses an element of an iterator', body: 'count(iter([1, 2])) is 1.', labels: [{ name: 'bug' }] }) + '\n',
    );
    const out = join(dir, 'out');
    const flags = '--validate-runs 1 --mutation-tries 0 --mutant-test-timeout 10'.split(' ');
    const res = await cli(['run', '--manifest', manifest, '--out', out, '--issues', issues, ...flags]);
    expect(res.code, res.stderr).toBe(0);
    const tasks: TaskRecord[] = [];
    for await (const r of readRows(join(out, 'dataset'), { config: 'tasks' })) tasks.push(r as unknown as TaskRecord);
    expect(tasks.map((t) => t.fix_commit).sort()).toEqual([shas.fix1, shas.prHead].sort());
    const fix = tasks.find((t) => t.fix_commit === shas.fix1)!;
    const pr = tasks.find((t) => t.fix_commit === shas.prHead)!;
    expect(fix).toMatchObject({ repo: 'toolz', kind: 'issue_fix', issue_number: '7', statement_source: 'issue', base_commit: shas.bugs23 });
    expect(fix.FAIL_TO_PASS).toContain('toolz/tests/test_itertoolz.py::test_count_keeps_the_first_element_of_an_iterator');
    expect(fix.fix_signals).toEqual(expect.arrayContaining(['message:fix', 'issue:#7', 'label:bug']));
    expect(fix.patch).not.toContain('CHANGELOG');
    expect(fix.aux_patch).toContain('CHANGELOG.md');
    // The pull request is one task from its merge base to its head; its statement is the failing behaviour.
    expect(pr).toMatchObject({ repo: 'toolz', issue_number: null, statement_source: 'failing_tests', base_commit: shas.feature });
    expect(pr.FAIL_TO_PASS).toEqual(
      expect.arrayContaining([
        'toolz/tests/test_itertoolz.py::test_frequencies_counts_repeats',
        'toolz/tests/test_itertoolz.py::test_interpose_starts_with_an_element',
      ]),
    );
    for (const t of tasks) {
      expect(new Set([...t.FAIL_TO_PASS, ...t.PASS_TO_PASS]).size).toBe(t.FAIL_TO_PASS.length + t.PASS_TO_PASS.length);
      expect(t.fix_confidence).toBeGreaterThan(0.5);
      for (const line of [...GOLD_LINES, 'fix-frequencies-and-interpose', 'Merge pull request', 'Fix count() on iterators'])
        expect(t.problem_statement).not.toContain(line);
      for (const line of t.patch.split('\n').filter((l) => /^[+-]\s*\w/.test(l) && !/^(\+\+\+|---) /.test(l) && l.trim().length > 6)) {
        expect(t.problem_statement).not.toContain(line.slice(1).trim());
      }
    }
    expect(pr.problem_statement).toContain('test_interpose_starts_with_an_element');
    const trajectories: TrajectoryRecord[] = [];
    for await (const r of readRows(join(out, 'dataset'), { config: 'trajectories' })) trajectories.push(r as unknown as TrajectoryRecord);
    expect(trajectories.map((t) => [t.task_id, t.resolved]).sort()).toEqual(tasks.map((t) => [t.instance_id, true]).sort());
    // Task traces cover the FAIL_TO_PASS tests only, not the whole suite the manifest names.
    const traced = await sql<{ node_id: string; task_id: string }>(
      `select distinct node_id, task_id from '${out}/dataset/traces/data/*.parquet' where task_id is not null`,
    );
    for (const t of traced) expect(tasks.find((k) => k.instance_id === t.task_id)!.FAIL_TO_PASS).toContain(t.node_id);
    // Every candidate's fate, in the ledger, status (and its candidates view) and audit.
    const status = JSON.parse((await cli(['status', '--out', out, '--json'])).stdout) as {
      candidates: { tried: number; kept: number; dropped: number; skipped: number; seconds_per_candidate: number };
      candidate_fates: { fix_commit: string; fate: string; reason: string | null; seconds: number }[];
    };
    expect(status.candidates).toMatchObject({ tried: 6, kept: 2, dropped: 4, skipped: 2 });
    expect(status.candidates.seconds_per_candidate).toBeGreaterThan(0);
    const fate = (sha: string) => status.candidate_fates.find((f) => f.fix_commit === sha)!;
    expect(fate(shas.feature)).toMatchObject({ fate: 'dropped', reason: expect.stringMatching(/^a feature, not a fix: .*'penultimate'/) });
    expect(fate(shas.release)).toMatchObject({ fate: 'skipped', reason: expect.stringMatching(/^a release/) });
    expect(fate(shas.branch)).toMatchObject({ fate: 'skipped', reason: expect.stringMatching(/^a merge of one branch into another/) });
    expect(fate(shas.prHead).fate).toBe('kept');
    // Fix-titled features: a new protocol on Compose, a new documented return value of do().
    expect(fate(shas.protocol)).toMatchObject({ fate: 'dropped', reason: expect.stringMatching(/-patch:new_public_name:__repr__/) });
    expect(fate(shas.returns)).toMatchObject({ fate: 'dropped', reason: expect.stringMatching(/^not shown to be a fix: .*-patch:new_return_value:do/) });
    // Every test passed before it: the gold patch and the run after it were not needed.
    expect(fate(shas.passing)).toMatchObject({ fate: 'dropped', reason: 'no test fails before the fix and passes after it (every test passed before it)' });
    expect((await cli(['status', '--out', out])).stdout).toContain('issue candidates: 6 tried, 2 kept, 4 dropped, 2 commits skipped');
    const audit = await cli(['audit', join(out, 'dataset')]);
    expect(audit.stdout).toContain('issue candidates: 6 tried, 2 kept, 4 dropped, 2 commits skipped');
    expect(audit.stdout).toMatch(/dropped\s+1\s+a feature, not a fix/);
  }, 900_000);
});
