/**
 * A streaming Parquet writer of bounded memory: rows are buffered only up to one row group
 * (capped by rows and by estimated uncompressed bytes), encoded by hyparquet-writer, compressed
 * with zstd, and flushed to disk; nothing else of the file stays in memory.
 */
import { init as zstdInit, compress as zstdCompress } from '@bokuweb/zstd-wasm';
import { ParquetWriter, fileWriter } from 'hyparquet-writer';
import { statSync } from 'node:fs';
import { sha256 } from '../pipeline/hashing.js';
import { parquetSchema, type Field, type RecordSchema } from '../schemas/schema.js';
import { compileValidator } from './fast_validate.js';

export const ZSTD_LEVEL = 3;

let zstdReady: Promise<void> | undefined;
export function ensureZstd(): Promise<void> {
  zstdReady ??= zstdInit();
  return zstdReady;
}

export interface WriterOptions {
  /** At most this many rows per row group. */
  rowGroupRows?: number;
  /** At most about this many uncompressed bytes per row group. */
  rowGroupBytes?: number;
  /** Target uncompressed bytes per data page (default 8 MB: zstd compresses long pages much better). */
  pageSize?: number;
  /** Extra key-value metadata. */
  metadata?: Record<string, string>;
}

export const DEFAULT_ROW_GROUP_ROWS = 10_000;
/**
 * 32 MiB of estimated uncompressed bytes per row group: well under the ~100 MB cap Hugging Face's
 * viewer and conventions ask for (shared/research/dataset-conventions.md), and what keeps the
 * writer's peak RSS under 1 GB on trace rows (a buffered row group costs several times its size
 * as JS objects while hyparquet-writer shreds it; bench/shards.ts measures it).
 */
export const DEFAULT_ROW_GROUP_BYTES = 32 << 20;
/** Measured: 1 MB -> 8 MB pages cut a zstd trace file from 96.6 to 57.7 MB at no speed cost. */
export const DEFAULT_PAGE_SIZE = 8 << 20;

/** Schema identity across shards: the hash of the Parquet schema elements and version. */
export function schemaHash(s: RecordSchema): string {
  return sha256(JSON.stringify({ version: s.version, elements: parquetSchema(s) })).slice(0, 16);
}

/** Uncompressed size estimate: cheap enough to run per row, close enough to cap row groups. */
export function estimateBytes(f: Field, v: unknown): number {
  if (v === null || v === undefined) return 1;
  const t = f.type;
  switch (t.kind) {
    case 'string':
      return (v as string).length + 4;
    case 'list': {
      let n = 4;
      for (const item of v as unknown[]) n += estimateBytes(t.of, item);
      return n;
    }
    case 'struct': {
      let n = 0;
      for (const name in t.fields) n += estimateBytes(t.fields[name], (v as Record<string, unknown>)[name]);
      return n;
    }
    case 'bool':
      return 1;
    default:
      return 8;
  }
}

export function estimateRow(s: RecordSchema, row: Record<string, unknown>): number {
  let n = 0;
  for (const name in s.fields) n += estimateBytes(s.fields[name], row[name]);
  return n;
}

/** hyparquet-writer takes INT64 as bigint; our records carry safe integers as numbers. */
function needsConversion(f: Field): boolean {
  const t = f.type;
  if (t.kind === 'int64') return true;
  if (t.kind === 'list') return needsConversion(t.of);
  if (t.kind === 'struct') return Object.values(t.fields).some(needsConversion);
  return false;
}

function toParquet(f: Field, v: unknown): unknown {
  if (v === null || v === undefined) return null;
  const t = f.type;
  switch (t.kind) {
    case 'int64':
      return BigInt(v as number);
    case 'list':
      return needsConversion(t.of) ? (v as unknown[]).map((x) => toParquet(t.of, x)) : v;
    case 'struct': {
      if (!needsConversion(f)) return v;
      const out: Record<string, unknown> = {};
      for (const name in t.fields) out[name] = toParquet(t.fields[name], (v as Record<string, unknown>)[name]);
      return out;
    }
    default:
      return v;
  }
}

export interface WrittenFile {
  path: string;
  rows: number;
  rowGroups: number;
  /** Estimated uncompressed bytes written. */
  uncompressedBytes: number;
  bytes: number;
}

export class ParquetFileWriter {
  private readonly writer: ParquetWriter;
  private buffer: Record<string, unknown>[] = [];
  private bufferBytes = 0;
  private rows = 0;
  private rowGroups = 0;
  private uncompressed = 0;
  private readonly rowGroupRows: number;
  private readonly rowGroupBytes: number;
  private readonly pageSize: number;
  private readonly convert: Set<string>;
  private readonly validate: (record: unknown) => void;
  /** Min/max statistics only for top-level scalar columns: nobody prunes on nested leaves, and they cost ~5%. */
  private readonly stats: Set<string>;

  /** Call `await ensureZstd()` once before constructing. */
  constructor(
    readonly path: string,
    readonly schema: RecordSchema,
    opts: WriterOptions = {},
  ) {
    this.rowGroupRows = opts.rowGroupRows ?? DEFAULT_ROW_GROUP_ROWS;
    this.rowGroupBytes = opts.rowGroupBytes ?? DEFAULT_ROW_GROUP_BYTES;
    this.pageSize = opts.pageSize ?? DEFAULT_PAGE_SIZE;
    this.validate = compileValidator(schema);
    this.stats = new Set(Object.entries(schema.fields).filter(([, f]) => f.type.kind !== 'list' && f.type.kind !== 'struct').map(([n]) => n));
    this.convert = new Set(Object.entries(schema.fields).filter(([, f]) => needsConversion(f)).map(([n]) => n));
    const metadata = {
      'worldline.schema': schema.name,
      'worldline.schema_version': String(schema.version),
      'worldline.schema_hash': schemaHash(schema),
      ...opts.metadata,
    };
    this.writer = new ParquetWriter({
      writer: fileWriter(path),
      schema: parquetSchema(schema),
      codec: 'ZSTD',
      compressors: { ZSTD: (input: Uint8Array) => zstdCompress(input, ZSTD_LEVEL) },
      kvMetadata: Object.entries(metadata).map(([key, value]) => ({ key, value })),
      createdBy: 'worldline',
    });
  }

  /** Validates and buffers one row; writes a row group when a cap is reached. */
  write(row: Record<string, unknown>): void {
    this.validate(row);
    this.writeValidated(row, estimateRow(this.schema, row));
  }

  /** Buffers a row the caller has already validated and sized with `estimateRow`. */
  writeValidated(row: Record<string, unknown>, size: number): void {
    if (this.buffer.length && this.bufferBytes + size > this.rowGroupBytes) this.flush();
    this.buffer.push(row);
    this.bufferBytes += size;
    if (this.buffer.length >= this.rowGroupRows) this.flush();
  }

  /** Estimated uncompressed bytes so far, buffered rows included. */
  get size(): number {
    return this.uncompressed + this.bufferBytes;
  }

  get rowCount(): number {
    return this.rows + this.buffer.length;
  }

  private flush(): void {
    if (!this.buffer.length) return;
    const rows = this.buffer;
    const columnData = Object.entries(this.schema.fields).map(([name, f]) => ({
      name,
      statistics: this.stats.has(name),
      data: this.convert.has(name) ? rows.map((r) => toParquet(f, r[name])) : rows.map((r) => r[name] ?? null),
    }));
    this.writer.write({ columnData, rowGroupSize: rows.length, pageSize: this.pageSize });
    this.rows += rows.length;
    this.rowGroups += 1;
    this.uncompressed += this.bufferBytes;
    this.buffer = [];
    this.bufferBytes = 0;
  }

  close(): WrittenFile {
    this.flush();
    this.writer.finish();
    return { path: this.path, rows: this.rows, rowGroups: this.rowGroups, uncompressedBytes: this.uncompressed, bytes: statSync(this.path).size };
  }
}
