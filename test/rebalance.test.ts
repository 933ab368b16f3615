/** worldline rebalance on the generated dataset: the target met with the fewest drops, everything else untouched. */
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { readManifestJson } from '../datasets/reader.js';
import type { RebalanceReport } from '../datasets/rebalance.js';
import { shards } from './fixtures/audit_checks.js';
import { writeKnownDataset } from './fixtures/known_dataset.js';
import { cli, sql, tempDir } from './helpers.js';

const n = async (q: string) => Number((await sql<{ n: bigint }>(q))[0].n);

/** Rows in `a` and not in `b`, duplicates counted, plus the other way round. */
const difference = async (a: string, b: string, where = 'true') =>
  (await n(`select count(*) as n from (select * from ${a} where ${where} except all select * from ${b} where ${where})`)) +
  (await n(`select count(*) as n from (select * from ${b} where ${where} except all select * from ${a} where ${where})`));

/** The fewest tasks any (issue, mutation) subset must drop to land within `tol` of `target`. */
function fewestDrops(issue: number, mutation: number, target: number, tol = 0.005): number {
  let best = Infinity;
  for (let i = 0; i <= issue; i++) {
    for (let m = 0; m <= mutation; m++) if (i + m && Math.abs(i / (i + m) - target) <= tol + 1e-12) best = Math.min(best, issue - i + mutation - m);
  }
  return best;
}

describe('worldline rebalance', () => {
  let src: string;
  let dir: string;

  beforeAll(async () => {
    dir = tempDir('rebalance');
    await writeKnownDataset(join(dir, 'run'));
    src = join(dir, 'run', 'dataset');
  });

  for (const target of [0.55, 0.3]) {
    it(`meets a target of ${target} with the fewest drops, dropped tasks' trajectories and traces go, the rest is copied as it was`, async () => {
      const out = join(dir, `to-${target}`);
      const res = await cli(['rebalance', src, '--target', String(target), '--out', out, '--json']);
      expect(res.code, res.stderr).toBe(0);
      const r = JSON.parse(res.stdout) as RebalanceReport;

      // The share, counted over the new shards.
      const issue = await n(`select count(*) as n from ${shards(out, 'tasks')} where kind = 'issue_fix'`);
      const total = await n(`select count(*) as n from ${shards(out, 'tasks')}`);
      expect(Math.abs(issue / total - target)).toBeLessThanOrEqual(0.005);
      expect(r.mix.after.share).toBe(issue / total);
      // The fewest drops, and only of the over-represented kind.
      expect(100 - total).toBe(fewestDrops(40, 60, target));
      expect(r.mix.dropped).toBe(100 - total);
      expect(target > 0.4 ? r.mix.dropped_by_kind.issue_fix : r.mix.dropped_by_kind.mutation_fix).toBe(0);

      // Each repository keeps about its share of the tasks.
      const perRepo = async (dataset: string) =>
        Object.fromEntries(
          (await sql<{ repo: string; n: bigint }>(`select repo, count(*) as n from ${shards(dataset, 'tasks')} group by repo`)).map((x) => [
            x.repo,
            Number(x.n),
          ]),
        );
      const before = await perRepo(src);
      const after = await perRepo(out);
      for (const repo of Object.keys(before)) expect(Math.abs(after[repo] / total - before[repo] / 100), repo).toBeLessThan(0.01);
      expect(r.repos.map((x) => [x.repo, x.tasks_after, x.dropped_issue_fix + x.dropped_mutation_fix])).toEqual(
        Object.keys(before)
          .sort()
          .map((repo) => [repo, after[repo], before[repo] - after[repo]]),
      );

      // Dropped tasks leave no trajectory and no before/after trace behind; kept tasks keep all of theirs.
      const dropped = `(select instance_id from ${shards(src, 'tasks')} except select instance_id from ${shards(out, 'tasks')})`;
      expect(await n(`select count(*) as n from ${dropped}`)).toBe(r.mix.dropped);
      expect(await n(`select count(*) as n from ${shards(out, 'trajectories')} where task_id in ${dropped}`)).toBe(0);
      expect(await n(`select count(*) as n from ${shards(out, 'traces')} where task_id in ${dropped}`)).toBe(0);
      const kept = `(select instance_id from ${shards(out, 'tasks')})`;
      expect(await difference(shards(src, 'trajectories'), shards(out, 'trajectories'), `task_id in ${kept}`)).toBe(0);
      expect(await difference(shards(src, 'traces'), shards(out, 'traces'), `task_id is null or task_id in ${kept}`)).toBe(0);
      expect(await difference(shards(src, 'tasks'), shards(out, 'tasks'), `instance_id in ${kept}`)).toBe(0);
      const droppedTrajectories = await n(`select count(*) as n from ${shards(src, 'trajectories')} where task_id in ${dropped}`);
      expect(droppedTrajectories).toBeGreaterThanOrEqual(r.mix.dropped);
      const droppedTraces = await n(`select count(*) as n from ${shards(src, 'traces')} where task_id in ${dropped}`);
      expect(r.configs.trajectories).toEqual({ before: 130, after: 130 - droppedTrajectories, dropped: droppedTrajectories });
      expect(r.configs.traces).toEqual({ before: 66, after: 66 - droppedTraces, dropped: droppedTraces });

      // Other configs: the same rows.
      for (const config of ['repos', 'tests']) {
        expect(r.configs[config]).toEqual({
          before: readManifestJson(src).configs[config].rows,
          after: readManifestJson(src).configs[config].rows,
          dropped: 0,
        });
        expect(await difference(shards(src, config), shards(out, config)), config).toBe(0);
      }
      expect(r.verify.ok).toBe(true);
      const verify = await cli(['verify', out]);
      expect(verify.code, verify.stdout).toBe(0);
      expect(readManifestJson(out).provenance.mix).toMatchObject({ target, reached: true, dropped: r.mix.dropped });
      // The audit of the result agrees.
      const audit = JSON.parse((await cli(['audit', out, '--json', '--target', String(target)])).stdout) as { mix: { status: string } };
      expect(audit.mix.status).toBe('OK');
    }, 120_000);
  }

  it('drops the same tasks for the same seed, and prints what it dropped per repository', async () => {
    const a = join(dir, 'seed-a');
    const b = join(dir, 'seed-b');
    const text = await cli(['rebalance', src, '--out', a]);
    expect(text.code, text.stderr).toBe(0);
    expect(text.stdout).toContain('tasks: 40 issue-fix + 60 mutation-fix (40.0%) -> 40 + 33 (54.8%; target 55.0%); dropped 27');
    expect(text.stdout).toMatch(/^alpha\s+0\s+13\s+50\s+37\s+50\.0%\s+50\.7%$/m);
    expect(text.stdout).toMatch(/^verify: OK: 5 shard\(s\)/m);
    expect((await cli(['rebalance', src, '--out', b])).code).toBe(0);
    expect(await difference(`(select instance_id from ${shards(a, 'tasks')})`, `(select instance_id from ${shards(b, 'tasks')})`)).toBe(0);
  }, 120_000);

  it('refuses an unreachable target, a bad target and its own dataset as --out with exit 2, writing nothing', async () => {
    const noIssues = join(dir, 'no-issues');
    await writeKnownDataset(noIssues, { issueFix: false });
    const out = join(dir, 'never');
    const unreachable = await cli(['rebalance', join(noIssues, 'dataset'), '--target', '0.55', '--out', out]);
    expect(unreachable.code).toBe(2);
    expect(unreachable.stderr).toContain('cannot reach an issue-fix share of 55.0%: the dataset has no issue-fix tasks (60 mutation-fix)');
    expect(existsSync(out)).toBe(false);
    expect(existsSync(`${out}-versions`)).toBe(false);
    const bad = await cli(['rebalance', src, '--target', '55', '--out', out]);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toMatch(/--issue-fix-share must be a share between 0 and 1 \(got 55\)/);
    const self = await cli(['rebalance', src, '--out', src]);
    expect(self.code).toBe(2);
    expect(self.stderr).toMatch(/is the dataset being rebalanced/);
    expect(existsSync(out)).toBe(false);
  }, 120_000);
});
