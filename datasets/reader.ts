/**
 * Reading a dataset from Node: rows streamed shard by shard through DuckDB with bounded memory,
 * and whole shards assigned to ranks the way trainers' loaders assign them.
 */
import { readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { DuckDBInstance } from '@duckdb/node-api';
import type { DatasetManifest, ShardEntry } from './dataset_writer.js';
import { sqlString } from './duckdb.js';

export function readManifestJson(datasetDir: string): DatasetManifest {
  const file = join(datasetDir, 'manifest.json');
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (e) {
    throw new Error(`${file}: cannot read the dataset manifest (${(e as NodeJS.ErrnoException).code ?? (e as Error).message})`);
  }
  try {
    return JSON.parse(text) as DatasetManifest;
  } catch (e) {
    throw new Error(`${file}: not valid JSON (${(e as Error).message})`);
  }
}

/**
 * A shard that is not what the dataset's manifest says (missing, truncated, unreadable): the
 * message names the file and the command that checks them all, instead of a reader's own words.
 */
export class DatasetDamaged extends Error {
  constructor(datasetDir: string, file: string, what: string) {
    super(`${file}: ${what}; run worldline verify ${datasetDir} to check every shard (then shard the output folder again, or copy the dataset anew)`);
  }
}

/**
 * Every listed shard is present with the size the manifest gives: a stat per shard, cheap
 * enough for every read (`verify` also hashes and decodes them).
 */
export function checkShards(datasetDir: string, shards: ShardEntry[]): void {
  for (const shard of shards) {
    const file = join(datasetDir, shard.path);
    const size = statSync(file, { throwIfNoEntry: false })?.size;
    if (size === undefined) throw new DatasetDamaged(datasetDir, file, 'missing (manifest.json lists it)');
    if (size !== shard.bytes) throw new DatasetDamaged(datasetDir, file, `${size} bytes, manifest.json says ${shard.bytes} (truncated or changed)`);
  }
}

/**
 * `e` from DuckDB reading a dataset, as DatasetDamaged when it failed on a file (naming `file`,
 * or the Parquet file the message names) rather than on the query (a column that does not exist).
 */
export function asDamaged(datasetDir: string, e: unknown, file?: string): unknown {
  const message = (e as Error).message ?? String(e);
  if (/^(Binder|Parser|Catalog) Error/.test(message)) return e;
  const named = file ?? /'([^']+\.parquet)'/.exec(message)?.[1] ?? /(\S+\.parquet)/.exec(message)?.[1] ?? join(datasetDir, '(a shard)');
  return new DatasetDamaged(datasetDir, named, `cannot be read (${message.split('\n')[0]})`);
}

/** Runs a read of `file`, a failure on the file rethrown as DatasetDamaged. */
async function readingShard<T>(datasetDir: string, file: string, read: () => Promise<T>): Promise<T> {
  try {
    return await read();
  } catch (e) {
    throw asDamaged(datasetDir, e, file);
  }
}

/** Whole shards per rank, round robin, in manifest order; every shard has exactly one rank. */
export function shardsForRank(shards: ShardEntry[], rank: number, worldSize: number): ShardEntry[] {
  if (!Number.isInteger(worldSize) || worldSize < 1) throw new Error(`worldSize must be a positive integer (got ${worldSize})`);
  if (!Number.isInteger(rank) || rank < 0 || rank >= worldSize) throw new Error(`rank must be in 0..${worldSize - 1} (got ${rank})`);
  return shards.filter((_, i) => i % worldSize === rank);
}

/** DuckDB hands INT64 back as bigint; our values are safe integers, so give plain numbers. */
export function plain(v: unknown): unknown {
  if (typeof v === 'bigint') return Number(v);
  if (Array.isArray(v)) return v.map(plain);
  if (v && typeof v === 'object') {
    const out: Record<string, unknown> = {};
    for (const [k, x] of Object.entries(v)) out[k] = plain(x);
    return out;
  }
  return v;
}

export interface ReadOptions {
  config: string;
  rank?: number;
  worldSize?: number;
  limit?: number;
  columns?: string[];
}

/** Streams the rows of one config (this rank's shards), one DuckDB chunk in memory at a time. */
export async function* readRows(datasetDir: string, opts: ReadOptions): AsyncGenerator<Record<string, unknown>> {
  const manifest = readManifestJson(datasetDir);
  if (!manifest.configs[opts.config]) {
    throw new Error(`${datasetDir} has no config "${opts.config}" (configs: ${Object.keys(manifest.configs).join(', ')})`);
  }
  const shards = shardsForRank(
    manifest.shards.filter((s) => s.config === opts.config),
    opts.rank ?? 0,
    opts.worldSize ?? 1,
  );
  checkShards(datasetDir, shards);
  const cols = opts.columns?.length ? opts.columns.map((c) => `"${c.replace(/"/g, '""')}"`).join(', ') : '*';
  let left = opts.limit ?? Infinity;
  for (const shard of shards) {
    if (left <= 0) return;
    for await (const row of streamShard(datasetDir, join(datasetDir, shard.path), cols, left)) {
      yield row;
      if (--left <= 0) return;
    }
  }
}

async function* streamShard(datasetDir: string, path: string, cols: string, limit: number): AsyncGenerator<Record<string, unknown>> {
  // A generator cannot live inside withDuckDB's callback, so it owns its instance.
  const instance = await DuckDBInstance.create(':memory:', { memory_limit: '512MB', threads: '1' });
  const conn = await instance.connect();
  try {
    const sql = `select ${cols} from read_parquet(${sqlString(path)})${Number.isFinite(limit) ? ` limit ${limit}` : ''}`;
    const result = await readingShard(datasetDir, path, () => conn.stream(sql));
    const chunks = result.yieldRowObjectJs()[Symbol.asyncIterator]();
    for (;;) {
      const next = await readingShard(datasetDir, path, () => chunks.next());
      if (next.done) break;
      for (const row of next.value) yield plain(row) as Record<string, unknown>;
    }
  } finally {
    conn.closeSync();
    instance.closeSync();
  }
}
