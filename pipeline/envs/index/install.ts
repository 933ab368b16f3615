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

/** An sdist in a lock: built in the build container, unlike a wheel. */
const isSdist = (d: LockedDist) => !d.filename.endsWith('.whl');

/** A hash-pinned requirements line: uv takes the name at its version and only with its file's hash. */
const pinned = (d: LockedDist) => `${d.name}==${d.version} --hash=sha256:${d.sha256}\n`;

/** The lock's wheels as a hash-pinned requirements file (sdists go one by one: sdistRequirements). */
export function requirementsText(lock: LockedDist[]): string {
  return lock
    .filter((d) => !d.build_only && !isSdist(d))
    .map(pinned)
    .join('');
}

/**
 * A file per sdist, named for it, each installed on its own after the wheels: uv builds it here,
 * offline, with the build-only wheels of the folder beside it. One that does not build (blist 1.3.6,
 * a C extension for Pythons before 3.10, in sortedcontainers' benchmark requirements) is left out
 * and named in the build's output (SDIST_MARK), instead of failing the whole image.
 */
function sdistRequirements(lock: LockedDist[]): Map<string, string> {
  return new Map(lock.filter((d) => !d.build_only && isSdist(d)).map((d) => [`${d.name}.txt`, pinned(d)]));
}

/** Before the name of an sdist that did not build, in the build's output. */
export const SDIST_MARK = 'worldline-sdist-not-built: ';

/** A fresh folder for one build: `wheels/` (links to `paths`), `uv`, `requirements.txt`, `sdists/`. The caller removes it. */
export function installFolder(lock: LockedDist[], paths: string[], uv: string): string {
  const dir = tempPath(join(indexCacheDir(), 'builds', 'build'));
  mkdirSync(join(dir, 'wheels'), { recursive: true });
  mkdirSync(join(dir, 'sdists'));
  for (const [i, d] of lock.entries()) linkSync(paths[i], join(dir, 'wheels', d.filename));
  linkSync(uv, join(dir, 'uv'));
  writeFileSync(join(dir, 'requirements.txt'), requirementsText(lock));
  for (const [file, text] of sdistRequirements(lock)) writeFileSync(join(dir, 'sdists', file), text);
  return dir;
}

/** The build script's step that installs the mounted lock into the base's Python (Debian's, beside its packages): the wheels, then each sdist. */
export function installStep(): string {
  const uv = `${INDEX_MOUNT}/uv`;
  const flags = [
    '--python /usr/bin/python3 --system --break-system-packages',
    `--no-index --offline --no-deps --require-hashes --no-cache --no-config --find-links ${INDEX_MOUNT}/wheels`,
  ].join(' ');
  const wheels = `${uv} pip install -q ${flags} -r ${INDEX_MOUNT}/requirements.txt`;
  const sdists = `for f in ${INDEX_MOUNT}/sdists/*.txt; do [ -e "$f" ] || continue; ${uv} pip install -q ${flags} -r "$f" || echo "${SDIST_MARK}$(basename "$f" .txt)"; done`;
  // Two lines: under `set -e` a failure before `&&` would not stop the script.
  return `${wheels}\n${sdists}`;
}
