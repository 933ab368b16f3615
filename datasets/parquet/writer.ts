/**
 * A streaming Parquet writer of bounded memory. Rows are shredded as they arrive into per-leaf
 * column buffers (repetition and definition levels as bytes, values already in their Parquet
 * encoding: UTF-8 PLAIN byte arrays, dictionary indexes, little-endian numbers), so no row object
 * is kept. When a row group is full (rows or estimated uncompressed bytes), each leaf becomes a
 * column chunk of data pages (v1: RLE levels and values, zstd) written straight to the file; the
 * buffers are reused for the next row group. hyparquet-writer provides the file framing (magic,
 * page headers, page indexes, footer and key-value metadata).
 *
 * Shredding (and the online per-leaf dictionary choice) is in columns.ts, byte encodings in encoding.ts.
 */

import { statSync } from 'node:fs';
import { compress as zstdCompress, init as zstdInit } from '@bokuweb/zstd-wasm';
import type { ColumnChunk, Encoding, OffsetIndex } from 'hyparquet';
import { fileWriter, ParquetWriter } from 'hyparquet-writer';
import { writePageHeader } from 'hyparquet-writer/src/datapage.js';
import { sha256 } from '../../core/hashing.js';
import { parquetSchema, type RecordSchema } from '../../schemas/schema.js';
import { compileEstimator, compileValidator } from '../fast_validate.js';
import { compileField, type Leaf } from './columns.js';
import { Bytes, bitWidth, littleEndian, rleHybrid } from './encoding.js';

/** zstd level of data pages. Measured on 0.5 GB of trace rows: 1 is 4% larger and no faster; 6 is 8% smaller but 44% slower. */
export const ZSTD_LEVEL = 3;

let zstdReady: Promise<void> | undefined;
export function ensureZstd(): Promise<void> {
  zstdReady ??= zstdInit();
  return zstdReady;
}

interface WriterOptions {
  /** At most this many rows per row group. */
  rowGroupRows?: number;
  /** At most about this many uncompressed bytes per row group. */
  rowGroupBytes?: number;
  /** Target uncompressed bytes per data page (default 8 MB: zstd compresses long pages much better). */
  pageSize?: number;
  /** zstd level (default ZSTD_LEVEL). */
  zstdLevel?: number;
  /** Dictionary-encode string leaves where it pays (default true). */
  dictionary?: boolean;
  /** Extra key-value metadata. */
  metadata?: Record<string, string>;
}

export const DEFAULT_ROW_GROUP_ROWS = 10_000;
/**
 * 32 MiB of estimated uncompressed bytes per row group: well under the ~100 MB cap Hugging Face's
 * viewer and conventions ask for (shared/research/dataset-conventions.md). The writer holds one
 * row group in its encoded form (about its uncompressed size), not as JS objects.
 */
export const DEFAULT_ROW_GROUP_BYTES = 32 << 20;
/** Measured: 1 MB -> 8 MB pages cut a zstd trace file from 96.6 to 57.7 MB at no speed cost. */
export const DEFAULT_PAGE_SIZE = 8 << 20;

/** Schema identity across shards: the hash of the Parquet schema elements and version. */
export function schemaHash(s: RecordSchema): string {
  return sha256(JSON.stringify({ version: s.version, elements: parquetSchema(s) })).slice(0, 16);
}

// ---------------------------------------------------------------------------------------------
// The writer

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
  private readonly leaves: Leaf[] = [];
  private readonly shred: (row: Record<string, unknown>) => void;
  private bufferRows = 0;
  private bufferBytes = 0;
  private rows = 0;
  private rowGroups = 0;
  private uncompressed = 0;
  private readonly rowGroupRows: number;
  private readonly rowGroupBytes: number;
  private readonly pageSize: number;
  private readonly level: number;
  private readonly dictionary: boolean;
  private readonly validate: (record: unknown) => void;
  private readonly estimate: (row: Record<string, unknown>) => number;
  private readonly scratch = new Bytes(1 << 16);

  /** Call `await ensureZstd()` once before constructing. */
  constructor(
    readonly path: string,
    readonly schema: RecordSchema,
    opts: WriterOptions = {},
  ) {
    this.rowGroupRows = opts.rowGroupRows ?? DEFAULT_ROW_GROUP_ROWS;
    this.rowGroupBytes = opts.rowGroupBytes ?? DEFAULT_ROW_GROUP_BYTES;
    this.pageSize = opts.pageSize ?? DEFAULT_PAGE_SIZE;
    this.level = opts.zstdLevel ?? ZSTD_LEVEL;
    this.dictionary = opts.dictionary ?? true;
    this.validate = compileValidator(schema);
    this.estimate = compileEstimator(schema);
    const names = Object.keys(schema.fields);
    // Min/max statistics only for top-level scalar columns: nobody prunes on nested leaves.
    const emits = names.map((n) => compileField(schema.fields[n], [n], 0, 0, true, this.leaves, this.dictionary).emit);
    const k = names.length;
    const leaves = this.leaves;
    this.shred = (row) => {
      for (const l of leaves) l.startRow();
      for (let i = 0; i < k; i++) emits[i](row[names[i]], 0, 0);
    };
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
      kvMetadata: Object.entries(metadata).map(([key, value]) => ({ key, value })),
      createdBy: 'worldline',
    });
  }

  /** Validates and buffers one row; writes a row group when a cap is reached. */
  write(row: Record<string, unknown>): void {
    this.validate(row);
    this.writeValidated(row, this.estimate(row));
  }

  /** Buffers a row the caller has already validated and sized with `compileEstimator`. */
  writeValidated(row: Record<string, unknown>, size: number): void {
    if (this.bufferRows && this.bufferBytes + size > this.rowGroupBytes) this.flush();
    this.shred(row);
    this.bufferRows++;
    this.bufferBytes += size;
    if (this.bufferRows >= this.rowGroupRows) this.flush();
  }

  /** Estimated uncompressed bytes so far, buffered rows included. */
  get size(): number {
    return this.uncompressed + this.bufferBytes;
  }

  get rowCount(): number {
    return this.rows + this.bufferRows;
  }

  private compress(data: Uint8Array): Uint8Array {
    return zstdCompress(data, this.level);
  }

  /** One column chunk: an optional dictionary page, then data pages split at row boundaries. */
  private writeChunk(leaf: Leaf, rows: number): { chunk: ColumnChunk; offsetIndex?: OffsetIndex } {
    const w = this.writer.writer;
    const start = w.offset;
    let uncompressed = 0;
    const dict = leaf.usesDictionary;
    const type = leaf.element.type!;
    let dictionary_page_offset: bigint | undefined;
    if (dict) {
      dictionary_page_offset = BigInt(w.offset);
      const raw = leaf.kind === 'string' ? leaf.dictBytes.view() : littleEndian(leaf.dictInts.bytes(0, leaf.dictInts.len), 4);
      const packed = this.compress(raw);
      const h0 = w.offset;
      writePageHeader(w, {
        type: 'DICTIONARY_PAGE',
        uncompressed_page_size: raw.length,
        compressed_page_size: packed.length,
        dictionary_page_header: { num_values: leaf.dictSize, encoding: 'PLAIN' },
      });
      uncompressed += w.offset - h0 + raw.length;
      w.appendBytes(packed);
    }
    const encoding: Encoding = dict ? 'RLE_DICTIONARY' : 'PLAIN';
    const valueSize = leaf.kind === 'string' && !dict ? 0 : leaf.kind === 'int64' || leaf.kind === 'float64' ? 8 : leaf.kind === 'bool' ? 1 : 4;
    const data_page_offset = BigInt(w.offset);
    const pages: { offset: bigint; compressed_page_size: number; first_row_index: bigint }[] = [];
    // page boundaries at rows
    const rowValue = leaf.rowValue;
    const rowByte = leaf.rowByte;
    const rowSlot = leaf.rowSlot;
    const endValue = leaf.values;
    const endByte = leaf.plain.len;
    const endSlot = leaf.slots;
    let r0 = 0;
    while (r0 < rows) {
      let r1 = r0 + 1;
      const budget = this.pageSize;
      const v0 = rowValue[r0];
      const b0 = rowByte[r0];
      while (r1 < rows) {
        const bytes = valueSize ? (rowValue[r1] - v0) * valueSize : rowByte[r1] - b0;
        if (bytes >= budget) break;
        r1++;
      }
      const s0 = rowSlot[r0];
      const s1 = r1 < rows ? rowSlot[r1] : endSlot;
      const v1 = r1 < rows ? rowValue[r1] : endValue;
      const b1 = r1 < rows ? rowByte[r1] : endByte;
      const offset = w.offset;
      uncompressed += this.writePage(leaf, encoding, s0, s1, v0, v1, b0, b1);
      pages.push({ offset: BigInt(offset), compressed_page_size: w.offset - offset, first_row_index: BigInt(r0) });
      r0 = r1;
    }
    const chunk: ColumnChunk = {
      file_offset: BigInt(start),
      meta_data: {
        type,
        encodings: dict ? ['PLAIN', 'RLE', 'RLE_DICTIONARY'] : ['PLAIN', 'RLE'],
        path_in_schema: leaf.path,
        codec: 'ZSTD',
        num_values: BigInt(leaf.slots),
        total_uncompressed_size: BigInt(uncompressed),
        total_compressed_size: BigInt(w.offset - start),
        data_page_offset,
        dictionary_page_offset,
        statistics: leaf.stats
          ? ({
              null_count: BigInt(leaf.nulls),
              min_value: leaf.min === 0 ? -0 : (leaf.min as never),
              max_value: leaf.max === 0 ? 0 : (leaf.max as never),
              ...(leaf.kind === 'float64' ? { nan_count: 0n } : {}),
            } as NonNullable<ColumnChunk['meta_data']>['statistics'])
          : undefined,
        encoding_stats: [
          ...(dict ? [{ page_type: 'DICTIONARY_PAGE' as const, encoding: 'PLAIN' as const, count: 1 }] : []),
          { page_type: 'DATA_PAGE' as const, encoding, count: pages.length },
        ],
      },
    };
    return { chunk, offsetIndex: pages.length > 1 ? { page_locations: pages } : undefined };
  }

  /**
   * A data page (v1): repetition and definition levels (RLE hybrid, each after its u32 length)
   * and values, compressed together. v2 pages leave levels uncompressed, which costs ~10% of a
   * trace file (locals' levels do not run-length encode well but zstd shrinks them).
   */
  private writePage(leaf: Leaf, encoding: Encoding, s0: number, s1: number, v0: number, v1: number, b0: number, b1: number): number {
    const w = this.writer.writer;
    const out = this.scratch;
    out.len = 0;
    const lengthPrefixed = (levels: Buffer, max: number) => {
      out.ensure(4);
      const at = out.len;
      out.len += 4;
      const n = rleHybrid(out, levels, s0, s1, bitWidth(max));
      out.buf.writeUInt32LE(n, at);
    };
    if (leaf.maxRep) lengthPrefixed(leaf.reps.buf, leaf.maxRep);
    if (leaf.maxDef) lengthPrefixed(leaf.defs.buf, leaf.maxDef);
    const append = (bytes: Uint8Array) => {
      out.ensure(bytes.length);
      out.buf.set(bytes, out.len);
      out.len += bytes.length;
    };
    if (encoding === 'RLE_DICTIONARY') {
      const width = Math.max(1, bitWidth(leaf.dictSize - 1));
      out.push(width);
      rleHybrid(out, leaf.ints.arr, v0, v1, width);
    } else {
      switch (leaf.kind) {
        case 'string':
          append(leaf.plain.view(b0, b1));
          break;
        case 'int32':
          append(littleEndian(leaf.ints.bytes(v0, v1), 4));
          break;
        case 'int64':
          append(littleEndian(leaf.ints.bytes(2 * v0, 2 * v1), 4));
          break;
        case 'float64':
          append(littleEndian(new Uint8Array(leaf.floats.arr.buffer, v0 * 8, (v1 - v0) * 8), 8));
          break;
        case 'bool': {
          out.ensure(((v1 - v0) >> 3) + 1);
          const src = leaf.plain.buf;
          let acc = 0;
          let k = 0;
          for (let i = v0; i < v1; i++) {
            acc |= src[i] << k;
            if (++k === 8) {
              out.buf[out.len++] = acc;
              acc = 0;
              k = 0;
            }
          }
          if (k) out.buf[out.len++] = acc;
          break;
        }
      }
    }
    const raw = out.view();
    const packed = this.compress(raw);
    const h0 = w.offset;
    writePageHeader(w, {
      type: 'DATA_PAGE',
      uncompressed_page_size: raw.length,
      compressed_page_size: packed.length,
      data_page_header: {
        num_values: s1 - s0,
        encoding,
        definition_level_encoding: 'RLE',
        repetition_level_encoding: 'RLE',
      },
    });
    const header = w.offset - h0;
    w.appendBytes(packed);
    return header + raw.length;
  }

  private flush(): void {
    if (!this.bufferRows) return;
    const rows = this.bufferRows;
    const w = this.writer.writer;
    const groupStart = w.offset;
    const columns: ColumnChunk[] = [];
    for (const leaf of this.leaves) {
      // A dictionary that did not at least halve the PLAIN bytes is not worth its page.
      if (leaf.usesDictionary) {
        const n = leaf.dictSize;
        const indexBytes = Math.ceil((leaf.values * Math.max(1, bitWidth(n - 1))) / 8);
        const dictBytes = leaf.kind === 'string' ? leaf.dictBytes.len : 4 * n;
        const plainBytes = leaf.kind === 'string' ? leaf.plainBytes : 4 * leaf.values;
        if (2 * (dictBytes + indexBytes) > plainBytes) leaf.toPlain(false);
      }
      const res = this.writeChunk(leaf, rows);
      columns.push(res.chunk);
      this.writer.pendingIndexes.push({ chunk: res.chunk, offsetIndex: res.offsetIndex });
      leaf.reset(this.dictionary);
    }
    let total = 0n;
    for (const c of columns) total += c.meta_data!.total_uncompressed_size;
    this.writer.row_groups.push({
      columns,
      total_byte_size: total,
      num_rows: BigInt(rows),
      total_compressed_size: BigInt(w.offset - groupStart),
    });
    this.writer.num_rows += BigInt(rows);
    this.rows += rows;
    this.rowGroups += 1;
    this.uncompressed += this.bufferBytes;
    this.bufferRows = 0;
    this.bufferBytes = 0;
  }

  close(): WrittenFile {
    this.flush();
    this.writer.finish();
    return { path: this.path, rows: this.rows, rowGroups: this.rowGroups, uncompressedBytes: this.uncompressed, bytes: statSync(this.path).size };
  }
}
