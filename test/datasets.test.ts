/**
 * Datasets from real-corpus records: verification catches corruption, reading streams by rank,
 * and a writer killed mid-shard never leaves a published dataset pointing at a partial file.
 */

import { spawn } from 'node:child_process';
import { cpSync, existsSync, readdirSync, readFileSync, truncateSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { beforeAll, describe, expect, inject, it } from 'vitest';
import { packageRoot } from '../core/package.js';
import { readManifestJson, readRows, shardsForRank } from '../datasets/reader.js';
import { verifyDataset } from '../datasets/verify.js';
import { CORPUS } from './corpus.js';
import { cli, sql, tempDir } from './helpers.js';

const UNITS = ['toolz', 'h11'];
const expectedTests = UNITS.reduce((n, u) => n + CORPUS[u].expected.collected, 0);

describe('datasets from real-corpus records', () => {
  let out: string;
  let dataset: string;

  beforeAll(async () => {
    const dir = tempDir('datasets');
    out = join(dir, 'out');
    const manifest = join(dir, 'manifest.jsonl');
    writeFileSync(manifest, UNITS.map((u) => JSON.stringify({ repo: join(inject('corpusRoot'), u) })).join('\n') + '\n');
    const run = await cli(['run', '--manifest', manifest, '--out', out, '--stages', 'clone,build,validate', '--validate-runs', '1']);
    expect(run.code).toBe(0);
    const shard = await cli(['shard', '--out', out, '--shard-bytes', '20000', '--row-group-rows', '40']);
    expect(shard.code).toBe(0);
    dataset = join(out, 'dataset');
  }, 600_000);

  it('writes several HF-named shards that verify and hold every test once', async () => {
    const manifest = readManifestJson(dataset);
    const shards = manifest.shards.filter((s) => s.config === 'tests');
    expect(shards.length).toBeGreaterThan(2);
    expect(shards.every((s, i) => s.path === `tests/data/train-${String(i).padStart(5, '0')}-of-${String(shards.length).padStart(5, '0')}.parquet`)).toBe(true);
    const report = await verifyDataset(dataset);
    expect(report).toMatchObject({ ok: true, problems: [], rows: expectedTests + UNITS.length });
    const [row] = await sql<{ n: bigint; ids: bigint }>(`select count(*) as n, count(distinct node_id) as ids from '${dataset}/tests/data/*.parquet'`);
    expect(row).toEqual({ n: BigInt(expectedTests), ids: BigInt(expectedTests) });
  });

  it('verify names a flipped byte and a truncated shard', async () => {
    const copy = join(tempDir('corrupt'), 'dataset');
    cpSync(dataset, copy, { recursive: true, dereference: true });
    const manifest = readManifestJson(copy);
    const [a, b] = manifest.shards.filter((s) => s.config === 'tests');
    const fileA = join(copy, a.path);
    const bytes = readFileSync(fileA);
    bytes[Math.floor(bytes.length / 2)] ^= 0xff;
    writeFileSync(fileA, bytes);
    truncateSync(join(copy, b.path), Math.floor(b.bytes / 2));
    const res = await cli(['verify', copy]);
    expect(res.code).toBe(1);
    expect(res.stdout).toContain(`FAIL ${a.path}: sha256 mismatch: the manifest says ${a.sha256}`);
    expect(res.stdout).toContain(`FAIL ${b.path}: truncated: ${Math.floor(b.bytes / 2)} of ${b.bytes} bytes`);
    const ok = await cli(['verify', dataset]);
    expect(ok.code).toBe(0);
  });

  it('streams rows by rank, whole shards each, together exactly the dataset', async () => {
    const shards = readManifestJson(dataset).shards.filter((s) => s.config === 'tests');
    const assigned = [0, 1, 2].flatMap((rank) => shardsForRank(shards, rank, 3).map((s) => s.path));
    expect(assigned.sort()).toEqual(shards.map((s) => s.path).sort());
    const ids: string[] = [];
    for (const rank of [0, 1, 2]) {
      for await (const row of readRows(dataset, { config: 'tests', rank, worldSize: 3, columns: ['node_id'] })) ids.push(row.node_id as string);
    }
    expect(ids.length).toBe(expectedTests);
    expect(new Set(ids).size).toBe(expectedTests);
    const res = await cli(['cat', dataset, '--config', 'repos', '--limit', '1']);
    const lines = res.stdout.trim().split('\n');
    expect(lines.length).toBe(1);
    expect(JSON.parse(lines[0])).toMatchObject({ status: 'ok', collected: expect.any(Number), exit_codes: [expect.any(Number)] });
  });

  it('a writer killed mid-shard leaves the published dataset intact; a rerun holds every record once', async () => {
    const before = readManifestJson(dataset);
    const killed = await new Promise<NodeJS.Signals | null>((resolve) => {
      const child = spawn(
        process.execPath,
        [join(packageRoot, 'dist/bin/worldline.js'), 'shard', '--out', out, '--shard-bytes', '20000', '--row-group-rows', '40'],
        {
          env: { ...process.env, WORLDLINE_FAULT_KILL_AFTER_ROWS: '100' },
          stdio: 'ignore',
        },
      );
      child.on('close', (_code, signal) => resolve(signal));
    });
    expect(killed).toBe('SIGKILL');
    const versions = readdirSync(join(out, 'dataset-versions'));
    expect(versions.length).toBe(2);
    const partial = versions.flatMap((v) => {
      const dir = join(out, 'dataset-versions', v, 'tests', 'data');
      return existsSync(dir) ? readdirSync(dir).filter((f) => f.endsWith('.partial')) : [];
    });
    expect(partial.length).toBeGreaterThan(0);
    expect(readManifestJson(dataset)).toEqual(before);
    expect((await verifyDataset(dataset)).ok).toBe(true);

    const rerun = await cli(['shard', '--out', out, '--shard-bytes', '20000', '--row-group-rows', '40']);
    expect(rerun.code).toBe(0);
    expect(readdirSync(join(out, 'dataset-versions')).length).toBe(1);
    expect((await verifyDataset(dataset)).ok).toBe(true);
    const [row] = await sql<{ n: bigint; ids: bigint }>(`select count(*) as n, count(distinct node_id) as ids from '${dataset}/tests/data/*.parquet'`);
    expect(row).toEqual({ n: BigInt(expectedTests), ids: BigInt(expectedTests) });
  });
});
