import { appendFileSync, mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { dirname } from 'node:path';

/** Writes a file so that readers see the old content or the new, never a torn one. */
export function writeFileAtomic(path: string, data: string | Uint8Array): void {
  mkdirSync(dirname(path), { recursive: true });
  const tmp = `${path}.tmp-${process.pid}-${Math.random().toString(36).slice(2)}`;
  writeFileSync(tmp, data);
  renameSync(tmp, path);
}

/**
 * Concatenates `parts` into `path` atomically, each line through `mapLine` when given; returns
 * the number of lines written.
 */
export function concatFiles(parts: string[], path: string, mapLine?: (line: string) => string): number {
  mkdirSync(dirname(path), { recursive: true });
  const tmp = `${path}.tmp-${process.pid}-${Math.random().toString(36).slice(2)}`;
  let lines = 0;
  writeFileSync(tmp, '');
  for (const part of parts) {
    const raw = readFileSync(part);
    const data = mapLine ? Buffer.from(raw.toString('utf8').replace(/[^\n]+/g, mapLine)) : raw;
    for (const byte of data) if (byte === 10) lines += 1;
    appendFileSync(tmp, data);
  }
  renameSync(tmp, path);
  return lines;
}
