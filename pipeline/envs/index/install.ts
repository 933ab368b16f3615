/**
 * How a lock enters a build: a folder of hard links to the cached files (download.ts) and to uv's
 * binary (uv.ts), with the lock as a hash-pinned requirements file, bind-mounted read-only into
 * the build's no-network container (runAndCommit); uv installs from it with no index, no
 * dependencies of its own choosing and every hash checked. Links, not copies: the cache and the
 * folder share a file system, and a build context never carries a wheel.
 */
import { linkSync, mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { tempPath } from '../../../core/atomic.js';
import { indexCacheDir } from '../../runtime/layout.js';
import type { LockedDist } from '../../runtime/manifest.js';

/** Where the folder is mounted in the build container. */
export const INDEX_MOUNT = '/worldline-index';

/**
 * A hash-pinned requirements file: uv takes each name at its version and only with its file's hash
 * (an sdist's too: uv builds it here, offline, with the build-only wheels of the folder beside it).
 */
export function requirementsText(lock: LockedDist[]): string {
  return lock
    .filter((d) => !d.build_only)
    .map((d) => `${d.name}==${d.version} --hash=sha256:${d.sha256}\n`)
    .join('');
}

/** A fresh folder for one build: `wheels/` (links to `paths`), `uv`, `requirements.txt`. The caller removes it. */
export function installFolder(lock: LockedDist[], paths: string[], uv: string): string {
  const dir = tempPath(join(indexCacheDir(), 'builds', 'build'));
  mkdirSync(join(dir, 'wheels'), { recursive: true });
  for (const [i, d] of lock.entries()) linkSync(paths[i], join(dir, 'wheels', d.filename));
  linkSync(uv, join(dir, 'uv'));
  writeFileSync(join(dir, 'requirements.txt'), requirementsText(lock));
  return dir;
}

/** The build script's step that installs the mounted lock into the base's Python (Debian's, beside its packages). */
export function installStep(): string {
  const uv = `${INDEX_MOUNT}/uv`;
  const flags = [
    '--python /usr/bin/python3 --system --break-system-packages',
    `--no-index --offline --no-deps --require-hashes --no-cache --no-config --find-links ${INDEX_MOUNT}/wheels`,
    `-r ${INDEX_MOUNT}/requirements.txt`,
  ].join(' ');
  return `${uv} pip install -q ${flags}`;
}
