/**
 * The dataset writer's layout guarantees, checked through two independent readers (DuckDB and
 * polars): shard counts (byte target, numShards, shardMultiple) with balanced rows, a seeded
 * global shuffle that is byte-for-byte deterministic, exact dedup, rejection of oversize and
 * invalid rows, row-group byte caps, HF naming and metadata, manifest checksums.
 */
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import pl from 'nodejs-polars';
import { describe, expect, it } from 'vitest';
import { mulberry32 as nextUint32 } from '../core/prng.js';
import { type DatasetManifest, type DatasetOptions, writeDataset } from '../datasets/dataset_writer.js';
import { hfFeatureDict } from '../datasets/hf_features.js';
import { SpilledConfig } from '../datasets/spill.js';
import { verifyDataset } from '../datasets/verify.js';
import { type TestRecord, testsSchema } from '../schemas/index.js';
import { defineSchema, float64, int32, list, nullable, type RecordSchema, string, struct } from '../schemas/schema.js';
import { sql, tempDir } from './helpers.js';

/** Trace-like rows: frames as list<struct{..., locals: list<struct{name, value}>}>. */
const traceSchema = defineSchema({
  name: 'traces_demo',
  version: 1,
  doc: 'trace-like rows',
  fields: {
    unit_id: string(),
    repo: string(),
    node_id: string(),
    frames: list(
      struct({
        kind: string(),
        line: int32(),
        depth: int32(),
        function: string(),
        locals: list(struct({ name: string(), value: string() })),
        value: nullable(string()),
      }),
    ),
    duration_seconds: float64('Wall time of the traced run (timing)'),
  },
});

type TraceRow = {
  unit_id: string;
  repo: string;
  node_id: string;
  frames: { kind: string; line: number; depth: number; function: string; locals: { name: string; value: string }[]; value: string | null }[];
  duration_seconds: number;
};

/** Floats in [0, 1) from the shared seeded PRNG. */
function mulberry32(seed: number): () => number {
  const next = nextUint32(seed);
  return () => next() / 4294967296;
}

/** Row `i` of repository `repo`, with about `bytes` of frame payload. */
function traceRow(repo: string, i: number, bytes = 1_000): TraceRow {
  const rand = mulberry32(i * 7919 + repo.length * 104729 + repo.charCodeAt(0));
  const frames: TraceRow['frames'] = [];
  let size = 0;
  for (let j = 0; size < bytes; j++) {
    const locals = Array.from({ length: 1 + (j % 4) }, (_, k) => ({
      name: `v${k}`,
      value: JSON.stringify({ x: Math.floor(rand() * 1e6), s: `item-${j}-${k}` }),
    }));
    const frame = {
      kind: j === 0 ? 'call' : 'line',
      line: 10 + j,
      depth: j % 3,
      function: `${repo}.mod.fn_${i % 7}`,
      locals,
      value: j % 5 === 4 ? String(j) : null,
    };
    size += 60 + locals.reduce((s, l) => s + l.value.length + 6, 0);
    frames.push(frame);
  }
  return { unit_id: `${repo}-unit`, repo, node_id: `tests/test_${repo}.py::test_${i}`, frames, duration_seconds: rand() };
}

const REPOS = ['alpha', 'beta', 'gamma'];
const corpus = (perRepo: number, bytes = 1_000) => REPOS.flatMap((r) => Array.from({ length: perRepo }, (_, i) => traceRow(r, i, bytes)));

const sha256 = (path: string) => createHash('sha256').update(readFileSync(path)).digest('hex');
const shardsOf = (m: DatasetManifest, config: string) => m.shards.filter((s) => s.config === config);

async function write(rows: unknown[], opts: DatasetOptions = {}, schema: RecordSchema = traceSchema): Promise<{ dir: string; manifest: DatasetManifest }> {
  const dir = join(tempDir('dswriter'), 'dataset');
  const manifest = await writeDataset(dir, [{ schema, rows: rows as Record<string, unknown>[] }], opts);
  return { dir, manifest };
}

describe('dataset layout, read by DuckDB and polars', () => {
  it('numShards: HF names, balanced rows, identical schemas, checksums, shuffled across repositories, nested columns intact', async () => {
    const rows = corpus(40);
    const { dir, manifest } = await write(rows, { numShards: 4, rowGroupRows: 8 });
    const shards = shardsOf(manifest, 'traces_demo');
    expect(shards.map((s) => s.path)).toEqual([0, 1, 2, 3].map((i) => `traces_demo/data/train-0000${i}-of-00004.parquet`));
    expect(shards.map((s) => s.rows)).toEqual([30, 30, 30, 30]);
    for (const s of shards) expect(sha256(join(dir, s.path))).toBe(s.sha256);
    expect(await verifyDataset(dir)).toMatchObject({ ok: true, problems: [], rows: 120 });

    const glob = join(dir, 'traces_demo/data/*.parquet');
    const frames = rows.reduce((n, r) => n + r.frames.length, 0);
    const locals = rows.reduce((n, r) => n + r.frames.reduce((m, f) => m + f.locals.length, 0), 0);
    const [duck] = await sql<{ n: bigint; f: bigint; l: bigint }>(
      `select (select count(*) from '${glob}') n, (select count(*) from (select unnest(frames) fr from '${glob}')) f,
              (select count(*) from (select unnest(fr.locals) from (select unnest(frames) fr from '${glob}'))) l`,
    );
    expect(duck).toEqual({ n: 120n, f: BigInt(frames), l: BigInt(locals) });
    // Every shard mixes repositories (the shuffle), in both readers.
    const perShard = await sql<{ f: string; repos: bigint }>(
      `select filename f, count(distinct repo) repos from read_parquet('${glob}', filename = true) group by all`,
    );
    expect(perShard.length).toBe(4);
    for (const s of perShard) expect(s.repos).toBe(3n);
    // Byte-identical Parquet schema and identical HF metadata across shards.
    const schemas = new Set<string>();
    for (const s of shards)
      schemas.add(
        JSON.stringify(await sql(`select name, type, repetition_type, converted_type, num_children::int n from parquet_schema('${join(dir, s.path)}')`)),
      );
    expect(schemas.size).toBe(1);
    expect([...schemas][0]).toContain('"locals"');
    const hf = await sql<{ v: string }>(`select decode(value) v from parquet_kv_metadata('${glob}') where decode(key) = 'huggingface'`);
    expect(hf.length).toBe(4);
    expect(new Set(hf.map((x) => x.v)).size).toBe(1);
    const features = JSON.parse(hf[0].v).info.features;
    expect(features).toEqual(hfFeatureDict(traceSchema));
    expect(features.node_id).toEqual({ dtype: 'string', _type: 'Value' });
    expect(features.frames._type).toBe('List');
    expect(features.frames.feature.locals).toEqual({
      feature: { name: { dtype: 'string', _type: 'Value' }, value: { dtype: 'string', _type: 'Value' } },
      _type: 'List',
    });

    // polars, a second independent reader.
    const byId = new Map(rows.map((r) => [r.node_id + r.repo, r]));
    const polarsSchemas = new Set<string>();
    let n = 0;
    let nFrames = 0;
    let nLocals = 0;
    for (const s of shards) {
      const df = pl.readParquet(join(dir, s.path));
      expect(df.height).toBe(s.rows);
      expect(new Set(df.getColumn('repo').toArray()).size).toBe(3);
      polarsSchemas.add(JSON.stringify(df.schema));
      n += df.height;
      nFrames += df.getColumn('frames').lst.lengths().sum() as number;
      const unnested = df.select(pl.col('frames').explode().alias('fr')).unnest('fr');
      nLocals += unnested.getColumn('locals').lst.lengths().sum() as number;
      for (const rec of df.head(3).toRecords() as unknown as TraceRow[]) expect(rec).toEqual(byId.get(rec.node_id + rec.repo));
    }
    expect(polarsSchemas.size).toBe(1);
    expect([n, nFrames, nLocals]).toEqual([120, frames, locals]);
  });

  it('shardMultiple rounds the byte-target count up to a multiple; numShards must agree with it', async () => {
    const rows = corpus(20);
    const plain = await write(rows, { shardBytes: 10_000 });
    const base = shardsOf(plain.manifest, 'traces_demo').length;
    expect(base).toBeGreaterThan(4);
    const k = base % 4 ? 4 : 3;
    const { dir, manifest } = await write(rows, { shardBytes: 10_000, shardMultiple: k });
    const shards = shardsOf(manifest, 'traces_demo');
    expect(shards.length).toBe(Math.ceil(base / k) * k);
    expect(shards.length).toBeGreaterThan(base);
    const counts = shards.map((s) => s.rows);
    expect(Math.max(...counts) - Math.min(...counts)).toBeLessThanOrEqual(1);
    expect(counts.reduce((a, b) => a + b, 0)).toBe(60);
    expect(shards.every((s, i) => s.path.endsWith(`train-${String(i).padStart(5, '0')}-of-${String(shards.length).padStart(5, '0')}.parquet`))).toBe(true);
    expect((await verifyDataset(dir)).ok).toBe(true);
    const polarsRows = shards.reduce((t, s) => t + pl.readParquet(join(dir, s.path)).height, 0);
    expect(polarsRows).toBe(60);
    await expect(write(rows, { numShards: 6, shardMultiple: 4 })).rejects.toThrow(/numShards 6 is not a multiple of shardMultiple 4/);
    await expect(write(rows, { numShards: 0 })).rejects.toThrow(/numShards must be a positive integer/);
  });

  it('shuffles deterministically: same rows and seed give identical bytes, whatever the input order', async () => {
    const rows = corpus(30);
    const a = await write(rows, { numShards: 3, shuffleSeed: 7 });
    const b = await write([...rows].reverse(), { numShards: 3, shuffleSeed: 7 });
    const c = await write(rows, { numShards: 3, shuffleSeed: 8 });
    const sums = (m: DatasetManifest) => m.shards.map((s) => s.sha256);
    expect(sums(b.manifest)).toEqual(sums(a.manifest));
    for (const s of a.manifest.shards) expect(readFileSync(join(b.dir, s.path)).equals(readFileSync(join(a.dir, s.path)))).toBe(true);
    expect(sums(c.manifest)).not.toEqual(sums(a.manifest));
    const order = (dir: string) =>
      sql<{ id: string }>(
        `select repo || node_id id from read_parquet('${dir}/traces_demo/data/*.parquet', filename = true) order by filename, file_row_number`,
      );
    const ordered = (await order(a.dir)).map((r) => r.id);
    expect(new Set(ordered).size).toBe(90);
    expect(ordered).not.toEqual(rows.map((r) => r.repo + r.node_id));
    // The first ten rows are not one repository's.
    expect(new Set(ordered.slice(0, 10).map((id) => REPOS.find((r) => id.startsWith(r)))).size).toBeGreaterThan(1);
    // shuffle: false keeps the input order.
    const kept = await write(rows, { numShards: 3, shuffle: false });
    expect((await order(kept.dir)).map((r) => r.id)).toEqual(rows.map((r) => r.repo + r.node_id));
    expect(kept.manifest.layout).toMatchObject({ shuffle: false, shuffle_seed: null, num_shards: 3 });
    expect(a.manifest.layout).toMatchObject({ shuffle: true, shuffle_seed: 7 });
  });

  it('removes exact duplicates within a config, timing fields aside, and counts them in the manifest and card', async () => {
    const rows = corpus(10);
    const dupes = [
      ...rows.slice(0, 5).map((r) => ({ ...r, duration_seconds: r.duration_seconds + 1 })), // differs only in timing
      rows[7],
      rows[7],
    ];
    for (const shuffle of [true, false]) {
      const { dir, manifest } = await write([...rows, ...dupes], { numShards: 2, shuffle });
      expect(manifest.configs.traces_demo).toMatchObject({ rows: 30, duplicates_removed: 7, dedup_ignores: ['duration_seconds'] });
      const [d] = await sql<{ n: bigint; ids: bigint }>(`select count(*) n, count(distinct repo || node_id) ids from '${dir}/traces_demo/data/*.parquet'`);
      expect(d).toEqual({ n: 30n, ids: 30n });
      expect(readFileSync(join(dir, 'README.md'), 'utf8')).toContain('| traces_demo | 30 | 2 | 7 | 0 | 0 |');
      expect(JSON.parse(readFileSync(join(dir, 'manifest.json'), 'utf8')).configs.traces_demo.duplicates_removed).toBe(7);
    }
    // ignoreFields adds fields to those the schema documents as timings: one row per node id here.
    const byNode = await write([...rows, ...dupes], { numShards: 2, ignoreFields: { traces_demo: ['frames'] } });
    expect(byNode.manifest.configs.traces_demo).toMatchObject({ rows: 30, dedup_ignores: ['duration_seconds', 'frames'] });
    await expect(write(rows, { ignoreFields: { traces_demo: ['nope'] } })).rejects.toThrow(/traces_demo has no field "nope"/);
  });

  it('rejects oversize rows and invalid records with the field and reason, counts them, writes the rest', async () => {
    const rows: unknown[] = corpus(10);
    rows.push(traceRow('alpha', 100, 60_000), traceRow('beta', 101, 80_000));
    rows.push({ ...traceRow('gamma', 102), frames: [{ ...traceRow('gamma', 102).frames[0], line: 1.5 }] });
    rows.push({ ...traceRow('gamma', 103), node_id: undefined });
    rows.push({ ...traceRow('gamma', 104), extra: 1 });
    const { dir, manifest } = await write(rows, { maxRowBytes: 50_000, numShards: 2 });
    expect(manifest.configs.traces_demo).toMatchObject({ rows: 30, rows_rejected_oversize: 2, rows_rejected_invalid: 3 });
    expect(manifest.rejected).toEqual(
      expect.arrayContaining([
        { config: 'traces_demo', kind: 'invalid', reason: 'frames[0].line: expected an integer, got 1.5' },
        { config: 'traces_demo', kind: 'invalid', reason: 'node_id: is missing' },
        { config: 'traces_demo', kind: 'invalid', reason: 'extra: is not a field of this schema' },
        { config: 'traces_demo', kind: 'oversize', reason: expect.stringMatching(/^row of about \d+ bytes uncompressed is over the 50000-byte cap$/) },
      ]),
    );
    expect(manifest.rejected.length).toBe(5);
    expect(readFileSync(join(dir, 'README.md'), 'utf8')).toContain('| traces_demo | 30 | 2 | 0 | 2 | 3 |');
    const [d] = await sql<{ n: bigint; big: bigint }>(
      `select count(*) n, count(*) filter (where node_id like '%test_10_') big from '${dir}/traces_demo/data/*.parquet'`,
    );
    expect(d).toEqual({ n: 30n, big: 0n });
    expect(pl.readParquet(join(dir, manifest.shards[0].path)).height + pl.readParquet(join(dir, manifest.shards[1].path)).height).toBe(30);
  });

  it('caps row groups by estimated bytes: every row group stays under the cap', async () => {
    const rows = corpus(10, 40_000); // ~40 KB rows
    const cap = 200_000;
    const { dir, manifest } = await write(rows, { numShards: 2, rowGroupBytes: cap, rowGroupRows: 10_000 });
    const glob = join(dir, 'traces_demo/data/*.parquet');
    const groups = await sql<{ rg: number; n: bigint; bytes: bigint }>(
      `select row_group_id rg, any_value(row_group_num_rows) n, sum(total_uncompressed_size) bytes from parquet_metadata('${glob}') group by file_name, row_group_id`,
    );
    expect(groups.length).toBe(manifest.shards.reduce((s, x) => s + x.row_groups, 0));
    expect(groups.length).toBeGreaterThanOrEqual(6);
    for (const g of groups) {
      expect(Number(g.bytes)).toBeLessThanOrEqual(cap);
      expect(Number(g.n)).toBeLessThanOrEqual(5);
    }
    expect(groups.reduce((s, g) => s + Number(g.n), 0)).toBe(30);
    expect(manifest.layout.row_group_bytes).toBe(cap);
  });

  it('writes tests-schema rows with duration_seconds out of the dedup hash, read back by both readers', async () => {
    const test = (i: number, repo: string): TestRecord => ({
      unit_id: `${repo}-u`,
      repo,
      commit: 'c'.repeat(40),
      node_id: `tests/test_x.py::test_${i}`,
      file: 'tests/test_x.py',
      outcome: i % 9 ? 'passed' : 'failed',
      run_outcomes: i % 9 ? ['passed', 'passed'] : ['failed', 'failed'],
      flaky: false,
      unstable_id: false,
      message: i % 9 ? null : 'AssertionError: boom',
      duration_seconds: i / 1000,
      image_id: 'sha256:abc',
      python_version: '3.11.2',
      pytest_version: '7.2.1',
    });
    const rows = REPOS.flatMap((r) => Array.from({ length: 50 }, (_, i) => test(i, r)));
    const rerun = rows.slice(0, 20).map((r) => ({ ...r, duration_seconds: r.duration_seconds * 2 }));
    const { dir, manifest } = await write([...rows, ...rerun], { shardMultiple: 2 }, testsSchema);
    expect(manifest.configs.tests).toMatchObject({ rows: 150, shards: 2, duplicates_removed: 20, dedup_ignores: ['duration_seconds'] });
    const [d] = await sql<{ n: bigint; failed: bigint }>(
      `select count(*) n, count(*) filter (where outcome = 'failed') failed from '${dir}/tests/data/*.parquet'`,
    );
    expect(d).toEqual({ n: 150n, failed: 18n });
    const df = pl.concat(manifest.shards.map((s) => pl.readParquet(join(dir, s.path))));
    expect(df.height).toBe(150);
    expect(df.getColumn('run_outcomes').lst.lengths().sum()).toBe(300);
    expect((await verifyDataset(dir)).ok).toBe(true);
  });

  it('splits spill buckets over the memory bound without changing the order or the dedup', () => {
    const rows = [...corpus(30), ...corpus(3)];
    const run = (maxBucketBytes?: number) => {
      const spill = new SpilledConfig(traceSchema, {
        shuffle: true,
        seed: 3,
        maxRowBytes: 1e9,
        ignoreFields: ['duration_seconds'],
        dir: join(tempDir('spill'), 's'),
        maxBucketBytes,
      });
      for (const r of rows) spill.add(r);
      spill.count();
      const order = [...spill.emit()].map((x) => x.row.repo + (x.row.node_id as string));
      spill.cleanup();
      return { order, rows: spill.rows, duplicates: spill.duplicates, buckets: spill.bucketCount };
    };
    const whole = run();
    const split = run(1_500); // buckets of two distinct ~1.3 KB rows split again; a row and its duplicate cannot
    expect(whole).toMatchObject({ rows: 90, duplicates: 9 });
    expect(split.buckets).toBeGreaterThan(whole.buckets);
    expect({ ...split, buckets: 0 }).toEqual({ ...whole, buckets: 0 });
  });
});
