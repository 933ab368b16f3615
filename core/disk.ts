/** Bytes a folder takes on disk (`du`: fast on large trees such as the mirrors cache); 0 if it is missing. */
import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';

export function dirBytes(path: string): number {
  if (!existsSync(path)) return 0;
  return Number(execFileSync('du', ['-sb', path], { encoding: 'utf8' }).split('\t')[0]);
}

export const gb = (bytes: number) => `${(bytes / 1e9).toFixed(2)} GB`;
