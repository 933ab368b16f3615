/**
 * Removing a folder that may hold live mounts: a work folder is a loop-mounted file system while
 * its container runs (pipeline/sandbox/work_disk.ts), and a Worldline killed with -9 leaves that
 * mount behind. `rm -r` through a live mount would empty the mounted file system and then fail
 * on the mount point, and the mount (and its loop device) would leak; so every mount at or under
 * the folder is detached first (lazily: a container still holding it keeps its view until it dies).
 */
import { execFileSync } from 'node:child_process';
import { readFileSync, rmSync } from 'node:fs';
import { resolve } from 'node:path';

/** Mount points at or under `path`, deepest first, from this process's mount table. */
export function mountsUnder(path: string): string[] {
  const root = resolve(path);
  const points = readFileSync('/proc/self/mountinfo', 'utf8')
    .split('\n')
    .map((line) => line.split(' ')[4])
    .filter((p): p is string => Boolean(p))
    // The kernel escapes space, tab, newline and backslash in mount points as octal.
    .map((p) => p.replace(/\\([0-7]{3})/g, (_, o: string) => String.fromCharCode(Number.parseInt(o, 8))))
    .filter((p) => p === root || p.startsWith(`${root}/`));
  return [...new Set(points)].sort((a, b) => b.length - a.length);
}

/** Detaches every mount at or under `path` (`umount -l`); a mount already gone is not an error. */
export function unmountUnder(path: string): void {
  for (const point of mountsUnder(path)) {
    try {
      execFileSync('umount', ['-l', point], { stdio: 'ignore' });
    } catch {
      // Detached meanwhile (the run that made it released it), or we may not unmount: rm then refuses, loudly.
    }
  }
}

/** `rm -rf path`, after detaching any mount left under it. */
export function removeTree(path: string): void {
  unmountUnder(path);
  try {
    rmSync(path, { recursive: true, force: true });
  } catch (e) {
    // A tree deeper than PATH_MAX (a test can make one): rmSync names every file by its whole path, rm walks by descriptors.
    if ((e as NodeJS.ErrnoException).code !== 'ENAMETOOLONG') throw e;
    execFileSync('rm', ['-rf', path], { stdio: 'ignore' });
  }
}
