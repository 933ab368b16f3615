import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import pl from 'nodejs-polars';
import { describe, expect, it } from 'vitest';
import { writeDataset } from '../datasets/dataset_writer.js';
import { ensureZstd, ParquetFileWriter } from '../datasets/parquet/writer.js';
import { bool, defineSchema, float64, int32, int64, list, nullable, RecordError, string, struct, validateRecord } from '../schemas/schema.js';
import { sql, tempDir } from './helpers.js';

const frameSchema = defineSchema({
  name: 'frames_demo',
  version: 3,
  doc: 'nested rows',
  fields: {
    id: string(),
    n: int64(),
    ok: bool(),
    score: nullable(float64()),
    frames: list(struct({ kind: string(), line: int64(), locals: list(struct({ name: string(), value: string() })) })),
  },
});

const row = (i: number) => ({
  id: `r${i}`,
  n: i * 1_000_000_007,
  ok: i % 2 === 0,
  score: i % 3 ? i / 7 : null,
  frames: Array.from({ length: i % 4 }, (_, j) => ({ kind: j ? 'line' : 'call', line: j + 1, locals: [{ name: 'x', value: String(i + j) }] })),
});

describe('Parquet writing', () => {
  it('writes sharded, row-grouped zstd files that DuckDB reads back exactly, nested columns included', async () => {
    const dir = join(tempDir('parquet'), 'dataset');
    const manifest = await writeDataset(dir, [{ schema: frameSchema, rows: Array.from({ length: 500 }, (_, i) => row(i)) }], {
      shardBytes: 8_000,
      rowGroupRows: 50,
    });
    const shards = manifest.shards;
    expect(shards.length).toBeGreaterThan(1);
    for (const [i, s] of shards.entries())
      expect(s.path).toBe(`frames_demo/data/train-${String(i).padStart(5, '0')}-of-${String(shards.length).padStart(5, '0')}.parquet`);
    const glob = join(dir, 'frames_demo/data/*.parquet');
    const [count] = await sql<{ n: bigint; frames: bigint; x: bigint }>(
      `select count(*) n, sum(len(frames)) frames, (select count(*) from (select unnest(frames, recursive := true) from '${glob}')) x from '${glob}'`,
    );
    expect(count.n).toBe(500n);
    const expectedFrames = Array.from({ length: 500 }, (_, i) => i % 4).reduce((a, b) => a + b, 0);
    expect(count.frames).toBe(BigInt(expectedFrames));
    expect(count.x).toBe(BigInt(expectedFrames));
    const back = await sql<{ id: string; n: bigint; score: number | null; frames: unknown }>(`select id, n, score, frames from '${glob}' where id = 'r7'`);
    expect(back[0]).toEqual({
      id: 'r7',
      n: 7_000_000_049n,
      score: 1,
      frames: [
        { kind: 'call', line: 1n, locals: [{ name: 'x', value: '7' }] },
        { kind: 'line', line: 2n, locals: [{ name: 'x', value: '8' }] },
        { kind: 'line', line: 3n, locals: [{ name: 'x', value: '9' }] },
      ],
    });
    const meta = await sql<{ k: string; v: string }>(
      `select decode(key) as k, decode(value) as v from parquet_kv_metadata('${glob}') where decode(key) = 'worldline.schema_version'`,
    );
    expect(meta.map((m) => m.v)).toEqual(shards.map(() => '3'));
    const rowGroups = await sql<{ files: bigint; n_groups: bigint }>(
      `select count(distinct file_name) files, count(distinct (file_name, row_group_id)) as n_groups from parquet_metadata('${glob}')`,
    );
    expect(rowGroups[0].n_groups).toBe(BigInt(shards.reduce((s, x) => s + x.row_groups, 0)));
    const onDisk = JSON.parse(readFileSync(join(dir, 'manifest.json'), 'utf8'));
    expect(onDisk.configs.frames_demo.rows).toBe(500);
    expect(readFileSync(join(dir, 'README.md'), 'utf8')).toMatch(/config_name: frames_demo/);
  });

  it('rejects a record that does not fit its schema, naming the field and the reason', () => {
    expect(() => validateRecord(frameSchema, { ...row(1), frames: [{ kind: 'call', line: 1.5, locals: [] }] })).toThrow(
      new RecordError('frames_demo', 'frames[0].line', 'expected an integer, got 1.5'),
    );
    expect(() => validateRecord(frameSchema, { ...row(1), extra: 1 })).toThrow(/extra: is not a field of this schema/);
    expect(() => validateRecord(frameSchema, { ...row(1), id: null })).toThrow(/id: is null but the field is not nullable/);
  });

  it('shreds every kind of nesting and null exactly: multi-page, multi-row-group, dictionary and fallback, read back by DuckDB and polars', async () => {
    const edge = defineSchema({
      name: 'edge',
      version: 1,
      doc: 'every nesting the schemas use',
      fields: {
        id: int32(),
        big: int64(),
        flag: bool(),
        score: nullable(float64()),
        tag: nullable(string()),
        tags: nullable(list(nullable(string()))),
        nums: list(int32()),
        obj: nullable(struct({ a: nullable(int64()), b: list(struct({ c: string(), d: nullable(list(bool())) })) })),
      },
    });
    const text = (i: number) => [`v${i}`, 'é', '日本語', 'emoji 🙂', '', `x`.repeat(i % 50)][i % 6] + (i % 7 === 0 ? `-${i * 7919}` : '');
    const rows = Array.from({ length: 1500 }, (_, i) => ({
      id: i,
      big: (i % 2 ? -1 : 1) * (i * 1_000_000_007 + 2 ** 40),
      flag: i % 3 === 0,
      score: i % 5 ? i / 4 : null,
      // low cardinality first, then every value distinct: the dictionary falls back mid-row-group
      tag: i % 9 === 0 ? null : i < 600 ? ['call', 'line', 'return'][i % 3] : `distinct-${i}-${text(i)}`,
      tags: i % 4 === 0 ? null : Array.from({ length: i % 5 }, (_, j) => (j % 3 === 1 ? null : text(i + j))),
      nums: Array.from({ length: i % 6 }, (_, j) => (j % 2 ? -j : i + j)),
      obj:
        i % 6 === 0
          ? null
          : {
              a: i % 4 ? i * 3 : null,
              b: Array.from({ length: i % 3 }, (_, j) => ({
                c: text(i * j),
                d: j % 2 ? null : Array.from({ length: (i + j) % 4 }, (_, k) => (i + k) % 2 === 0),
              })),
            },
    }));
    await ensureZstd();
    const expected = rows.map((r) => JSON.parse(JSON.stringify(r)));
    // 400-row groups: dictionaries dropped at flush; one 1500-row group: dropped mid-group (tag).
    for (const rowGroupRows of [400, 1500]) {
      const path = join(tempDir('parquet-edge'), `edge-${rowGroupRows}.parquet`);
      const w = new ParquetFileWriter(path, edge, { rowGroupRows, pageSize: 2_000 });
      for (const r of rows) w.write(r);
      const f = w.close();
      expect(f).toMatchObject({ rows: 1500, rowGroups: Math.ceil(1500 / rowGroupRows) });
      const duck = await sql<{ j: string }>(`select to_json(t) j from '${path}' t order by id`);
      expect(duck.map((x) => JSON.parse(x.j))).toEqual(expected);
      const lines = pl.readParquet(path).writeJSON({ format: 'lines' }).toString().trim().split('\n');
      expect(lines.map((l) => JSON.parse(l))).toEqual(expected);
      if (rowGroupRows === 400) {
        const pages = await sql<{ n: bigint }>(`select count(*) n from parquet_metadata('${path}') where path_in_schema = 'tags, list, element'`);
        expect(pages[0].n).toBe(4n);
        const stats = await sql<{ lo: string; hi: string; nn: bigint }>(
          `select stats_min_value lo, stats_max_value hi, stats_null_count nn from parquet_metadata('${path}') where path_in_schema = 'id' order by row_group_id`,
        );
        expect(stats.map((s) => [s.lo, s.hi, s.nn])).toEqual([
          ['0', '399', 0n],
          ['400', '799', 0n],
          ['800', '1199', 0n],
          ['1200', '1499', 0n],
        ]);
      }
    }
  });
});
