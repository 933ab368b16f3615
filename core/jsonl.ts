import { once } from 'node:events';
/** The one JSON Lines reader (bounded memory) and writer (atomic) of the project. */
import { closeSync, createWriteStream, mkdirSync, openSync, readSync, renameSync, rmSync } from 'node:fs';
import { dirname } from 'node:path';
import { StringDecoder } from 'node:string_decoder';
import { tempPath } from './atomic.js';

/** Non-empty lines of a file, read in 4 MB chunks so a large file never sits whole in memory. */
export function* readLines(path: string): Generator<string> {
  const fd = openSync(path, 'r');
  const buf = Buffer.allocUnsafe(4 << 20);
  const decoder = new StringDecoder('utf8');
  let rest = '';
  try {
    for (let n = readSync(fd, buf, 0, buf.length, null); n > 0; n = readSync(fd, buf, 0, buf.length, null)) {
      const lines = (rest + decoder.write(buf.subarray(0, n))).split('\n');
      rest = lines.pop() ?? '';
      for (const line of lines) if (line) yield line;
    }
    rest += decoder.end();
    if (rest) yield rest;
  } finally {
    closeSync(fd);
  }
}

/** A problem with one line of a JSON Lines input; the caller adds the file and line number. */
export class LineError extends Error {}

/** One JSON Lines line that must hold a JSON object (manifests, task imports). */
export function jsonObjectLine(text: string): Record<string, unknown> {
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch (e) {
    throw new LineError(`not valid JSON: ${(e as Error).message}`);
  }
  if (!raw || typeof raw !== 'object' || Array.isArray(raw)) throw new LineError('each line must be a JSON object');
  return raw as Record<string, unknown>;
}

/** Writes rows as JSON Lines to `path` (atomically: a temp file renamed when complete). */
export async function writeJsonl(path: string, rows: AsyncIterable<object>): Promise<number> {
  mkdirSync(dirname(path), { recursive: true });
  const tmp = tempPath(path);
  const sink = createWriteStream(tmp);
  // A failed write (a full disk) is thrown from the next write or the end, not lost.
  let failed: Error | null = null;
  sink.on('error', (e) => {
    failed = e;
  });
  let n = 0;
  try {
    for await (const row of rows) {
      n += 1;
      if (failed) throw failed;
      // events.once takes its listeners off again whichever fires: one left per wait added up to a leak warning.
      if (!sink.write(JSON.stringify(row) + '\n')) await once(sink, 'drain');
    }
    await new Promise<void>((resolve, reject) => {
      if (failed) reject(failed);
      sink.once('error', reject);
      sink.end(() => resolve());
    });
    if (failed) throw failed;
    renameSync(tmp, path);
  } catch (e) {
    sink.destroy();
    rmSync(tmp, { force: true });
    throw e;
  }
  return n;
}
