import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { cli, tempDir } from './helpers.js';

describe('the worldline command line', () => {
  it('has --help on every command', async () => {
    const help: Record<string, string> = {};
    for (const cmd of [
      'run',
      'clone',
      'build',
      'validate',
      'trace',
      'describe',
      'shard',
      'forage',
      'status',
      'verify',
      'cat',
      'render',
      'trace-script',
      'export',
      'audit',
      'rebalance',
      'enqueue',
      'worker',
      'gc',
      'push',
    ]) {
      const res = await cli([cmd, '--help']);
      expect(res.code).toBe(0);
      expect(res.stdout).toContain(`worldline ${cmd}`);
      help[cmd] = res.stdout;
    }
    // Each command shows its own options only.
    expect(help.run).toContain('--step-in');
    expect(help.run).toContain('--num-shards');
    expect(help.cat).not.toContain('--step-in');
    expect(help.status).not.toContain('--manifest');
    expect(help.run).toContain('--issue-fix-share');
    expect(help.shard).toContain('--issue-fix-share');
    expect(help.audit).toContain('--html');
    expect(help.rebalance).toContain('--issue-fix-share, --target');
    expect(help.describe).toContain('--describe-share');
    expect(help.worker).toContain('--lock-duration');
    expect(help.worker).not.toContain('--step-in');
    expect(help.enqueue).toContain('--attempts');
    expect(help.push).toContain('--registry');
  });

  it('exits 2 on usage errors, with the reason', async () => {
    const unknown = await cli(['frobnicate']);
    expect(unknown.code).toBe(2);
    const noManifest = await cli(['run']);
    expect(noManifest.code).toBe(2);
    expect(noManifest.stderr).toMatch(/Missing required argument: manifest/);
    const dir = tempDir('cli');
    const manifest = join(dir, 'm.jsonl');
    writeFileSync(manifest, '');
    const badStage = await cli(['run', '--manifest', manifest, '--out', join(dir, 'out'), '--stages', 'clone,bake']);
    expect(badStage.code).toBe(2);
    expect(badStage.stderr).toMatch(/unknown stage "bake"/);
    // An empty manifest is an error of its own (newcomer.test.ts); the rank check needs a unit.
    writeFileSync(manifest, `${JSON.stringify({ repo: join(dir, 'a') })}\n`);
    const badRank = await cli(['clone', '--manifest', manifest, '--out', join(dir, 'out'), '--rank', '3', '--world-size', '2']);
    expect(badRank.code).toBe(2);
    expect(badRank.stderr).toMatch(/--rank must be in 0\.\.1/);
    const missing = await cli(['run', '--manifest', join(dir, 'nope.jsonl'), '--out', join(dir, 'out')]);
    expect(missing.code).toBe(2);
    expect(missing.stderr).toMatch(/cannot read manifest .*nope\.jsonl: ENOENT/);
  });

  it('splits units across ranks so that every unit has exactly one rank', async () => {
    const dir = tempDir('ranks');
    const manifest = join(dir, 'm.jsonl');
    writeFileSync(manifest, ['a', 'b', 'c', 'd', 'e'].map((n) => JSON.stringify({ repo: join(dir, n) })).join('\n'));
    const seen: string[] = [];
    for (const rank of [0, 1]) {
      const res = await cli(['clone', '--manifest', manifest, '--out', join(dir, 'out'), '--rank', String(rank), '--world-size', '2', '--json']);
      expect(res.code).toBe(1);
      seen.push(...(JSON.parse(res.stdout) as { units: { unit_id: string; reason: string }[] }).units.map((u) => u.unit_id));
    }
    expect(seen.length).toBe(5);
    expect(new Set(seen).size).toBe(5);
  });
  it('takes its rank from a Slurm array numbered from 1 or stepped, and from a Kubernetes indexed Job', async () => {
    const dir = tempDir('slurm');
    const manifest = join(dir, 'm.jsonl');
    const names = ['a', 'b', 'c', 'd'];
    writeFileSync(manifest, names.map((n) => JSON.stringify({ repo: join(dir, n) })).join('\n'));
    // The missing folders fail clone, which is enough to see which units this rank took.
    const unitsOf = async (env: Record<string, string>) => {
      const res = await cli(['clone', '--manifest', manifest, '--out', join(dir, 'out'), '--json'], env);
      expect(res.code, res.stderr).toBe(1);
      return (JSON.parse(res.stdout) as { units: { repo: string }[] }).units.map((u) => u.repo.split('/').pop());
    };
    // sbatch --array=1-2: tasks 1 and 2 are ranks 0 and 1 (the last one used to fail the rank check).
    expect(await unitsOf({ SLURM_ARRAY_TASK_ID: '2', SLURM_ARRAY_TASK_MIN: '1', SLURM_ARRAY_TASK_COUNT: '2' })).toEqual(['b', 'd']);
    // sbatch --array=0-6:3: tasks 0, 3, 6 are ranks 0, 1, 2.
    expect(await unitsOf({ SLURM_ARRAY_TASK_ID: '6', SLURM_ARRAY_TASK_MIN: '0', SLURM_ARRAY_TASK_STEP: '3', SLURM_ARRAY_TASK_COUNT: '3' })).toEqual(['c']);
    expect(await unitsOf({ JOB_COMPLETION_INDEX: '1', WORLDLINE_WORLD_SIZE: '4' })).toEqual(['b']);
  });
});
