/**
 * Leftover work disks: a Worldline killed with -9 leaves its container's work folder mounted.
 * Removing a unit's work folders (the executor after each unit, `worldline gc`, the test
 * teardown) detaches every mount under them first, so nothing is deleted through a live mount
 * and no mount or loop device leaks. Real mounts (root, as the pipeline runs here).
 */
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { mountsUnder, removeTree } from '../core/mounts.js';
import { removeWorkFolders } from '../pipeline/runtime/executor.js';
import { tempDir } from './helpers.js';

/** A loop-mounted ext4 image at `dir`, as a run killed mid-container leaves it. */
function leftoverDisk(dir: string): void {
  mkdirSync(dir, { recursive: true });
  execFileSync('truncate', ['-s', '32M', `${dir}.disk`]);
  execFileSync('mkfs.ext4', ['-q', '-F', `${dir}.disk`]);
  execFileSync('mount', ['-o', 'loop,nosuid,nodev', `${dir}.disk`, dir]);
  writeFileSync(join(dir, 'traces.jsonl'), 'x\n');
}

describe.skipIf(process.getuid?.() !== 0)('leftover work disks', () => {
  it("removeWorkFolders detaches a killed run's mounted work disk of that unit and removes it, sparing another unit's", () => {
    const out = tempDir('mounts');
    const mine = join(out, 'work', 'validate', 'toolz-0123abcd-Xy12Za');
    const other = join(out, 'work', 'validate', 'h11-89abcdef-Qw34Er');
    leftoverDisk(mine);
    leftoverDisk(other);
    expect(mountsUnder(out)).toEqual(expect.arrayContaining([mine, other]));
    removeWorkFolders(out, 'toolz-0123abcd');
    expect(mountsUnder(out)).toEqual([other]);
    expect(readdirSync(join(out, 'work', 'validate')).sort()).toEqual(['h11-89abcdef-Qw34Er', 'h11-89abcdef-Qw34Er.disk']);
    removeTree(join(out, 'work'));
    expect(mountsUnder(out)).toEqual([]);
    expect(existsSync(join(out, 'work'))).toBe(false);
    expect(execFileSync('losetup', ['-a'], { encoding: 'utf8' })).not.toContain(out);
  });

  it('finds a mount point whose name has a space (the kernel escapes it in mountinfo)', () => {
    const dir = join(tempDir('mounts'), 'a folder');
    mkdirSync(dir);
    execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=1m', 'tmpfs', dir]);
    expect(mountsUnder(dir)).toEqual([dir]);
    removeTree(dir);
    expect(mountsUnder(dir)).toEqual([]);
    expect(existsSync(dir)).toBe(false);
  });
});
