/**
 * A build stops before its first layer when the Docker Engine's disk cannot hold what it would
 * write (pipeline/sandbox/engine_disk.ts), saying so, and the next run with room builds the unit.
 */
import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import type { LedgerEntry } from '../pipeline/runtime/ledger.js';
import { buildNeeds, diskReserve, diskShort, engineDiskFree } from '../pipeline/sandbox/engine_disk.js';
import { cli, gitRepo, tempDir } from './helpers.js';

describe('room on the engine disk before a build', () => {
  it('reads the reserve and says what a build needs', () => {
    expect(diskReserve(undefined)).toBe(2e9);
    expect(diskReserve('500M')).toBe(5e8);
    expect(diskReserve('1.5G')).toBe(1.5e9);
    expect(() => diskReserve('lots')).toThrow(/WORLDLINE_DISK_RESERVE takes a size such as 2G or 500M \(got "lots"\)/);
    // A 0.9 GB torch wheel unpacks to about four times that.
    expect(buildNeeds(0.9e9, 2e9)).toBe(5.6e9);
    expect(diskShort(5.6e9, 6e9, '/var/lib/docker')).toBeNull();
    expect(diskShort(5.6e9, 1.2e9, '/var/lib/docker')).toMatch(
      /^disk short: this build needs about 5\.6 GB free on the Docker Engine's disk \(\/var\/lib\/docker\), which has 1\.2 GB; the build was not started\./,
    );
  });

  it('stops a build on a short disk before any layer, and the next run with room continues the unit', async () => {
    const disk = await engineDiskFree();
    expect(disk?.free).toBeGreaterThan(0);
    const dir = tempDir('disk-short');
    const repo = gitRepo(join(dir, 'repo'), { 'tests/test_a.py': 'def test_a():\n    pass\n' });
    const manifest = join(dir, 'manifest.jsonl');
    writeFileSync(manifest, `${JSON.stringify({ repo, python: '3.11' })}\n`);
    const out = join(dir, 'out');
    const args = ['run', '--manifest', manifest, '--out', out, '--stages', 'clone,build', '--licenses', '*'];
    // A reserve no disk here has: the build must not start.
    const short = await cli(args, { WORLDLINE_DISK_RESERVE: '1000T' });
    expect(short.code, short.stderr).toBe(1);
    const entry = () => {
      const ledger = join(out, 'ledger', 'build');
      return JSON.parse(readFileSync(join(ledger, readdirSync(ledger)[0]), 'utf8')) as LedgerEntry<{ image: string }>;
    };
    expect(entry()).toMatchObject({
      status: 'failed',
      budget_cut: true,
      reason: expect.stringMatching(/^disk short: this build needs about 1000000\.0 GB free/),
    });
    expect(
      readdirSync(join(out, 'logs', 'build'))
        .map((f) => readFileSync(join(out, 'logs', 'build', f), 'utf8'))
        .join(''),
    ).toBe('');
    const again = await cli(args);
    expect(again.code, again.stderr).toBe(0);
    expect(entry()).toMatchObject({ status: 'ok', record: { image: expect.stringMatching(/^worldline\/env:/) } });
  }, 600_000);
});
