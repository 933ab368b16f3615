/**
 * Disk: `--image-budget` below two env images over a run of 4 units (real builds on real Docker):
 * every unit ends ok and the images of finished units never hold more than the budget; a unit
 * whose image was removed gets it built again when a stage needs it; `gc` frees work folders,
 * unpublished dataset versions and (--images) the run's env images, and the published dataset
 * still verifies. Hand-written repositories made here, so every image is this test's own.
 */
import { existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { inspectImage } from '../pipeline/sandbox/engine.js';
import { cli, gitRepo, tempDir } from './helpers.js';

const BUDGET_GB = 0.4;
/** One suite run, one unit at a time: each finished unit is one step of the budget. */
const ONE_RUN = ['--validate-runs', '1', '--concurrency', '1'];

describe('disk: image budget and gc', () => {
  let dir: string;
  let out: string;
  let manifest: string;
  let events: { event: string; message?: string; status?: string }[];

  /** The env image a unit's build recorded, by the unit's repository name. */
  const imageOf = (name: string) => {
    const file = readdirSync(join(out, 'ledger', 'build')).find((f) => f.startsWith(`${name}-`)) ?? '';
    return (JSON.parse(readFileSync(join(out, 'ledger', 'build', file), 'utf8')) as { record: { image: string } }).record.image;
  };
  const images = () =>
    readdirSync(join(out, 'ledger', 'build')).map(
      (f) => (JSON.parse(readFileSync(join(out, 'ledger', 'build', f), 'utf8')) as { record: { image: string } }).record.image,
    );

  beforeAll(async () => {
    dir = tempDir('disk');
    // The commit message makes each test run's commits, and so its images, its own.
    const lines = ['one', 'two', 'three', 'four'].map((name, i) =>
      JSON.stringify({
        repo: gitRepo(
          join(dir, name),
          {
            [`${name}.py`]: `def value():\n    return ${i}\n`,
            [`tests/test_${name}.py`]: `from ${name} import value\n\n\ndef test_value():\n    assert value() == ${i}\n`,
          },
          `${name} ${Date.now()}`,
        ),
      }),
    );
    manifest = join(dir, 'manifest.jsonl');
    writeFileSync(manifest, lines.join('\n') + '\n');
    out = join(dir, 'out');
    const budget = ['--image-budget', String(BUDGET_GB)];
    const res = await cli(['run', '--manifest', manifest, '--out', out, '--stages', 'clone,build,validate,shard', ...ONE_RUN, ...budget]);
    if (res.code !== 0) console.error(res.stderr);
    expect(res.code).toBe(0);
    events = res.stderr
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l));
  }, 1_200_000);

  it('a budget below two images: 4 units end ok, the finished units never hold more than the budget', async () => {
    expect(events.filter((e) => e.event === 'unit').map((e) => e.status)).toEqual(['ok', 'ok', 'ok', 'ok']);
    const removals = events.filter((e) => e.event === 'log' && e.message?.startsWith('image budget: removed')).map((e) => e.message ?? '');
    // One image fits, two do not: each finished unit after the first pushes the oldest out.
    expect(removals).toHaveLength(3);
    for (const m of removals) {
      const [, held, budget] = /([\d.]+) GB of ([\d.]+) GB held/.exec(m) ?? [];
      expect(Number(held)).toBeLessThanOrEqual(Number(budget));
    }
    const present = await Promise.all(images().map((i) => inspectImage(i)));
    expect(present.filter(Boolean)).toHaveLength(1);
    expect(present.reduce((s, i) => s + (i?.Size ?? 0), 0)).toBeLessThanOrEqual(BUDGET_GB * 1e9);
    // Work folders went as the units finished.
    expect(existsSync(join(out, 'work')) ? readdirSync(join(out, 'work')).flatMap((k) => readdirSync(join(out, 'work', k))) : []).toEqual([]);
  });

  it('a stage that needs a removed image gets it built again', async () => {
    // Unit one finished first: the budget removed its image first.
    const first = imageOf('one');
    expect(await inspectImage(first)).toBeNull();
    const one = join(dir, 'one.jsonl');
    writeFileSync(one, readFileSync(manifest, 'utf8').split('\n')[0] + '\n');
    const res = await cli(['run', '--manifest', one, '--out', out, '--stages', 'clone,build,validate', ...ONE_RUN, '--json']);
    expect(res.code, res.stderr).toBe(0);
    expect(res.stderr).toContain('its result is gone from this host; running it again');
    expect((JSON.parse(res.stdout) as { units: { ran: string[] }[] }).units[0].ran).toContain('build');
    expect(await inspectImage(first)).not.toBeNull();
  }, 600_000);

  it('gc frees work folders, unpublished versions and, with --images, the env images; the published dataset still verifies', async () => {
    mkdirSync(join(out, 'work', 'build', 'left-by-a-kill'), { recursive: true });
    writeFileSync(join(out, 'work', 'build', 'left-by-a-kill', 'Dockerfile'), 'FROM scratch\n');
    mkdirSync(join(out, 'dataset-versions', 'v1-999999999'));
    const res = await cli(['gc', '--out', out, '--images', '--json']);
    expect(res.code, res.stderr).toBe(0);
    const report = JSON.parse(res.stdout) as { work_bytes: number; versions_removed: string[]; images_removed: string[]; image_bytes: number };
    expect(report.work_bytes).toBeGreaterThan(0);
    expect(report.versions_removed).toEqual(['v1-999999999']);
    expect(report.images_removed).toHaveLength(2);
    expect(report.image_bytes).toBeGreaterThan(0);
    for (const i of images()) expect(await inspectImage(i)).toBeNull();
    expect(existsSync(join(out, 'work'))).toBe(false);
    expect((await cli(['verify', join(out, 'dataset')])).code).toBe(0);
    const status = await cli(['status', '--out', out]);
    expect(status.stdout).toMatch(/mirrors cache: [\d.]+ GB in /);
  }, 300_000);
});
