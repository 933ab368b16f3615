/**
 * audit and rebalance on a dataset from a real run (a repository with history, so issue-fix tasks
 * beside mutation-fix ones; the calc example; the flaky example; a repository that does not exist):
 * every figure against an independent DuckDB count over the same shards, or the ledger's files.
 */
import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { packageRoot } from '../core/package.js';
import type { AuditReport } from '../datasets/audit.js';
import type { RebalanceReport } from '../datasets/rebalance.js';
import { type LedgerEntry, STAGES } from '../pipeline/runtime/ledger.js';
import { expectDistribution, gini, shards } from './fixtures/audit_checks.js';
import { buildHistoryRepo } from './fixtures/history_repo.js';
import { cli, sql, tempDir } from './helpers.js';

type Row = Record<string, unknown>;
/** Rows in the order of one field, to compare lists whose ties the audit orders its own way. */
const sortedBy =
  (key: string) =>
  <T extends object>(rows: T[]): T[] =>
    [...rows].sort((a, b) => String((a as Row)[key]).localeCompare(String((b as Row)[key])));
const num = (rows: Row[]) => rows.map((r) => Object.fromEntries(Object.entries(r).map(([k, v]) => [k, typeof v === 'bigint' ? Number(v) : v])));

describe('audit and rebalance on a dataset from a real run', () => {
  let dir: string;
  let out: string;
  let dataset: string;
  let r: AuditReport;
  const T = (config: string) => shards(dataset, config);
  const q = async (query: string) => num(await sql(query));

  beforeAll(async () => {
    dir = tempDir('audit-run');
    buildHistoryRepo(join(dir, 'slugs'));
    const manifest = join(dir, 'manifest.jsonl');
    const repos = [join(dir, 'slugs'), join(packageRoot, 'examples/repos/calc'), join(packageRoot, 'examples/repos/flaky'), join(dir, 'missing')];
    writeFileSync(manifest, repos.map((repo) => JSON.stringify({ repo })).join('\n') + '\n');
    out = join(dir, 'out');
    dataset = join(out, 'dataset');
    const run = await cli(['run', '--manifest', manifest, '--out', out, '--validate-runs', '2', '--mutations-per-unit', '2', '--mutant-test-timeout', '5']);
    // The missing repository fails its clone; the others finish.
    expect(run.code, run.stderr).toBe(1);
    const audit = await cli(['audit', dataset, '--json', '--top', '2']);
    expect(audit.code, audit.stderr).toBe(0);
    r = JSON.parse(audit.stdout) as AuditReport;
  }, 900_000);

  it('counts the configs, the mix overall, per repository, operator and policy', async () => {
    for (const config of Object.keys(r.configs)) expect(r.configs[config], config).toBe((await q(`select count(*) as n from ${T(config)}`))[0].n);
    const kinds = await q(`select count(*) filter (where kind = 'issue_fix') as i, count(*) filter (where kind = 'mutation_fix') as m from ${T('tasks')}`);
    const { i, m } = kinds[0] as { i: number; m: number };
    // Both kinds came out of the run, so the mix figures are about something.
    expect(i).toBeGreaterThan(0);
    expect(m).toBeGreaterThan(0);
    expect(r.mix.tasks).toEqual({ issue_fix: i, mutation_fix: m, total: i + m, share: i / (i + m), distance_points: (i / (i + m) - 0.55) * 100 });
    // Off the target: DRIFT when dropping tasks could come nearer, else CLOSEST (as near as these tasks allow).
    const off = (a: number, b: number) => Math.abs(a / (a + b) - 0.55);
    const nearer = Array.from({ length: i + 1 }, (_, a) => Array.from({ length: m + 1 }, (_, b) => a + b > 0 && off(a, b) < off(i, m) - 1e-12)).flat();
    expect(r.mix.status).toBe(off(i, m) <= 0.005 ? 'OK' : nearer.includes(true) ? 'DRIFT' : 'CLOSEST');
    const repos = await q(
      `select repo, count(*) filter (where kind = 'issue_fix') as issue_fix, count(*) filter (where kind = 'mutation_fix') as mutation_fix, count(*) as total from ${T('tasks')} group by repo`,
    );
    expect(sortedBy('repo')(r.mix.by_repo)).toEqual(
      sortedBy('repo')(repos.map((x) => ({ ...x, share: (x.issue_fix as number) / (x.total as number), share_of_tasks: (x.total as number) / (i + m) }))),
    );
    const ops = await q(`select operator, count(*) as tasks from ${T('tasks')} where kind = 'mutation_fix' group by operator`);
    expect(new Set(r.mix.by_operator.map((o) => JSON.stringify([o.operator, o.tasks, o.share_of_mutations])))).toEqual(
      new Set(ops.map((o) => JSON.stringify([o.operator, o.tasks, (o.tasks as number) / m]))),
    );
    const policies = await q(
      `select policy, model, count(*) filter (where kind = 'issue_fix') as issue_fix, count(*) filter (where kind = 'mutation_fix') as mutation_fix, count(*) as total from ${T('trajectories')} group by all`,
    );
    expect(sortedBy('policy')(r.mix.by_policy)).toEqual(
      sortedBy('policy')(policies.map((p) => ({ ...p, share: (p.issue_fix as number) / (p.total as number) }))),
    );
  });

  it('reports outcomes against independent counts', async () => {
    const [all] = await q(`select count(*) as trajectories, count(*) filter (where resolved) as resolved from ${T('trajectories')}`);
    expect(r.outcomes).toMatchObject({ ...all, rate: (all.resolved as number) / (all.trajectories as number) });
    const rated = (rows: Row[]) => rows.map((x) => ({ ...x, rate: (x.resolved as number) / (x.trajectories as number) }));
    expect(sortedBy('kind')(r.outcomes.by_kind)).toEqual(
      sortedBy('kind')(
        rated(await q(`select kind, count(*) as trajectories, count(*) filter (where resolved) as resolved from ${T('trajectories')} group by kind`)),
      ),
    );
    expect(sortedBy('repo')(r.outcomes.by_repo)).toEqual(
      sortedBy('repo')(
        rated(await q(`select repo, count(*) as trajectories, count(*) filter (where resolved) as resolved from ${T('trajectories')} group by repo`)),
      ),
    );
    const byOperator = await q(
      `select t.operator, count(*) as trajectories, count(*) filter (where j.resolved) as resolved from ${T('trajectories')} j join ${T('tasks')} t on t.instance_id = j.task_id where t.kind = 'mutation_fix' group by t.operator`,
    );
    expect(sortedBy('operator')(r.outcomes.by_operator)).toEqual(sortedBy('operator')(rated(byOperator)));
    expect(sortedBy('exit_status')(r.outcomes.exit_status)).toEqual(
      sortedBy('exit_status')(await q(`select exit_status, count(*) as count from ${T('trajectories')} group by exit_status`)),
    );
    const lengths = await q(`select turns, prompt_tokens + completion_tokens as tokens from ${T('trajectories')}`);
    expectDistribution(
      r.outcomes.turns,
      lengths.map((x) => x.turns as number),
    );
    expectDistribution(
      r.outcomes.tokens,
      lengths.map((x) => x.tokens as number),
    );
  });

  it('reports traces, before/after pairs and flaky tests against independent counts', async () => {
    const episodes = await q(`select repo, unit_id, node_id, truncated, frame_count, python_version, task_id, phase from ${T('traces')}`);
    expect(r.traces.episodes).toBe(episodes.length);
    expect(r.traces.tests).toBe(new Set(episodes.map((e) => `${e.unit_id} ${e.node_id}`)).size);
    expect(r.traces.truncated).toBe(episodes.filter((e) => e.truncated).length);
    for (const row of r.traces.by_repo) {
      const mine = episodes.filter((e) => e.repo === row.repo);
      expect(row).toEqual({
        repo: row.repo,
        episodes: mine.length,
        tests: new Set(mine.map((e) => `${e.unit_id} ${e.node_id}`)).size,
        truncated: mine.filter((e) => e.truncated).length,
        truncation_rate: mine.filter((e) => e.truncated).length / mine.length,
        fix_episodes: mine.filter((e) => e.task_id !== null).length,
      });
    }
    expect(r.traces.by_repo.reduce((s, x) => s + x.episodes, 0)).toBe(episodes.length);
    expectDistribution(
      r.traces.frame_count,
      episodes.map((e) => e.frame_count as number),
    );
    const versions = new Map<string, number>();
    for (const e of episodes) versions.set(e.python_version as string, (versions.get(e.python_version as string) ?? 0) + 1);
    expect(new Map(r.traces.python_versions.map((v) => [v.python_version, v.episodes]))).toEqual(versions);
    const phases = new Map<string, Set<string>>();
    for (const e of episodes) if (e.task_id !== null) phases.set(e.task_id as string, (phases.get(e.task_id as string) ?? new Set()).add(e.phase as string));
    const taskIds = (await q(`select instance_id from ${T('tasks')}`)).map((t) => t.instance_id as string);
    const both = [...phases.values()].filter((p) => p.has('before') && p.has('after')).length;
    expect(both).toBeGreaterThan(0);
    expect(r.traces.fix_pairs).toEqual({
      tasks_traced: phases.size,
      pairs: both,
      before_only: [...phases.values()].filter((p) => p.has('before') && !p.has('after')).length,
      after_only: [...phases.values()].filter((p) => p.has('after') && !p.has('before')).length,
      before_episodes: episodes.filter((e) => e.phase === 'before' && e.task_id !== null).length,
      after_episodes: episodes.filter((e) => e.phase === 'after' && e.task_id !== null).length,
      tasks_without_traces: taskIds.filter((id) => !phases.has(id)).length,
    });
    const tests = await q(`select repo, node_id, flaky, run_outcomes from ${T('tests')}`);
    const flaky = tests.filter((t) => t.flaky);
    // The flaky example alternates between runs.
    expect(flaky.map((t) => t.node_id)).toContain('tests/test_flaky.py::test_alternates_between_runs');
    expect(r.tests).toMatchObject({ tests: tests.length, flaky: flaky.length, flaky_rate: flaky.length / tests.length });
    expect(r.tests.flaky_tests.map((t) => t.node_id).sort()).toEqual(flaky.map((t) => t.node_id).sort());
  });

  it('reports dominance, licenses and run health against the shards and the ledger files', async () => {
    const universe = (await q(`select distinct repo from ${T('repos')}`)).map((x) => x.repo as string);
    for (const c of r.dominance.configs) {
      const counts = await q(`select repo, count(*) as n from ${T(c.config)} group by repo`);
      const all = [...new Set([...universe, ...counts.map((x) => x.repo as string)])].map((repo) => ({
        repo,
        rows: (counts.find((x) => x.repo === repo)?.n as number) ?? 0,
      }));
      const total = all.reduce((s, x) => s + x.rows, 0);
      expect(c.rows, c.config).toBe(total);
      expect(c.repos, c.config).toBe(all.length);
      const top = all
        .filter((x) => x.rows)
        .sort((a, b) => b.rows - a.rows || a.repo.localeCompare(b.repo))
        .slice(0, 2);
      expect(c.top, c.config).toEqual(top.map((x) => ({ ...x, share: x.rows / total })));
      expect(c.gini!, c.config).toBeCloseTo(gini(all.map((x) => x.rows)), 12);
    }
    expect(new Set(r.dominance.licenses.map((l) => JSON.stringify(l)))).toEqual(
      new Set((await q(`select license, count(*) as units, count(distinct repo) as repos from ${T('repos')} group by license`)).map((l) => JSON.stringify(l))),
    );
    expect(r.units.failures).toEqual([{ stage: 'clone', reason: expect.stringMatching(/missing does not exist/), units: 1 }]);
    expect(r.run!.out).toBe(out);
    for (const stage of STAGES) {
      const entries = readdirSync(join(out, 'ledger', stage))
        .filter((f) => f.endsWith('.json'))
        .map((f) => JSON.parse(readFileSync(join(out, 'ledger', stage, f), 'utf8')) as LedgerEntry);
      expect(r.run!.stages[stage], stage).toEqual({
        ok: entries.filter((e) => e.status === 'ok').length,
        failed: entries.filter((e) => e.status === 'failed').length,
      });
    }
    expect(r.run!.failures).toEqual([{ stage: 'clone', reason: r.units.failures[0].reason, units: 1, unit_ids: [expect.stringMatching(/^missing-/)] }]);
    const html = join(dir, 'report.html');
    expect((await cli(['audit', dataset, '--top', '2', '--html', html])).code).toBe(0);
    const embedded = /<script type="application\/json" id="audit-data">(.*?)<\/script>/s.exec(readFileSync(html, 'utf8'))![1];
    expect(JSON.parse(embedded)).toEqual(r);
  });

  it('rebalances to issue fixes only: every mutation task goes with its trajectories and traces, the rest stays', async () => {
    const reb = join(dir, 'issue-only');
    const res = await cli(['rebalance', dataset, '--target', '1', '--out', reb, '--json']);
    expect(res.code, res.stderr).toBe(0);
    const report = JSON.parse(res.stdout) as RebalanceReport;
    const mutations = `(select instance_id from ${T('tasks')} where kind = 'mutation_fix')`;
    expect(report.mix.dropped).toBe(r.mix.tasks.mutation_fix);
    expect((await q(`select count(*) as n from ${shards(reb, 'tasks')} where kind = 'mutation_fix'`))[0].n).toBe(0);
    expect((await q(`select count(*) as n from ${shards(reb, 'tasks')}`))[0].n).toBe(r.mix.tasks.issue_fix);
    for (const [config, column] of [
      ['trajectories', 'task_id'],
      ['traces', 'task_id'],
    ]) {
      expect((await q(`select count(*) as n from ${shards(reb, config)} where ${column} in ${mutations}`))[0].n, config).toBe(0);
      const expected = (await q(`select count(*) as n from ${T(config)} where ${column} is null or ${column} not in ${mutations}`))[0].n;
      expect((await q(`select count(*) as n from ${shards(reb, config)}`))[0].n, config).toBe(expected);
    }
    for (const config of ['repos', 'tests']) {
      expect((await q(`select count(*) as n from (select * from ${T(config)} except all select * from ${shards(reb, config)})`))[0].n, config).toBe(0);
      expect(report.configs[config].dropped).toBe(0);
    }
    expect(report.verify.ok).toBe(true);
    expect((await cli(['verify', reb])).code).toBe(0);
  });
});
