/**
 * Environments a build had to repair, kept on this machine by the resolution's key (the evidence
 * and the Debian indexes): the next unit with the same evidence, in any output folder, starts from
 * the repaired environment instead of repairing it again. A manifest's own env is never stored.
 */
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { writeFileAtomic } from '../../core/atomic.js';
import { cacheDir } from '../runtime/layout.js';
import type { PythonVersion, UnitEnv } from '../runtime/manifest.js';

export interface RepairedEnv {
  env: UnitEnv;
  python: PythonVersion;
}

const fileOf = (key: string) => join(cacheDir(), 'resolutions', `${key}.json`);

export function readRepairedEnv(key: string): RepairedEnv | null {
  const file = fileOf(key);
  if (!existsSync(file)) return null;
  try {
    return JSON.parse(readFileSync(file, 'utf8')) as RepairedEnv;
  } catch {
    return null;
  }
}

export function writeRepairedEnv(key: string, repaired: RepairedEnv): void {
  writeFileAtomic(fileOf(key), JSON.stringify(repaired, null, 1) + '\n');
}
