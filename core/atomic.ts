import { appendFileSync, mkdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { hostname } from 'node:os';
import { basename, dirname } from 'node:path';

/**
 * A temporary name beside `path` for a write renamed into place when complete: it names its writer
 * (host and pid), so one a killed writer left can be told from one being written (`tempWriter`).
 */
export function tempPath(path: string): string {
  return `${path}.tmp-${hostname()}-${process.pid}-${Math.random().toString(36).slice(2, 10)}`;
}

/** The writer (host, pid) a `tempPath` name names, or null when `name` is no temporary file of ours. */
export function tempWriter(name: string): { host: string; pid: number } | null {
  const m = /\.tmp-(.+)-(\d+)-[a-z0-9]+$/.exec(basename(name));
  return m ? { host: m[1], pid: Number(m[2]) } : null;
}

/**
 * Writes `tmp` with `write`, then renames it to `path`; a write that fails (a full disk) takes its
 * temporary file with it.
 */
export function renamedIntoPlace(path: string, write: (tmp: string) => void): void {
  mkdirSync(dirname(path), { recursive: true });
  const tmp = tempPath(path);
  try {
    write(tmp);
    renameSync(tmp, path);
  } catch (e) {
    rmSync(tmp, { force: true });
    throw e;
  }
}

/** Writes a file so that readers see the old content or the new, never a torn one. */
export function writeFileAtomic(path: string, data: string | Uint8Array): void {
  renamedIntoPlace(path, (tmp) => writeFileSync(tmp, data));
}

/**
 * Concatenates `parts` into `path` atomically, each line through `mapLine` when given; returns
 * the number of lines written.
 */
export function concatFiles(parts: string[], path: string, mapLine?: (line: string) => string): number {
  let lines = 0;
  renamedIntoPlace(path, (tmp) => {
    writeFileSync(tmp, '');
    for (const part of parts) {
      const raw = readFileSync(part);
      const data = mapLine ? Buffer.from(raw.toString('utf8').replace(/[^\n]+/g, mapLine)) : raw;
      for (const byte of data) if (byte === 10) lines += 1;
      appendFileSync(tmp, data);
    }
  });
  return lines;
}
