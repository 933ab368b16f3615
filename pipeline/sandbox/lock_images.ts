/**
 * The environment a lock makes, before any checkout: the image a unit's packages step (Debian's
 * packages, a manifest's pip list) and the lock's files below the heavy stack make, with their
 * bytecode, committed once per host and reused by every build of the same lock on the same start.
 * A rebuild from a lock line (a new output folder, another commit of the same repository, the env
 * image removed) then installs nothing and compiles nothing: it only adds the checkout (gpytorch:
 * 905 MB of wheels and bytecode committed once, not in every build). Made under a host-wide lock,
 * as a stack is, so two builds that need the same one at once make it once.
 */
import { join } from 'node:path';
import { hashOf } from '../../core/hashing.js';
import { withLock } from '../../core/lock.js';
import { installStep } from '../envs/index/install.js';
import { indexCacheDir } from '../runtime/layout.js';
import type { LockedDist } from '../runtime/manifest.js';
import { prefixToRuns, siteBytecodeScript } from './bytecode.js';

/** Marks lock images (gc --host-wide --images removes them with the stacks and bases). */
export const LOCK_LABEL = 'worldline.lock';

/** Bump when how a lock image is made changes. */
const LOCK_REVISION = 1;

/**
 * The lock image's tag: the image it starts from (a base's or a stack's tag, each named by its
 * content), the packages step's
 * Dockerfile (what apt and pip install) and the lock's files by hash, so equal environments are
 * one image per host.
 */
export function lockTag(python: string, start: string, packages: string | null, lock: LockedDist[]): string {
  return `worldline/lock:py${python}-${hashOf({ start, packages, files: lock.map((d) => d.sha256).sort(), revision: LOCK_REVISION })}`;
}

/** The script that makes it (root, no network, the lock's folder mounted at install.ts's INDEX_MOUNT): install, then compile. */
export function lockScript(): string {
  return ['set -e', installStep(), ...siteBytecodeScript(), prefixToRuns(), ''].join('\n');
}

/** `make` under the host-wide lock for `tag`: one maker at a time per environment. */
export function withLockImage<T>(tag: string, make: () => Promise<T>): Promise<T> {
  return withLock(join(indexCacheDir(), 'locks', `${tag.split(':')[1]}.lock`), make);
}
