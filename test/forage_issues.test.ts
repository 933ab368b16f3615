/** forage through the CLI on a repository with real history: issue-fix tasks beside mutations, worked by the oracle. */
import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { readRows } from '../datasets/reader.js';
import type { TaskRecord } from '../schemas/tasks.js';
import type { TrajectoryRecord } from '../schemas/trajectories.js';
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
      record: { mutation_tasks: number; issue_tasks: number };
    };
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
  }, 600_000);
});
