/**
 * Environments a build had to repair, kept on this machine by the resolution's key (the evidence
 * and the Debian indexes) and the commit: what a repair found came from the tests' own imports,
 * which the evidence does not hold (two folders of tests with no packaging file have the same,
 * empty evidence), so it is the same repository at the same commit that starts from the repaired
 * environment next time, in any output folder, instead of repairing it again. A manifest's own env
 * is never stored.
 */
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { writeFileAtomic } from '../../../core/atomic.js';
import { hashOf } from '../../../core/hashing.js';
import { cacheDir } from '../../runtime/layout.js';
import type { PythonVersion, UnitEnv } from '../../runtime/manifest.js';

export interface RepairedEnv {
  env: UnitEnv;
  python: PythonVersion;
}

/** WORLDLINE_RESOLUTIONS moves it (tests use a scratch folder, as WORLDLINE_MIRRORS for the mirrors). */
const dirOf = () => process.env.WORLDLINE_RESOLUTIONS ?? join(cacheDir(), 'resolutions');
const fileOf = (key: string, commit: string) => join(dirOf(), `${hashOf({ key, commit })}.json`);

export function readRepairedEnv(key: string, commit: string): RepairedEnv | null {
  const file = fileOf(key, commit);
  if (!existsSync(file)) return null;
  try {
    return JSON.parse(readFileSync(file, 'utf8')) as RepairedEnv;
  } catch {
    return null;
  }
}

export function writeRepairedEnv(key: string, commit: string, repaired: RepairedEnv): void {
  writeFileAtomic(fileOf(key, commit), JSON.stringify(repaired, null, 1) + '\n');
}
