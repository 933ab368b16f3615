/**
 * What a person new to Worldline meets first, run through the built CLI: units the content policy
 * leaves out are named, errors say what to do (a folder that is not there, a damaged shard, a bad
 * number, Docker or Redis down: each its own exit code), help is grouped, and the mix audit of a
 * small dataset neither cries DRIFT nor gives advice that fails.
 */
import { existsSync, readdirSync, truncateSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { writeDataset } from '../datasets/dataset_writer.js';
import { readManifestJson } from '../datasets/reader.js';
import { reposSchema, type TaskRecord, tasksSchema, trajectoriesSchema } from '../schemas/index.js';
import { knownRows, writeKnownDataset } from './fixtures/known_dataset.js';
import { cli, gitRepo, tempDir } from './helpers.js';

/** A manifest of one local repository with a test and no license file (most internal repositories). */
function unlicensedManifest(dir: string): string {
  gitRepo(join(dir, 'inhouse'), {
    'inhouse.py': 'def one():\n    return 1\n',
    'tests/test_one.py': 'from inhouse import one\n\ndef test_one():\n    assert one() == 1\n',
  });
  const manifest = join(dir, 'm.jsonl');
  writeFileSync(manifest, `${JSON.stringify({ repo: 'inhouse' })}\n`);
  return manifest;
}

describe('nothing dropped in silence', () => {
  it('names a unit its license keeps out of the dataset in run, shard and status, and says on stderr which option keeps it', async () => {
    const dir = tempDir('excluded');
    const manifest = unlicensedManifest(dir);
    const out = join(dir, 'out');
    const run = await cli(['run', '--manifest', manifest, '--out', out, '--stages', 'clone,shard']);
    expect(run.code, run.stderr).toBe(0);
    expect(run.stdout).toMatch(/^inhouse-\S+\s+excluded\s.*license unknown is not in --licenses/m);
    expect(run.stdout).toContain('1 of 1 units ok; 1 of them excluded from the dataset by the content policy');
    expect(run.stderr).toMatch(
      /warning: the dataset is empty: the content policy left out 1 unit\(s\) \(license unknown\); --licenses MIT,\S*,unknown would keep them/,
    );
    const json = await cli(['run', '--manifest', manifest, '--out', out, '--stages', 'clone,shard', '--json']);
    const units = (JSON.parse(json.stdout) as { units: { excluded: string | null }[] }).units;
    expect(units[0].excluded).toMatch(/^license unknown is not in --licenses/);

    const status = await cli(['status', '--out', out]);
    expect(status.code, status.stderr).toBe(0);
    expect(status.stdout).toMatch(/excluded from the dataset \(content policy\):\n {2}inhouse-\S+ {2}license unknown is not in --licenses/);

    // The option the warning named keeps the unit, and then nothing is excluded or warned about.
    const kept = await cli(['shard', '--out', out, '--licenses', 'MIT,unknown']);
    expect(kept.code, kept.stderr).toBe(0);
    expect(kept.stderr).not.toContain('warning: the dataset is empty');
    expect(kept.stdout).not.toContain('excluded unit');
    expect((await cli(['status', '--out', out])).stdout).not.toContain('excluded from the dataset');
  });
});

describe('errors that say what to do', () => {
  let dataset: string;

  beforeAll(async () => {
    const out = tempDir('errors');
    await writeKnownDataset(out);
    dataset = join(out, 'dataset');
  });

  it('treats an output folder or dataset that is not there as a usage error (exit 2), creating nothing', async () => {
    const dir = tempDir('typo');
    const typo = join(dir, 'oout');
    for (const args of [
      ['status', '--out', typo],
      ['shard', '--out', typo],
      ['gc', '--out', typo],
      ['push', '--dataset', typo, '--registry', '127.0.0.1:5000'],
      ['audit', typo],
      ['cat', typo, '--config', 'repos'],
      ['verify', typo],
    ]) {
      const res = await cli(args);
      expect(res.code, args.join(' ')).toBe(2);
      expect(res.stderr, args.join(' ')).toMatch(/oout: no such folder/);
      expect(existsSync(typo), args.join(' ')).toBe(false);
    }
    // A folder that holds no dataset, or no run, says what it is missing.
    expect((await cli(['cat', dir, '--config', 'repos'])).stderr).toMatch(/not a dataset \(no manifest\.json\)/);
    const noRun = await cli(['shard', '--out', dir]);
    expect(noRun.code).toBe(2);
    expect(noRun.stderr).toMatch(/holds no run \(no ledger\/\): nothing to shard/);
    expect(readdirSync(dir)).toEqual([]);
  });

  it('refuses an empty manifest (exit 2) and says what a line looks like', async () => {
    const dir = tempDir('empty-manifest');
    const manifest = join(dir, 'm.jsonl');
    writeFileSync(manifest, '\n# nothing yet\n');
    const res = await cli(['run', '--manifest', manifest, '--out', join(dir, 'out')]);
    expect(res.code).toBe(2);
    expect(res.stderr).toContain('names no repository: write one JSON object a line, e.g. {"repo": ');
  });

  it('checks every number: a word where a number goes, a fraction where a count goes, a bad size, are usage errors', async () => {
    const bad = [
      ['cat', dataset, '--config', 'repos', '--limit', 'abc'],
      ['cat', dataset, '--config', 'repos', '--limit', '1.5'],
      ['cat', dataset, '--config', 'repos', '--rank', '2', '--world-size', '2'],
      ['render', dataset, '--limit', 'x'],
      ['audit', dataset, '--top', 'many'],
      ['run', '--manifest', 'm.jsonl', '--concurrency', 'two'],
      ['run', '--manifest', 'm.jsonl', '--memory', '4 gigs'],
      ['run', '--manifest', 'm.jsonl', '--trace-seed', 'x'],
      ['shard', '--out', join(dataset, '..'), '--shard-bytes', 'big'],
    ];
    for (const args of bad) {
      const res = await cli(args);
      expect(res.code, args.join(' ')).toBe(2);
      expect(res.stderr, args.join(' ')).toMatch(/worldline: --[a-z-]+ (takes|must)/);
    }
    const noConfig = await cli(['cat', dataset, '--config', 'test']);
    expect(noConfig.code).toBe(2);
    expect(noConfig.stderr).toMatch(/--config test: \S+ has repos, tests, /);
    const limited = await cli(['cat', dataset, '--config', 'repos', '--limit', '2']);
    expect(limited.code, limited.stderr).toBe(0);
    expect(limited.stdout.trim().split('\n')).toHaveLength(2);
  });

  it('takes sizes as 4G, 500M or 4Gi, and the old bare numbers in their old units', async () => {
    const out = tempDir('sizes');
    await writeKnownDataset(out, { ledger: true });
    const tiny = await cli(['shard', '--out', out, '--shard-bytes', '1K', '--json']);
    expect(tiny.code, tiny.stderr).toBe(0);
    expect((JSON.parse(tiny.stdout) as { layout: { shard_bytes: number } }).layout.shard_bytes).toBe(1000);
    const bare = await cli(['shard', '--out', out, '--shard-bytes', '2000000', '--max-row-bytes', '1Mi', '--json']);
    expect(bare.code, bare.stderr).toBe(0);
    expect((JSON.parse(bare.stdout) as { layout: { shard_bytes: number; max_row_bytes: number } }).layout).toMatchObject({
      shard_bytes: 2_000_000,
      max_row_bytes: 2 ** 20,
    });
  });

  it('names a truncated shard and says to run worldline verify, in cat, audit, render and export', async () => {
    const out = tempDir('truncated');
    await writeKnownDataset(out);
    const ds = join(out, 'dataset');
    const manifest = readManifestJson(ds);
    for (const config of ['tasks', 'traces']) {
      const shard = manifest.shards.find((s) => s.config === config)!;
      truncateSync(join(ds, shard.path), Math.floor(shard.bytes / 2));
    }
    const tasksShard = join(ds, manifest.shards.find((s) => s.config === 'tasks')!.path);
    const tracesShard = join(ds, manifest.shards.find((s) => s.config === 'traces')!.path);
    for (const [args, file] of [
      [['cat', ds, '--config', 'tasks'], tasksShard],
      [['audit', ds], null],
      [['render', ds], tracesShard],
      [['export', ds], tasksShard],
    ] as const) {
      const res = await cli([...args]);
      expect(res.code, args.join(' ')).toBe(1);
      expect(res.stderr, args.join(' ')).toContain(`run worldline verify ${ds}`);
      expect(res.stderr, args.join(' ')).not.toContain('magic bytes');
      if (file) expect(res.stderr, args.join(' ')).toContain(`${file}: `);
      else expect(res.stderr).toMatch(/\/dataset\/(tasks|traces)\/data\/train-\S+\.parquet: \d+ bytes, manifest\.json says \d+ \(truncated or changed\)/);
    }
    // verify itself names both.
    const verify = await cli(['verify', ds]);
    expect(verify.code).toBe(1);
    expect(verify.stdout).toMatch(/FAIL tasks\/data\/\S+: truncated/);
  });

  it('exits 3, not 1, when the Docker Engine does not answer, naming where it looked', async () => {
    const dir = tempDir('no-docker');
    const manifest = unlicensedManifest(dir);
    const res = await cli(['validate', '--manifest', manifest, '--out', join(dir, 'out')], { DOCKER_SOCKET: join(dir, 'no-such.sock') });
    expect(res.code).toBe(3);
    expect(res.stderr).toContain(`Docker Engine does not answer on ${join(dir, 'no-such.sock')}`);
  });

  it('exits 3 when Redis does not answer, instead of waiting for it', async () => {
    const dir = tempDir('no-redis');
    const manifest = unlicensedManifest(dir);
    const res = await cli(['enqueue', '--manifest', manifest, '--out', join(dir, 'out'), '--redis', 'redis://127.0.0.1:9']);
    expect(res.code).toBe(3);
    expect(res.stderr).toMatch(/Redis does not answer at 127\.0\.0\.1:9 \(ECONNREFUSED\)/);
    const status = await cli(['status', '--out', dir, '--redis', 'redis://127.0.0.1:9']);
    expect(status.code).toBe(3);
  });
});

describe('help a person reads', () => {
  it('puts the required manifest first, groups the options by stage, and has a describe command like the other stages', async () => {
    const run = (await cli(['run', '--help'])).stdout;
    const groups = [...run.matchAll(/^(\S.*):$/gm)].map((m) => m[1]);
    expect(groups[0]).toBe('Required');
    expect(run.slice(run.indexOf('Required:')).split('\n')[1]).toMatch(/^ {2}--manifest /);
    for (const g of [
      'Build and sandbox (every container)',
      'Validate',
      'Trace',
      'Describe',
      'Forage (tasks and rollouts)',
      'Shard (the dataset: task mix, content policy, layout)',
    ])
      expect(groups).toContain(g);
    // Each option sits in the group of the stage it affects.
    const groupOf = (flag: string) => groups.filter((g) => run.indexOf(`${g}:`) < run.indexOf(`  --${flag} `)).pop();
    expect(groupOf('step-in')).toBe('Trace');
    expect(groupOf('mutations-per-unit')).toBe('Forage (tasks and rollouts)');
    expect(groupOf('licenses')).toBe('Shard (the dataset: task mix, content policy, layout)');
    expect(groupOf('memory')).toBe('Build and sandbox (every container)');
    const describeHelp = await cli(['describe', '--help']);
    expect(describeHelp.code).toBe(0);
    expect(describeHelp.stdout).toContain('--describe-share');
    // One name per setting: audit and rebalance take --issue-fix-share as run does (--target still works).
    for (const c of ['audit', 'rebalance']) expect((await cli([c, '--help'])).stdout).toMatch(/--issue-fix-share, --target/);
  });

  it('separates rendered episodes, each under a line naming its test and function', async () => {
    const out = tempDir('render');
    await writeKnownDataset(out);
    const res = await cli(['render', join(out, 'dataset'), '--format', 'text', '--limit', '3']);
    const heads = res.stdout.split('\n').filter((l) => l.startsWith('==> '));
    expect(heads).toHaveLength(3);
    for (const h of heads) expect(h).toMatch(/^==> tests\/\S+::\S+ \S+ <==$/);
    // Each episode ends before the next head, with a blank line between them.
    expect(res.stdout.split(/\n\n==> /)).toHaveLength(3);
  });
});

/** A dataset of the known rows' repos and just these tasks, with their trajectories. */
async function tasksDataset(prefix: string, tasks: TaskRecord[]): Promise<string> {
  const rows = knownRows();
  const ids = new Set(tasks.map((t) => t.instance_id));
  const dir = join(tempDir(prefix), 'dataset');
  await writeDataset(dir, [
    { schema: reposSchema, rows: rows.repos },
    { schema: tasksSchema, rows: tasks },
    { schema: trajectoriesSchema, rows: rows.trajectories.filter((t) => ids.has(t.task_id)) },
  ]);
  return dir;
}

/** Runs the rebalance a DRIFT verdict names; the audit of what it wrote. */
async function followAdvice(audit: string): Promise<string> {
  const advice = /`worldline (rebalance [^`]+ --out (\S+)[^`]*)`/.exec(audit);
  expect(advice, audit).not.toBeNull();
  const rebalance = await cli(advice![1].split(' '));
  expect(rebalance.code, rebalance.stderr).toBe(0);
  return (await cli(['audit', advice![2]])).stdout;
}

describe('the task mix audit of a small dataset', () => {
  it('says CLOSEST, not DRIFT, when no rebalance can come nearer, and a DRIFT names a rebalance that works', async () => {
    const { tasks } = knownRows();
    const issue = tasks.find((t) => t.kind === 'issue_fix')!;
    const mutations = tasks.filter((t) => t.kind === 'mutation_fix');
    const audit = await cli(['audit', await tasksDataset('mix-small', [issue, mutations[0]])]);
    expect(audit.code, audit.stderr).toBe(0);
    expect(audit.stdout).toContain(
      'CLOSEST: 50.0% issue-fix, target 55.0% (-5.0 points, tolerance 0.5); as near as 1 issue-fix and 1 mutation-fix tasks allow',
    );
    expect(audit.stdout).not.toMatch(/DRIFT|worldline rebalance/);

    // 1 issue-fix and 4 mutation-fix tasks: 55% is out of reach, but dropping mutations comes nearer;
    // the DRIFT names a rebalance with a tolerance it can meet, and that command works.
    const far = await cli(['audit', await tasksDataset('mix-unreachable', [issue, ...mutations.slice(0, 4)])]);
    expect(far.stdout).toMatch(/^DRIFT: 20\.0% issue-fix.*--tolerance 0\.05`/m);
    expect(await followAdvice(far.stdout)).toMatch(/^CLOSEST: 50\.0% issue-fix/m);

    // 40 issue-fix and 60 mutation-fix tasks: DRIFT, and the command it names meets the target.
    const out = tempDir('mix-drift');
    await writeKnownDataset(out);
    const drift = await cli(['audit', join(out, 'dataset')]);
    expect(drift.stdout).toMatch(/^DRIFT: 40\.0% issue-fix/m);
    expect(await followAdvice(drift.stdout)).toMatch(/^OK: 54\.8% issue-fix/m);
  });
});
