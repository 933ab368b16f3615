/**
 * A work folder's own disk while its container runs: a sparse ext4 image of the run's
 * `--work-disk` size, loop-mounted over the folder `nosuid,nodev`. The container's writes to
 * /worldline/out land there, so they stop at the budget (ENOSPC) whatever the number or size of
 * files, a setuid bit or a device node there means nothing, and the host's disk holds at most the
 * budget. The folder's inputs (scripts, the report key) go in at mkfs (`-d`); when the container
 * is gone its results are copied back into a plain folder of the same name (links and special
 * files as they are: `results.ts` refuses them) and the mount is detached. Needs root and a loop device;
 * without them the folder stays a plain folder and the run says so once.
 *
 * Why a loop image and not a size-limited tmpfs: tmpfs pages are charged to the container's
 * memory limit (a trace's results would compete with the traced process) and held in RAM by every
 * parallel container; a sparse image costs disk only as written and about 70 ms to make.
 */
import { execFile } from 'node:child_process';
import { mkdirSync, renameSync, rmSync, statfsSync } from 'node:fs';
import { promisify } from 'node:util';
import { removeTree, unmountUnder } from '../../core/mounts.js';
import { UnitFailure } from '../runtime/stage.js';

const exec = promisify(execFile);

/** Free space under which a work disk counts as filled (its last writes failed or were about to). */
const FULL_BELOW = 1 << 20;

let warned = false;
let unavailable = false;

/** Work folders whose disk this process has mounted and not yet released. */
const mounted = new Set<string>();

/**
 * Detaches every work disk this process still has mounted (a stop that ran out of time: the
 * containers are gone or going), so no mount outlives the process; returns how many. The folders
 * stay for the next run or `gc` to remove.
 */
export function detachWorkDisks(): number {
  const n = mounted.size;
  for (const work of mounted) {
    unmountUnder(work);
    rmSync(`${work}.disk`, { force: true });
  }
  mounted.clear();
  return n;
}

interface WorkDisk {
  /** Copies the results back into the plain folder, detaches the disk; says whether it was filled. */
  release(): Promise<{ full: boolean }>;
}

/**
 * Runs `run` (a container with `work` as its /worldline/out) with `work` on its own disk, released
 * on every exit path; a run that filled the disk fails the unit with that reason.
 */
export async function onWorkDisk<T>(work: string, budgetMb: number, uid: number, run: () => Promise<T>): Promise<T> {
  const disk = await mountWorkDisk(work, budgetMb, uid);
  let result: T;
  let full = false;
  try {
    result = await run();
  } finally {
    // A timeout, an error, a job's containers removed under it: the disk goes back in every case.
    full = (await disk?.release())?.full ?? false;
  }
  if (full) throw new UnitFailure(`disk budget exceeded: ${budgetMb * 1024 * 1024} bytes (the work folder filled its --work-disk)`);
  return result;
}

/**
 * A copy-back that cp refused (a path deeper than PATH_MAX, a name the host's file system takes
 * not) as the unit's failure: what went wrong, in short, without the host's paths (cp names each
 * file by its full path there, kilobytes of it); any other error as it is.
 */
function copyBackFailure(e: Error & { stderr?: string }): Error {
  const refused = (e.stderr ?? '').split('\n').filter((l) => l.startsWith('cp: '));
  if (!refused.length) return e;
  const why = [...new Set(refused.map((l) => l.slice(l.lastIndexOf(': ') + 2)))].slice(0, 3).join('; ');
  return new UnitFailure(`the results could not be copied back from the work folder: ${why} (${refused.length} path${refused.length === 1 ? '' : 's'})`);
}

/** Puts `work` (with what it holds) on a disk of `budgetMb` MB owned by `uid`; null when we may not mount. */
async function mountWorkDisk(work: string, budgetMb: number, uid: number): Promise<WorkDisk | null> {
  if (process.getuid?.() !== 0) {
    if (!warned) console.error('worldline: not root, so work folders are plain folders: no nosuid,nodev mount and no disk budget');
    warned = true;
    return null;
  }
  const image = `${work}.disk`;
  // One shell for the steps (each spawn costs more than the step): a sparse image, an ext4 with
  // no journal and no reserved blocks holding the folder's inputs (-d), mounted over the folder
  // (the inputs left under it go when the disk is released).
  const make = [
    `truncate -s ${budgetMb}M "$1"`,
    `mkfs.ext4 -q -F -m 0 -O ^has_journal -E lazy_itable_init=1,root_owner=${uid}:${uid} -d "$2" "$1"`,
    'mount -o loop,nosuid,nodev,noatime "$1" "$2"',
    'rm -rf "$2/lost+found"',
  ].join(' && ');
  try {
    mounted.add(work);
    await exec('sh', ['-c', make, 'sh', image, work]);
  } catch (e) {
    mounted.delete(work);
    unmountUnder(work);
    rmSync(image, { force: true });
    // A host where root may not mount a loop device (a container without the right): say so, go on.
    if (!unavailable) console.error(`worldline: cannot give work folders their own disk here, so they stay plain folders: ${(e as Error).message.trim()}`);
    unavailable = true;
    return null;
  }
  return {
    async release() {
      const stash = `${work}.out`;
      let full = false;
      try {
        const fs = statfsSync(work);
        full = fs.bavail * fs.bsize < FULL_BELOW;
        mkdirSync(stash);
        // The copy's status, after the unmount that must happen whatever it is.
        await exec('sh', ['-c', 'cp -a --no-dereference "$1/." "$2"; s=$?; umount -l "$1"; exit $s', 'sh', work, stash]);
      } catch (e) {
        // rm, not rmSync: what a test left may be deeper than PATH_MAX, which only a walk by descriptors removes.
        await exec('rm', ['-rf', stash]).catch(() => undefined);
        throw copyBackFailure(e as Error & { stderr?: string });
      } finally {
        removeTree(work);
        rmSync(image, { force: true });
        mounted.delete(work);
      }
      renameSync(stash, work);
      return { full };
    },
  };
}
