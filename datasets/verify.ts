/**
 * `worldline verify`: everything a trainer relies on, checked against manifest.json: every
 * shard present with its size and sha256, readable by DuckDB with the row and row-group counts
 * the manifest gives, one schema across a config's shards, and every nested column unnestable.
 */
import { createHash } from 'node:crypto';
import { createReadStream, existsSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { sqlString, withDuckDB } from './duckdb.js';
import { readManifestJson } from './reader.js';

export interface VerifyReport {
  ok: boolean;
  shards: number;
  rows: number;
  problems: string[];
}

async function sha256File(path: string): Promise<string> {
  const hash = createHash('sha256');
  for await (const chunk of createReadStream(path)) hash.update(chunk as Buffer);
  return hash.digest('hex');
}

export async function verifyDataset(datasetDir: string): Promise<VerifyReport> {
  const manifest = readManifestJson(datasetDir);
  const problems: string[] = [];
  let rows = 0;
  const readable: typeof manifest.shards = [];
  for (const shard of manifest.shards) {
    const path = join(datasetDir, shard.path);
    if (!existsSync(path)) {
      problems.push(`${shard.path}: missing (the manifest lists it)`);
      continue;
    }
    const size = statSync(path).size;
    if (size < shard.bytes) {
      problems.push(`${shard.path}: truncated: ${size} of ${shard.bytes} bytes`);
      continue;
    }
    if (size > shard.bytes) problems.push(`${shard.path}: ${size} bytes, the manifest says ${shard.bytes}`);
    const sum = await sha256File(path);
    if (sum !== shard.sha256)
      problems.push(`${shard.path}: sha256 mismatch: the manifest says ${shard.sha256}, the file hashes to ${sum} (corrupted or changed after writing)`);
    readable.push(shard);
  }
  await withDuckDB(async (conn) => {
    const schemaByConfig = new Map<string, string>();
    for (const shard of readable) {
      const path = sqlString(join(datasetDir, shard.path));
      try {
        const meta = (
          await conn.runAndReadAll(
            `select count(distinct row_group_id)::int as groups, coalesce(sum(row_group_num_rows) filter (where column_id = 0), 0)::bigint as n from parquet_metadata(${path})`,
          )
        ).getRowObjectsJS()[0] as { groups: number; n: bigint };
        if (Number(meta.n) !== shard.rows) problems.push(`${shard.path}: ${meta.n} rows, the manifest says ${shard.rows}`);
        if (meta.groups !== shard.row_groups) problems.push(`${shard.path}: ${meta.groups} row groups, the manifest says ${shard.row_groups}`);
        const kv = (
          await conn.runAndReadAll(`select decode(value) as v from parquet_kv_metadata(${path}) where decode(key) = 'worldline.schema_hash'`)
        ).getRowObjectsJS() as { v: string }[];
        if (kv[0]?.v !== shard.schema_hash) problems.push(`${shard.path}: schema hash ${kv[0]?.v ?? '(none)'}, the manifest says ${shard.schema_hash}`);
        const schema = JSON.stringify(
          (await conn.runAndReadAll(`select name, type, repetition_type, converted_type, num_children from parquet_schema(${path})`)).getRowsJson(),
        );
        const first = schemaByConfig.get(shard.config);
        if (first === undefined) schemaByConfig.set(shard.config, schema);
        else if (first !== schema) problems.push(`${shard.path}: its Parquet schema differs from the first shard of config ${shard.config}`);
        const columns = (await conn.runAndReadAll(`describe select * from read_parquet(${path})`)).getRowObjectsJS() as {
          column_name: string;
          column_type: string;
        }[];
        // Decoding every value of every column, nested ones through unnest, proves the pages are sound.
        for (const c of columns) {
          const col = `"${c.column_name.replace(/"/g, '""')}"`;
          const decode = c.column_type.endsWith('[]')
            ? `select count(*) from (select unnest(${col}, recursive := true) from read_parquet(${path}))`
            : `select count(${col}) from read_parquet(${path})`;
          await conn.run(decode);
        }
        rows += shard.rows;
      } catch (e) {
        problems.push(`${shard.path}: DuckDB cannot read it: ${(e as Error).message.split('\n')[0]}`);
      }
    }
  });
  for (const [config, info] of Object.entries(manifest.configs)) {
    const listed = manifest.shards.filter((s) => s.config === config);
    const total = listed.reduce((s, x) => s + x.rows, 0);
    if (listed.length !== info.shards) problems.push(`config ${config}: ${listed.length} shards listed, the summary says ${info.shards}`);
    if (total !== info.rows) problems.push(`config ${config}: shards hold ${total} rows, the summary says ${info.rows}`);
  }
  return { ok: problems.length === 0, shards: manifest.shards.length, rows, problems };
}

/** The report as text: a FAIL line per problem, then the verdict. */
export function formatVerify(r: VerifyReport): string {
  return [
    ...r.problems.map((p) => `FAIL ${p}`),
    `${r.ok ? 'OK' : 'FAILED'}: ${r.shards} shard(s), ${r.rows} row(s) verified, ${r.problems.length} problem(s)`,
  ].join('\n');
}
