/**
 * Reading a dataset from Node: rows streamed shard by shard through DuckDB with bounded memory,
 * and whole shards assigned to ranks the way trainers' loaders assign them.
 */
import { readFileSync } from 'node:fs';
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
  const cols = opts.columns?.length ? opts.columns.map((c) => `"${c.replace(/"/g, '""')}"`).join(', ') : '*';
  let left = opts.limit ?? Infinity;
  for (const shard of shards) {
    if (left <= 0) return;
    for await (const row of streamShard(join(datasetDir, shard.path), cols, left)) {
      yield row;
      if (--left <= 0) return;
    }
  }
}

async function* streamShard(path: string, cols: string, limit: number): AsyncGenerator<Record<string, unknown>> {
  // A generator cannot live inside withDuckDB's callback, so it owns its instance.
  const instance = await DuckDBInstance.create(':memory:', { memory_limit: '512MB', threads: '1' });
  const conn = await instance.connect();
  try {
    const sql = `select ${cols} from read_parquet(${sqlString(path)})${Number.isFinite(limit) ? ` limit ${limit}` : ''}`;
    const result = await conn.stream(sql);
    for await (const chunk of result.yieldRowObjectJs()) for (const row of chunk) yield plain(row) as Record<string, unknown>;
  } finally {
    conn.closeSync();
    instance.closeSync();
  }
}
