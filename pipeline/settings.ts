/** Machine-wide locations that outlive one output folder. */
import { join } from 'node:path';

/** Downloaded packages, bare mirrors of repositories, base image work folders. */
export function cacheDir(): string {
  return process.env.WORLDLINE_CACHE ?? '/var/cache/worldline';
}

export function mirrorsDir(): string {
  return join(cacheDir(), 'mirrors');
}
