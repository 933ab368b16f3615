/** worldline audit on a generated dataset whose figures are known, and on datasets with nothing in them. */
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import type { AuditReport } from '../datasets/audit.js';
import { formatAudit } from '../datasets/audit_text.js';
import { writeDataset } from '../datasets/dataset_writer.js';
import { reposSchema, tasksSchema, testsSchema, tracesSchema, trajectoriesSchema } from '../schemas/index.js';
import { expectDistribution, gini } from './fixtures/audit_checks.js';
import { type KnownRows, knownRows, writeKnownDataset } from './fixtures/known_dataset.js';
import { cli, tempDir } from './helpers.js';

async function auditJson(dir: string, ...args: string[]): Promise<AuditReport> {
  const res = await cli(['audit', dir, '--json', ...args]);
  expect(res.code, res.stderr).toBe(0);
  return JSON.parse(res.stdout) as AuditReport;
}

describe('worldline audit on a generated dataset with known counts', () => {
  let out: string;
  let rows: KnownRows;
  let r: AuditReport;

  beforeAll(async () => {
    out = tempDir('audit-known');
    rows = await writeKnownDataset(out, { ledger: true });
    r = await auditJson(join(out, 'dataset'), '--top', '2');
  });

  it('counts every config', () => {
    expect(r.configs).toEqual({ repos: 4, tests: 25, traces: 66, tasks: 100, trajectories: 130, trace_descriptions: 0 });
  });

  it('reports the task and trajectory mix overall, per repository, operator and policy, against the target', () => {
    const m = r.mix;
    expect(m.target).toBe(0.55);
    expect(m.run_target).toBe(0.6);
    expect(m.tasks).toMatchObject({ issue_fix: 40, mutation_fix: 60, total: 100, share: 0.4 });
    expect(m.tasks.distance_points).toBeCloseTo(-15, 9);
    expect(m.status).toBe('DRIFT');
    expect(m.verdict).toMatch(/^DRIFT: 40\.0% issue-fix, target 55\.0% \(-15\.0 points, tolerance 0\.5\); the run aimed for 60\.0%/);
    expect(m.trajectories).toMatchObject({ issue_fix: 60, mutation_fix: 70, total: 130 });
    expect(m.trajectories.share).toBeCloseTo(60 / 130, 12);
    expect(m.by_repo).toEqual([
      { repo: 'alpha', issue_fix: 20, mutation_fix: 30, total: 50, share: 0.4, share_of_tasks: 0.5 },
      { repo: 'beta', issue_fix: 15, mutation_fix: 10, total: 25, share: 0.6, share_of_tasks: 0.25 },
      { repo: 'gamma', issue_fix: 5, mutation_fix: 20, total: 25, share: 0.2, share_of_tasks: 0.25 },
    ]);
    expect(m.by_operator).toEqual([
      { operator: 'drop_call', tasks: 26, share_of_mutations: 26 / 60 },
      { operator: 'swap_compare', tasks: 20, share_of_mutations: 20 / 60 },
      { operator: 'off_by_one', tasks: 14, share_of_mutations: 14 / 60 },
    ]);
    expect(m.by_policy).toEqual([
      { policy: 'oracle', model: null, issue_fix: 40, mutation_fix: 60, total: 100, share: 0.4 },
      { policy: 'openai', model: 'qwen-7b', issue_fix: 20, mutation_fix: 10, total: 30, share: 20 / 30 },
    ]);
  });

  it('judges the mix against --target and --tolerance', async () => {
    const ok = await auditJson(join(out, 'dataset'), '--target', '0.41', '--tolerance', '0.02');
    expect(ok.mix.status).toBe('OK');
    expect(ok.mix.verdict).toBe('OK: 40.0% issue-fix, target 41.0% (-1.0 points); the run aimed for 60.0%');
    const bad = await cli(['audit', join(out, 'dataset'), '--target', '1.5']);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toMatch(/--issue-fix-share must be a share between 0 and 1/);
    // A CI gate: drift fails the command only when asked to.
    expect((await cli(['audit', join(out, 'dataset'), '--fail-on-drift'])).code).toBe(1);
    expect((await cli(['audit', join(out, 'dataset')])).code).toBe(0);
    expect((await cli(['audit', join(out, 'dataset'), '--fail-on-drift', '--target', '0.41', '--tolerance', '0.02'])).code).toBe(0);
  });

  it('reports outcomes by kind, operator, repository and policy, exit statuses, turns and tokens', () => {
    const o = r.outcomes;
    expect(o).toMatchObject({ trajectories: 130, resolved: 109 });
    expect(o.rate).toBeCloseTo(109 / 130, 12);
    expect(o.by_kind).toEqual([
      { kind: 'issue_fix', trajectories: 60, resolved: 50, rate: 50 / 60 },
      { kind: 'mutation_fix', trajectories: 70, resolved: 59, rate: 59 / 70 },
    ]);
    expect(o.by_operator).toEqual([
      { operator: 'swap_compare', trajectories: 30, resolved: 23, rate: 23 / 30 },
      { operator: 'drop_call', trajectories: 26, resolved: 22, rate: 22 / 26 },
      { operator: 'off_by_one', trajectories: 14, resolved: 14, rate: 1 },
    ]);
    expect(o.by_repo).toEqual([
      { repo: 'alpha', trajectories: 80, resolved: 63, rate: 63 / 80 },
      { repo: 'beta', trajectories: 25, resolved: 25, rate: 1 },
      { repo: 'gamma', trajectories: 25, resolved: 21, rate: 21 / 25 },
    ]);
    expect(o.by_policy).toEqual([
      { policy: 'oracle', model: null, trajectories: 100, resolved: 96, rate: 0.96 },
      { policy: 'openai', model: 'qwen-7b', trajectories: 30, resolved: 13, rate: 13 / 30 },
    ]);
    expect(o.exit_status).toEqual([
      { exit_status: 'submitted', count: 118 },
      { exit_status: 'max_turns', count: 6 },
      { exit_status: 'timeout', count: 6 },
    ]);
    expectDistribution(
      o.turns,
      rows.trajectories.map((t) => t.turns),
    );
    expectDistribution(
      o.tokens,
      rows.trajectories.map((t) => t.prompt_tokens + t.completion_tokens),
    );
  });

  it('reports the output of suite tests: bytes and episodes per test and per repository, the sampled tests and the caps', () => {
    const o = r.traces.output;
    expect(o).toMatchObject({ bytes: 3000 + 2000 + 1000, sampled_tests: 1 });
    expect(o.by_repo).toEqual([
      { repo: 'alpha', bytes: 3000, episodes: 30, tests: 10, sampled_tests: 0 },
      { repo: 'beta', bytes: 2000, episodes: 20, tests: 5, sampled_tests: 1 },
      { repo: 'gamma', bytes: 1000, episodes: 10, tests: 10, sampled_tests: 0 },
    ]);
    expect(o.sampled).toEqual([{ repo: 'beta', node_id: 'tests/test_beta.py::test_0', sampled: 'test_cap', episodes: 4, built: 9, bytes: 400 }]);
    expect(o.determinism).toEqual([{ repo: 'alpha', unit_id: 'alpha-0000abcd', share_differing: 0.25 }]);
    expect(o.caps).toEqual([{ caps: [1000, 8 << 20, 50_000, 256 << 20], units: rows.repos.length }]);
    const suite = rows.traces.filter((x) => x.task_id === null);
    const perTest = new Map<string, { episodes: number; bytes: number }>();
    for (const x of suite)
      perTest.set(x.unit_id + x.node_id, { episodes: (perTest.get(x.unit_id + x.node_id)?.episodes ?? 0) + 1, bytes: x.test_episode_bytes });
    expectDistribution(
      o.bytes_per_test,
      [...perTest.values()].map((x) => x.bytes),
    );
    expectDistribution(
      o.episodes_per_test,
      [...perTest.values()].map((x) => x.episodes),
    );
    const text = formatAudit(r);
    expect(text).toContain('tests/test_beta.py::test_0');
    expect(text).toMatch(/alpha\s+alpha-0000abcd\s+25(\.0)?%/);
    expect(text).toContain(`caps (test episodes, test bytes, unit episodes, unit bytes; 0: none): 1000, ${8 << 20}, 50000, ${256 << 20}`);
  });

  it('reports traces per repository, truncation, frame counts, Python versions and before/after pairs', () => {
    const t = r.traces;
    expect(t).toMatchObject({ episodes: 66, tests: 25, truncated: 8, truncated_tests: 6 });
    expect(t.truncation_rate).toBeCloseTo(8 / 66, 12);
    expect(t.by_repo).toEqual([
      { repo: 'alpha', episodes: 34, tests: 10, truncated: 3, truncation_rate: 3 / 34, fix_episodes: 4 },
      { repo: 'beta', episodes: 20, tests: 5, truncated: 0, truncation_rate: 0, fix_episodes: 0 },
      { repo: 'gamma', episodes: 12, tests: 10, truncated: 5, truncation_rate: 5 / 12, fix_episodes: 2 },
    ]);
    expect(t.python_versions).toEqual([
      { python_version: '3.11.2', episodes: 54 },
      { python_version: '3.13.5', episodes: 12 },
    ]);
    expect(t.fix_pairs).toEqual({ tasks_traced: 3, pairs: 2, before_only: 1, after_only: 0, before_episodes: 4, after_episodes: 2, tasks_without_traces: 97 });
    expectDistribution(
      t.frame_count,
      rows.traces.map((x) => x.frame_count),
    );
  });

  it('reports tests and flaky tests', () => {
    expect(r.tests).toMatchObject({ tests: 25, flaky: 3 });
    expect(r.tests.flaky_rate).toBeCloseTo(3 / 25, 12);
    expect(r.tests.by_repo).toEqual([
      { repo: 'alpha', tests: 10, flaky: 2, flaky_rate: 0.2 },
      { repo: 'gamma', tests: 10, flaky: 1, flaky_rate: 0.1 },
      { repo: 'beta', tests: 5, flaky: 0, flaky_rate: 0 },
    ]);
    expect(r.tests.outcomes).toEqual([
      { outcome: 'passed', count: 23 },
      { outcome: 'failed', count: 1 },
      { outcome: 'skipped', count: 1 },
    ]);
    expect(r.tests.flaky_tests).toEqual([
      { repo: 'alpha', node_id: 'tests/test_alpha.py::test_8', run_outcomes: ['passed', 'failed'] },
      { repo: 'alpha', node_id: 'tests/test_alpha.py::test_9', run_outcomes: ['passed', 'failed'] },
      { repo: 'gamma', node_id: 'tests/test_gamma.py::test_9', run_outcomes: ['passed', 'failed'] },
    ]);
  });

  it("reports each config's top repositories and Gini over every repository, and the license mix", () => {
    const byConfig = Object.fromEntries(r.dominance.configs.map((c) => [c.config, c]));
    expect(r.dominance.top_k).toBe(2);
    // Rows per repository (alpha, beta, gamma, delta), counted from the generated rows.
    const perRepo = (list: { repo: string }[]) => ['alpha', 'beta', 'gamma', 'delta'].map((repo) => list.filter((x) => x.repo === repo).length);
    for (const [config, list] of Object.entries({
      repos: rows.repos,
      tests: rows.tests,
      traces: rows.traces,
      tasks: rows.tasks,
      trajectories: rows.trajectories,
    })) {
      const counts = perRepo(list);
      const c = byConfig[config];
      expect(c.rows, config).toBe(list.length);
      expect(c.repos, config).toBe(4);
      expect(c.gini!, config).toBeCloseTo(gini(counts), 12);
      const top = ['alpha', 'beta', 'gamma', 'delta']
        .map((repo, i) => ({ repo, rows: counts[i] }))
        .filter((x) => x.rows)
        .sort((a, b) => b.rows - a.rows || a.repo.localeCompare(b.repo))
        .slice(0, 2);
      expect(c.top, config).toEqual(top.map((x) => ({ ...x, share: x.rows / list.length })));
      expect(c.top_k_share!, config).toBeCloseTo((top[0].rows + top[1].rows) / list.length, 12);
    }
    expect(byConfig.repos.gini).toBe(0);
    expect(byConfig.tasks.gini).toBeCloseTo(0.375, 12);
    expect(byConfig.tasks.top_k_share).toBe(0.75);
    expect(r.dominance.licenses).toEqual([
      { license: 'MIT', units: 2, repos: 2 },
      { license: 'Apache-2.0', units: 1, repos: 1 },
      { license: 'unknown', units: 1, repos: 1 },
    ]);
  });

  it('reports run health from the repos config and from the ledger beside the dataset', () => {
    expect(r.units).toEqual({
      units: 4,
      status: [
        { status: 'ok', count: 3 },
        { status: 'failed', count: 1 },
      ],
      failures: [{ stage: 'build', reason: 'pip install exited 1', units: 1 }],
      failure_kinds: [{ kind: 'the image build', count: 1 }],
      env_sources: [{ source: 'manifest', count: 4 }],
    });
    expect(r.run!.out).toBe(out);
    expect(r.run!.stages).toEqual({
      clone: { ok: 4, failed: 0 },
      resolve: { ok: 0, failed: 0 },
      build: { ok: 3, failed: 1 },
      validate: { ok: 3, failed: 0 },
      trace: { ok: 3, failed: 0 },
      describe: { ok: 0, failed: 0 },
      forage: { ok: 2, failed: 1 },
    });
    expect(r.run!.failures).toEqual([
      { stage: 'build', reason: 'pip install exited 1', units: 1, unit_ids: ['delta-0000abcd'] },
      { stage: 'forage', reason: 'forage timed out after 3600 s', units: 1, unit_ids: ['gamma-0000abcd'] },
    ]);
  });

  it('prints the same figures as aligned tables by default', async () => {
    const res = await cli(['audit', join(out, 'dataset'), '--top', '2']);
    expect(res.code, res.stderr).toBe(0);
    expect(res.stdout).toContain(r.mix.verdict);
    expect(res.stdout).toMatch(/^alpha\s+20\s+30\s+50\s+40\.0%\s+50\.0%$/m);
    expect(res.stdout).toMatch(/^swap_compare\s+30\s+23\s+76\.7%$/m);
    expect(res.stdout).toMatch(/^tasks\s+100\s+4\s+75\.0%\s+0\.375\s+alpha 50\.0%, beta 25\.0%$/m);
    expect(res.stdout).toMatch(/^forage\s+1\s+forage timed out after 3600 s$/m);
    expect(res.stdout).toContain('66 episodes over 25 tests; truncated: 8 episodes (12.1%), 6 tests');
  });
});

describe('worldline audit on datasets without tasks', () => {
  it('reports zeros and "no tasks" for empty configs and for configs the dataset lacks', async () => {
    const rows = knownRows();
    const dir = tempDir('audit-empty');
    await writeDataset(join(dir, 'empty', 'dataset'), [
      { schema: reposSchema, rows: rows.repos },
      { schema: testsSchema, rows: [] },
      { schema: tracesSchema, rows: [] },
      { schema: tasksSchema, rows: [] },
      { schema: trajectoriesSchema, rows: [] },
    ]);
    await writeDataset(join(dir, 'repos-only', 'dataset'), [{ schema: reposSchema, rows: rows.repos }]);
    for (const name of ['empty', 'repos-only']) {
      const dataset = join(dir, name, 'dataset');
      const r = await auditJson(dataset);
      expect(r.configs).toEqual({ repos: 4, tests: 0, traces: 0, tasks: 0, trajectories: 0, trace_descriptions: 0 });
      expect(r.mix.status).toBe('NO_TASKS');
      expect(r.descriptions).toEqual({ described: 0, kept: 0, by_describer: [], rejected: [] });
      expect(r.mix.tasks).toEqual({ issue_fix: 0, mutation_fix: 0, total: 0, share: null, distance_points: null });
      expect(r.mix.by_repo).toEqual([]);
      expect(r.outcomes).toMatchObject({ trajectories: 0, resolved: 0, rate: null, by_kind: [], exit_status: [] });
      expect(r.outcomes.turns).toEqual({ count: 0, min: null, median: null, p90: null, max: null, mean: null, histogram: [] });
      expect(r.traces).toMatchObject({
        episodes: 0,
        tests: 0,
        truncation_rate: null,
        fix_pairs: { tasks_traced: 0, pairs: 0, before_only: 0, after_only: 0, before_episodes: 0, after_episodes: 0, tasks_without_traces: 0 },
      });
      expect(r.dominance.configs.find((c) => c.config === 'tasks')).toEqual({ config: 'tasks', rows: 0, repos: 4, top_k_share: null, gini: null, top: [] });
      expect(r.run).toBeNull();
      const text = await cli(['audit', dataset]);
      expect(text.code, text.stderr).toBe(0);
      expect(text.stdout).toContain('NO TASKS: the dataset has no issue-fix or mutation-fix tasks (target 55.0%)');
      const html = join(dir, `${name}.html`);
      expect((await cli(['audit', dataset, '--html', html])).code).toBe(0);
      expect(existsSync(html)).toBe(true);
    }
  });

  it('names a missing dataset as a usage error', async () => {
    const res = await cli(['audit', join(tempDir('audit-none'), 'nope')]);
    expect(res.code).toBe(2);
    expect(res.stderr).toMatch(/nope: no such folder \(name a dataset: OUT\/dataset of a run\)/);
  });
});
