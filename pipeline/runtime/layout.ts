/** Machine-wide locations that outlive one output folder. */
import { join } from 'node:path';

/** Downloaded packages, bare mirrors of repositories, base image work folders. */
export function cacheDir(): string {
  return process.env.WORLDLINE_CACHE ?? '/var/cache/worldline';
}

/** Bare mirrors, one per repository location; WORLDLINE_MIRRORS moves them (tests use a scratch folder). */
export function mirrorsDir(): string {
  return process.env.WORLDLINE_MIRRORS ?? join(cacheDir(), 'mirrors');
}
