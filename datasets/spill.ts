/**
 * The first pass over a config's rows, before any Parquet is written: validation, the row size
 * cap, exact dedup and a deterministic global shuffle, all with bounded memory, by spilling rows
 * to temporary JSON Lines bucket files.
 *
 * Every kept row gets a key: the sha256 of `shuffle seed + canonical content JSON` (its fields in
 * schema order, timing fields left out). With the shuffle on, a row goes to one of 256 bucket
 * files by the key's first byte; a bucket is later read whole, sorted by key and deduplicated
 * (equal content => equal key => same bucket, adjacent after the sort). The final order is thus
 * "sorted by a seeded hash of the content": a uniform random permutation that interleaves every
 * repository, the same for the same rows and seed whatever order they arrived in. A bucket larger
 * than `maxBucketBytes` is split again by the key's next byte (unless it is one row and its
 * duplicates), so the memory bound holds at any dataset size: one bucket (<= maxBucketBytes of
 * JSON text, 64 MB by default, plus its parsed rows one at a time) in the write phase, and at most
 * 256 write-behind buffers of 256 KB (64 MB) in the spill phase. Disk: about the JSON size of the
 * config's rows, beside the version folder being written, removed when the config is done.
 *
 * With the shuffle off, rows keep their input order in a single spill file, and dedup uses an
 * in-memory set of keys: ~100 bytes per distinct row (10 M rows => ~1 GB). The shuffled path has
 * no such term.
 *
 * Spill line: `<key: 32 hex>\t<estimated bytes>\t<content JSON>\t<timing JSON or empty>`. JSON
 * escapes tabs and newlines inside strings, so both separators are safe. Non-finite floats (NaN,
 * Infinity) do not survive JSON and come back as null.
 */
import { createHash } from 'node:crypto';
import { closeSync, mkdirSync, openSync, readFileSync, rmSync, statSync, writeSync } from 'node:fs';
import { join } from 'node:path';
import { readLines } from '../core/jsonl.js';
import { RecordError, type RecordSchema } from '../schemas/schema.js';
import { compileEstimator, compileValidator } from './fast_validate.js';

export interface SpillSettings {
  shuffle: boolean;
  seed: number;
  /** Rows estimated larger than this (uncompressed) are rejected. */
  maxRowBytes: number;
  /** Top-level fields left out of the content hash (timings). */
  ignoreFields: string[];
  /** Where the spill files go; removed by `cleanup`. */
  dir: string;
  /** A bucket file larger than this is split again before it is read whole. */
  maxBucketBytes?: number;
  /** How many rejection reasons to keep (the counts are always complete). */
  keepReasons?: number;
}

export interface Rejection {
  kind: 'invalid' | 'oversize' | 'tokens';
  reason: string;
}

export interface SpilledRow {
  row: Record<string, unknown>;
  /** Estimated uncompressed bytes (compileEstimator). */
  size: number;
}

export const DEFAULT_MAX_BUCKET_BYTES = 64 << 20;
const BUCKETS = 256;
const WRITE_BEHIND = 256 << 10;
const KEY_HEX = 32;

/** A set of append-only files with write-behind buffers, each created on its first line. */
class SpillFiles {
  private readonly fds: (number | undefined)[] = [];
  private readonly parts: string[][] = [];
  private readonly sizes: number[] = [];

  constructor(readonly paths: string[]) {
    for (let i = 0; i < paths.length; i++) {
      this.fds.push(undefined);
      this.parts.push([]);
      this.sizes.push(0);
    }
  }

  write(i: number, line: string): void {
    this.parts[i].push(line);
    this.sizes[i] += line.length;
    if (this.sizes[i] >= WRITE_BEHIND) this.flush(i);
  }

  private flush(i: number): void {
    if (!this.parts[i].length) return;
    this.fds[i] ??= openSync(this.paths[i], 'w');
    writeSync(this.fds[i]!, this.parts[i].join(''));
    this.parts[i] = [];
    this.sizes[i] = 0;
  }

  /** Flushes and closes; returns the paths of the files that got lines, in index order. */
  close(): string[] {
    const used: string[] = [];
    for (let i = 0; i < this.fds.length; i++) {
      this.flush(i);
      if (this.fds[i] !== undefined) {
        closeSync(this.fds[i]!);
        used.push(this.paths[i]);
      }
    }
    return used;
  }
}

/** A bucket's lines sorted by key with duplicates (equal keys) dropped. */
function loadBucket(path: string): { lines: string[]; duplicates: number } {
  if (statSync(path).size === 0) return { lines: [], duplicates: 0 };
  const all = readFileSync(path, 'utf8').split('\n');
  all.pop();
  // Sorting whole lines orders by key first; among duplicates (same key, same content) the
  // timing JSON decides which copy is kept, so the choice does not depend on arrival order.
  all.sort();
  const lines: string[] = [];
  let last = '';
  for (const line of all) {
    const key = line.slice(0, KEY_HEX);
    if (key === last) continue;
    last = key;
    lines.push(line);
  }
  return { lines, duplicates: all.length - lines.length };
}

function parseLine(line: string): SpilledRow {
  const a = line.indexOf('\t', KEY_HEX + 1);
  const b = line.lastIndexOf('\t');
  const row = JSON.parse(line.slice(a + 1, b)) as Record<string, unknown>;
  if (b + 1 < line.length) Object.assign(row, JSON.parse(line.slice(b + 1)));
  return { row, size: Number(line.slice(KEY_HEX + 1, a)) };
}

function sizeOf(line: string): number {
  return Number(line.slice(KEY_HEX + 1, line.indexOf('\t', KEY_HEX + 1)));
}

/** One config's rows after validation, the size cap, dedup and the shuffle. */
export class SpilledConfig {
  /** Rows kept (after dedup); known after `count()`. */
  rows = 0;
  /** Estimated uncompressed bytes of the rows kept; known after `count()`. */
  bytes = 0;
  duplicates = 0;
  oversize = 0;
  invalid = 0;
  /** Rows over the token cap (the writer counts tokens before a row reaches the spill). */
  overTokens = 0;
  readonly rejections: Rejection[] = [];

  private readonly contentFields: string[];
  private readonly timingFields: string[];
  private readonly prefix: string;
  private readonly keepReasons: number;
  private readonly maxBucketBytes: number;
  private files: SpillFiles;
  private buckets: { path: string; depth: number }[] = [];
  /** Dedup keys, only with the shuffle off. */
  private seen: Set<string> | null = null;
  private counted = false;
  private readonly validate: (record: unknown) => void;
  private readonly estimate: (row: Record<string, unknown>) => number;

  constructor(
    readonly schema: RecordSchema,
    readonly settings: SpillSettings,
  ) {
    this.validate = compileValidator(schema);
    this.estimate = compileEstimator(schema);
    const ignore = new Set(settings.ignoreFields);
    for (const name of ignore) if (!(name in schema.fields)) throw new Error(`ignoreFields: ${schema.name} has no field "${name}"`);
    this.contentFields = Object.keys(schema.fields).filter((n) => !ignore.has(n));
    this.timingFields = Object.keys(schema.fields).filter((n) => ignore.has(n));
    this.prefix = settings.shuffle ? `worldline-shuffle:${settings.seed}\n` : '';
    this.keepReasons = settings.keepReasons ?? 10;
    this.maxBucketBytes = settings.maxBucketBytes ?? DEFAULT_MAX_BUCKET_BYTES;
    mkdirSync(settings.dir, { recursive: true });
    const n = settings.shuffle ? BUCKETS : 1;
    const paths = Array.from({ length: n }, (_, i) => join(settings.dir, `b${String(i).padStart(3, '0')}.jsonl`));
    this.files = new SpillFiles(paths);
    if (!settings.shuffle) this.seen = new Set();
  }

  reject(kind: Rejection['kind'], reason: string): void {
    if (kind === 'invalid') this.invalid++;
    else if (kind === 'tokens') this.overTokens++;
    else this.oversize++;
    if (this.rejections.length < this.keepReasons) this.rejections.push({ kind, reason });
  }

  /** Validates, sizes, keys and spills one incoming row (or counts it as rejected). */
  add(row: Record<string, unknown>): void {
    try {
      this.validate(row);
    } catch (e) {
      if (!(e instanceof RecordError)) throw e;
      this.reject('invalid', `${e.path}: ${e.reason}`);
      return;
    }
    const size = this.estimate(row);
    if (size > this.settings.maxRowBytes) {
      this.reject('oversize', `row of about ${size} bytes uncompressed is over the ${this.settings.maxRowBytes}-byte cap`);
      return;
    }
    const content: Record<string, unknown> = {};
    for (const name of this.contentFields) content[name] = row[name] ?? null;
    const c = JSON.stringify(content);
    let t = '';
    if (this.timingFields.length) {
      const timing: Record<string, unknown> = {};
      for (const name of this.timingFields) timing[name] = row[name] ?? null;
      t = JSON.stringify(timing);
    }
    const key = createHash('sha256').update(this.prefix).update(c).digest('hex').slice(0, KEY_HEX);
    if (this.seen) {
      if (this.seen.has(key)) {
        this.duplicates++;
        return;
      }
      this.seen.add(key);
    }
    this.files.write(this.seen ? 0 : parseInt(key.slice(0, 2), 16), `${key}\t${size}\t${c}\t${t}\n`);
  }

  /** Ends the spill; splits oversized buckets; counts the rows kept and their bytes. */
  count(): void {
    this.buckets = this.files.close().map((path) => ({ path, depth: 1 }));
    this.seen = null;
    if (this.settings.shuffle) {
      const out: { path: string; depth: number }[] = [];
      const expand = (b: { path: string; depth: number }): void => {
        // 16 bytes of key give 15 more levels; past that a bucket is one key repeated.
        if (statSync(b.path).size <= this.maxBucketBytes || b.depth >= KEY_HEX / 2) {
          out.push(b);
          return;
        }
        const stem = b.path.slice(0, -'.jsonl'.length);
        const files = new SpillFiles(Array.from({ length: BUCKETS }, (_, i) => `${stem}-${String(i).padStart(3, '0')}.jsonl`));
        let first: string | null = null;
        let distinct = false;
        for (const line of readLines(b.path)) {
          const key = line.slice(0, KEY_HEX);
          first ??= key;
          if (key !== first) distinct = true;
          files.write(parseInt(line.slice(2 * b.depth, 2 * b.depth + 2), 16), line + '\n');
        }
        const paths = files.close();
        if (!distinct) {
          // One row and its duplicates: no split can make it smaller.
          for (const path of paths) rmSync(path);
          out.push(b);
          return;
        }
        rmSync(b.path);
        for (const path of paths) expand({ path, depth: b.depth + 1 });
      };
      for (const b of this.buckets) expand(b);
      this.buckets = out;
      for (const b of this.buckets) {
        const { lines, duplicates } = loadBucket(b.path);
        this.duplicates += duplicates;
        this.rows += lines.length;
        for (const line of lines) this.bytes += sizeOf(line);
      }
    } else {
      for (const b of this.buckets) {
        for (const line of readLines(b.path)) {
          this.rows++;
          this.bytes += sizeOf(line);
        }
      }
    }
    this.counted = true;
  }

  /** The kept rows in their final order (shuffled or input order), one bucket in memory. */
  *emit(): Generator<SpilledRow> {
    if (!this.counted) throw new Error('SpilledConfig.emit before count');
    if (!this.settings.shuffle) {
      for (const b of this.buckets) for (const line of readLines(b.path)) yield parseLine(line);
      return;
    }
    for (const b of this.buckets) {
      const { lines } = loadBucket(b.path);
      for (let i = 0; i < lines.length; i++) {
        const line = lines[i];
        lines[i] = '';
        yield parseLine(line);
      }
    }
  }

  /** Bucket files after splitting (for tests). */
  get bucketCount(): number {
    return this.buckets.length;
  }

  cleanup(): void {
    rmSync(this.settings.dir, { recursive: true, force: true });
  }
}

/** Top-level fields whose schema doc marks them as timings: "(timing)" or "(timing: ...)". */
export function timingFields(schema: RecordSchema): string[] {
  return Object.entries(schema.fields)
    .filter(([, f]) => /\(timing\b/i.test(f.doc))
    .map(([name]) => name);
}
