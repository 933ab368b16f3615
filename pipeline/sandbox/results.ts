/**
 * Reading back what a container wrote into its work folder. The container runs untrusted code
 * as root on a writable bind mount, so any name there may have been swapped for a symlink to a
 * host file (`/proc/self/environ` holds our API keys), a FIFO that blocks a reader forever, or a
 * file of gigabytes. Nothing in a work folder is opened by path without these checks: no symlink
 * at any level (O_NOFOLLOW on the file, lstat on each folder), regular files only, sizes capped.
 */
import { closeSync, constants, createReadStream, fstatSync, lstatSync, openSync, readSync } from 'node:fs';
import { isAbsolute, join, normalize, sep } from 'node:path';
import { UnitFailure } from '../runtime/stage.js';

/** A result file that is not a plain file inside its work folder: the unit fails with this reason. */
export class ResultRefused extends UnitFailure {}

/** Reports and small result files above this are refused rather than read into memory. */
export const RESULT_CAP = 64 << 20;
/** Logs keep their last bytes only: a test printing gigabytes costs us this much memory. */
export const LOG_TAIL = 1 << 20;

/** An open descriptor on `work/rel` and its size, or null when the file does not exist. */
function openResult(work: string, rel: string): { fd: number; size: number } | null {
  const clean = normalize(rel);
  if (isAbsolute(clean) || clean === '..' || clean.startsWith(`..${sep}`)) throw new ResultRefused(`result path ${rel} leaves its work folder; refused`);
  const parts = clean.split(sep);
  let dir = work;
  for (const part of parts.slice(0, -1)) {
    dir = join(dir, part);
    let st: ReturnType<typeof lstatSync>;
    try {
      st = lstatSync(dir);
    } catch {
      return null;
    }
    if (!st.isDirectory()) throw new ResultRefused(`result folder ${rel} is not a plain folder (a symlink?); refused`);
  }
  let fd: number;
  try {
    fd = openSync(join(work, clean), constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK);
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    if (code === 'ENOENT') return null;
    if (code === 'ELOOP') throw new ResultRefused(`result file ${rel} is a symlink; refused (a test may have pointed it at a host file)`);
    throw e;
  }
  const st = fstatSync(fd);
  if (!st.isFile()) {
    closeSync(fd);
    throw new ResultRefused(`result file ${rel} is not a regular file; refused`);
  }
  return { fd, size: st.size };
}

function readRange(fd: number, start: number, length: number): string {
  const buf = Buffer.alloc(length);
  let got = 0;
  while (got < length) {
    const n = readSync(fd, buf, got, length - got, start + got);
    if (n === 0) break;
    got += n;
  }
  return buf.subarray(0, got).toString('utf8');
}

/** A small result (exit code, report, JSON): its whole text, or null when absent; over `cap`, refused. */
export function readResult(work: string, rel: string, cap = RESULT_CAP): string | null {
  const f = openResult(work, rel);
  if (!f) return null;
  try {
    if (f.size > cap) throw new ResultRefused(`result file ${rel} has ${f.size} bytes, over the ${cap}-byte cap; refused`);
    return readRange(f.fd, 0, f.size);
  } finally {
    closeSync(f.fd);
  }
}

/** A log's last `tail` bytes (noting how much was left out), or null when absent. */
export function readLogTail(work: string, rel: string, tail = LOG_TAIL): string | null {
  const f = openResult(work, rel);
  if (!f) return null;
  try {
    if (f.size <= tail) return readRange(f.fd, 0, f.size);
    return `[worldline: the first ${f.size - tail} bytes of this log are left out]\n${readRange(f.fd, f.size - tail, tail)}`;
  } finally {
    closeSync(f.fd);
  }
}

/**
 * Lines of a result file a container is still writing (one per test, the tracer's output), counted
 * from where the last call stopped: a live count for progress. A file that is refused (a symlink, not
 * regular) counts as nothing here; reading it back for real refuses it with the reason.
 */
export class LineCounter {
  private offset = 0;
  private lines = 0;
  // One buffer for the counter's life: it is asked once a second for as long as the suite runs.
  private readonly buf = Buffer.alloc(1 << 20);

  constructor(
    private readonly work: string,
    private readonly rel: string,
  ) {}

  count(): number {
    let f: ReturnType<typeof openResult>;
    try {
      f = openResult(this.work, this.rel);
    } catch {
      return this.lines;
    }
    if (!f) return this.lines;
    try {
      const buf = this.buf;
      while (this.offset < f.size) {
        const n = readSync(f.fd, buf, 0, Math.min(buf.length, f.size - this.offset), this.offset);
        if (n === 0) break;
        for (let at = buf.indexOf(10); at !== -1 && at < n; at = buf.indexOf(10, at + 1)) this.lines++;
        this.offset += n;
      }
    } finally {
      closeSync(f.fd);
    }
    return this.lines;
  }
}

/**
 * The lines of a large result (the tracer's episodes: one line per test), streamed over the
 * checked descriptor, each at most `lineCap` bytes: a longer one fails the unit with that reason
 * and nothing past it is read. Read unbounded, one unterminated line of a gigabyte (a conftest
 * padding the file) grew one string until the whole process died. The file's size bounds the
 * total (a container's files are at most its 1 GiB file-size limit), and only what the file held
 * when it was opened is read: its container is gone by then.
 */
export async function* resultLines(work: string, rel: string, lineCap = RESULT_CAP): AsyncGenerator<string> {
  const f = openResult(work, rel);
  if (!f) return;
  if (f.size === 0) {
    closeSync(f.fd);
    return;
  }
  const stream = createReadStream('', { fd: f.fd, end: f.size - 1, highWaterMark: 1 << 20 });
  let parts: Buffer[] = [];
  let length = 0;
  const refuse = () => new ResultRefused(`result file ${rel} has a line longer than ${lineCap} bytes; refused`);
  try {
    for await (const chunk of stream as AsyncIterable<Buffer>) {
      let from = 0;
      for (let at = chunk.indexOf(10); at !== -1; at = chunk.indexOf(10, from)) {
        if (length + at - from > lineCap) throw refuse();
        parts.push(chunk.subarray(from, at));
        yield Buffer.concat(parts).toString('utf8');
        parts = [];
        length = 0;
        from = at + 1;
      }
      length += chunk.length - from;
      if (length > lineCap) throw refuse();
      parts.push(chunk.subarray(from));
    }
    if (length) yield Buffer.concat(parts).toString('utf8');
  } finally {
    stream.destroy();
  }
}
