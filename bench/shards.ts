/**
 * `npm run bench:shards`: our streaming Parquet writer against DuckDB on trace-like records.
 *
 *   node dist/bench/shards.js [--gb 2] [--row-group-rows match|N] [--dir /tmp/worldline-bench] [--only a,b] [--keep]
 *
 * `--zstd-level L` sets ours-writer's zstd level (default ZSTD_LEVEL). `--keep` leaves the written files in `--dir` (to compare them column by column).
 *
 * Writes at least `--gb` GB (JSON bytes) of deterministic trace records, nested as our traces
 * schema nests them (frames: list<struct{kind, line, depth, function, source,
 * locals: list<struct{name, value}>, value}>, ~35 KB a row), along each path in a child process
 * of its own, so each peak RSS (VmHWM from /proc/self/status) is its own:
 *
 *   ours-writer   records -> ParquetFileWriter, one file (streaming, no shuffle)
 *   ours-dataset  records -> writeDataset with its defaults (spill, dedup, seeded shuffle, 500 MB shards)
 *   duckdb-whole  records -> JSON.stringify -> JSON Lines temp file -> DuckDB COPY ... (FORMAT parquet,
 *                 COMPRESSION zstd, ROW_GROUP_SIZE n), memory_limit 1GB: the way a Node user feeds DuckDB
 *   duckdb-copy   DuckDB's COPY alone from the ready JSON Lines file (DuckDB's lower bound)
 *
 * Equal row groups: DuckDB's COPY takes ROW_GROUP_SIZE as a minimum of its vector size (2,048)
 * and, preserving insertion order, cuts row groups where its JSON reader's buffers end (~16 MB
 * of JSON: ~415 of these rows), whatever ROW_GROUP_SIZE says. So by default (`--row-group-rows
 * match`) the DuckDB paths run first with ROW_GROUP_SIZE 2048, and our paths then write row
 * groups of ceil(rows / DuckDB's row-group count) rows: the same number of row groups of the
 * same mean size. `--row-group-rows N` gives every path N instead (DuckDB honouring it or not);
 * the table shows each path's row-group count either way. Throughput is rows and JSON megabytes per
 * second of wall time, record generation included for every path that starts from records.
 */
import { spawnSync } from 'node:child_process';
import { closeSync, mkdirSync, openSync, readdirSync, readFileSync, rmSync, statSync, writeSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { DuckDBInstance } from '@duckdb/node-api';
import { mulberry32 as nextUint32 } from '../core/prng.js';
import { writeDataset } from '../datasets/dataset_writer.js';
import { ensureZstd, ParquetFileWriter, ZSTD_LEVEL } from '../datasets/parquet/writer.js';
import { defineSchema, int64, list, string } from '../schemas/schema.js';
import { frameField } from '../schemas/traces.js';

/**
 * The traces schema's own shape where the generated records have the fields: frames are
 * `frameField` from schemas/traces.ts (line and depth int32, locals list<struct{name, value}>).
 */
const schema = defineSchema({
  name: 'traces',
  version: 1,
  doc: 'bench trace records',
  fields: {
    unit_id: string(),
    repo: string(),
    commit: string(),
    node_id: string(),
    function: string(),
    file: string(),
    frames: list(frameField),
    frame_count: int64(),
  },
});

const DUCK_COLUMNS =
  "{unit_id: 'VARCHAR', repo: 'VARCHAR', commit: 'VARCHAR', node_id: 'VARCHAR', function: 'VARCHAR', file: 'VARCHAR', " +
  'frames: \'STRUCT(kind VARCHAR, line INTEGER, depth INTEGER, "function" VARCHAR, source VARCHAR, locals STRUCT(name VARCHAR, value VARCHAR)[], value VARCHAR)[]\', ' +
  "frame_count: 'BIGINT'}";

// ---- deterministic records ----

/** Floats in [0, 1) from the shared seeded PRNG. */
function mulberry32(seed: number): () => number {
  const next = nextUint32(seed);
  return () => next() / 4294967296;
}

const REPOS = ['toolz', 'h11', 'isodate', 'hyperlink', 'attrs', 'more-itertools', 'six', 'idna'];
const NAMES = ['self', 'key', 'value', 'result', 'items', 'i', 'n', 'seq', 'func', 'acc', 'data', 'line', 'buf', 'state', 'event'];
const SOURCES = [
  '    for item in seq:\n',
  '        result.append(func(item))\n',
  '    if key not in self._cache:\n',
  '        self._cache[key] = value\n',
  '    return functools.reduce(binop, seq, initial)\n',
  '    data = bytes(buf[:n])\n',
  '        event = self._process_event(state, data)\n',
  '    while i < len(items) and items[i] is not None:\n',
  '    raise LocalProtocolError("illegal header line")\n',
  '    acc = acc + [x for x in group if pred(x)]\n',
];

function repr(rand: () => number, i: number): string {
  switch (Math.floor(rand() * 6)) {
    case 0:
      return String(Math.floor(rand() * 100_000));
    case 1:
      return `'${NAMES[i % NAMES.length]}-${Math.floor(rand() * 1000)}'`;
    case 2:
      return `[${Array.from({ length: 1 + Math.floor(rand() * 8) }, () => Math.floor(rand() * 100)).join(', ')}]`;
    case 3:
      return `{'${NAMES[i % NAMES.length]}': ${Math.floor(rand() * 50)}, 'size': ${Math.floor(rand() * 4096)}}`;
    case 4:
      return `<h11._state.ConnectionState object at 0x7f${Math.floor(rand() * 0xffffffff).toString(16)}>`;
    default:
      return `b'${'GET / HTTP/1.1\\r\\nHost: example.com\\r\\n'.slice(0, 8 + Math.floor(rand() * 30))}'`;
  }
}

export type BenchRow = ReturnType<typeof record>;

/** Record `i`: ~35 KB of JSON, a function-level episode of 80-180 frames. */
export function record(i: number) {
  const rand = mulberry32(i + 1);
  const repo = REPOS[i % REPOS.length];
  const fn = `${repo}.core.${NAMES[i % NAMES.length]}_${i % 97}`;
  const nFrames = 80 + Math.floor(rand() * 100);
  const frames = [];
  const localNames = NAMES.slice(0, 2 + Math.floor(rand() * 6));
  let line = 10 + Math.floor(rand() * 400);
  for (let j = 0; j < nFrames; j++) {
    const kind = j === 0 ? 'call' : j === nFrames - 1 ? 'return' : 'line';
    line += rand() < 0.7 ? 1 : -Math.floor(rand() * 5);
    frames.push({
      kind,
      line,
      depth: Math.floor(rand() * 3),
      function: j % 17 < 12 ? fn : `${repo}.utils.helper_${j % 5}`,
      source: SOURCES[(line + j) % SOURCES.length],
      locals: kind === 'return' ? [] : localNames.map((name, k) => ({ name, value: j === 0 || rand() < 0.35 ? repr(rand, k + j) : '..' })),
      value: kind === 'return' ? repr(rand, j) : null,
    });
  }
  return {
    unit_id: `${repo}-${(i % 13).toString(16).padStart(8, '0')}`,
    repo,
    commit: ((i % 13) * 2654435761).toString(16).padStart(40, '0').slice(-40),
    node_id: `tests/test_${repo}.py::test_case_${i}`,
    function: fn,
    file: `src/${repo}/core.py`,
    frames,
    frame_count: nFrames,
  };
}

// ---- measurement ----

function procStatus(key: 'VmRSS' | 'VmHWM'): number {
  const text = readFileSync('/proc/self/status', 'utf8');
  const m = new RegExp(`^${key}:\\s+(\\d+) kB`, 'm').exec(text);
  return m ? Number(m[1]) / 1024 : NaN;
}

interface Plan {
  rows: number;
  jsonBytes: number;
}

interface ChildResult {
  path: string;
  seconds: number;
  rows: number;
  jsonBytes: number;
  fileBytes: number;
  files: number;
  rowGroups: number;
  rssAtHalfGbMB: number | null;
  rssAtEndMB: number;
  peakRssMB: number;
}

/** Rows yielded in order, with RSS noted as the JSON bytes pass 0.5 GB. */
function* rows(plan: Plan, marks: { half: number | null }): Generator<BenchRow> {
  const bytesPerRow = plan.jsonBytes / plan.rows;
  const halfRow = Math.floor(0.5e9 / bytesPerRow);
  for (let i = 0; i < plan.rows; i++) {
    if (i === halfRow) marks.half = procStatus('VmRSS');
    yield record(i);
  }
}

async function duckCopy(jsonl: string, parquet: string, rowGroupRows: number): Promise<number> {
  const db = await DuckDBInstance.create(':memory:', { memory_limit: '1GB' });
  const conn = await db.connect();
  await conn.run(`SET temp_directory = '${parquet}.tmp'`);
  await conn.run(
    `COPY (SELECT * FROM read_json('${jsonl}', format = 'newline_delimited', columns = ${DUCK_COLUMNS})) TO '${parquet}' ` +
      `(FORMAT parquet, COMPRESSION zstd, ROW_GROUP_SIZE ${rowGroupRows})`,
  );
  const [g] = (await conn.runAndReadAll(`select count(distinct row_group_id)::int g from parquet_metadata('${parquet}')`)).getRowObjectsJS() as { g: number }[];
  conn.closeSync();
  db.closeSync();
  rmSync(`${parquet}.tmp`, { recursive: true, force: true });
  return g.g;
}

async function child(kind: string, dir: string, plan: Plan, rowGroupRows: number): Promise<ChildResult> {
  const marks: { half: number | null } = { half: null };
  const t0 = performance.now();
  let fileBytes = 0;
  let files = 1;
  let rowGroups = 0;
  const jsonl = join(dir, 'records.jsonl');
  if (kind === 'ours-writer') {
    await ensureZstd();
    const w = new ParquetFileWriter(join(dir, 'ours.parquet'), schema, {
      rowGroupRows,
      rowGroupBytes: Infinity,
      zstdLevel: Number(arg('zstd-level', String(ZSTD_LEVEL))),
    });
    for (const r of rows(plan, marks)) w.write(r);
    const f = w.close();
    fileBytes = f.bytes;
    rowGroups = f.rowGroups;
  } else if (kind === 'ours-dataset') {
    const m = await writeDataset(join(dir, 'ours-dataset'), [{ schema, rows: rows(plan, marks) }], { rowGroupRows, rowGroupBytes: Infinity });
    fileBytes = m.shards.reduce((s, x) => s + x.bytes, 0);
    files = m.shards.length;
    rowGroups = m.shards.reduce((s, x) => s + x.row_groups, 0);
  } else if (kind === 'duckdb-whole') {
    const fd = openSync(jsonl, 'w');
    let parts: string[] = [];
    let size = 0;
    for (const r of rows(plan, marks)) {
      const line = JSON.stringify(r) + '\n';
      parts.push(line);
      size += line.length;
      if (size > 4 << 20) {
        writeSync(fd, parts.join(''));
        parts = [];
        size = 0;
      }
    }
    writeSync(fd, parts.join(''));
    closeSync(fd);
    rowGroups = await duckCopy(jsonl, join(dir, 'duckdb-whole.parquet'), rowGroupRows);
    fileBytes = statSync(join(dir, 'duckdb-whole.parquet')).size;
  } else if (kind === 'duckdb-copy') {
    rowGroups = await duckCopy(jsonl, join(dir, 'duckdb-copy.parquet'), rowGroupRows);
    fileBytes = statSync(join(dir, 'duckdb-copy.parquet')).size;
  } else {
    throw new Error(`unknown path ${kind}`);
  }
  const seconds = (performance.now() - t0) / 1000;
  return {
    path: kind,
    seconds,
    rows: plan.rows,
    jsonBytes: plan.jsonBytes,
    fileBytes,
    files,
    rowGroups,
    rssAtHalfGbMB: marks.half,
    rssAtEndMB: procStatus('VmRSS'),
    peakRssMB: procStatus('VmHWM'),
  };
}

function arg(name: string, fallback: string): string {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 && process.argv[i + 1] !== undefined ? process.argv[i + 1] : fallback;
}

async function main(): Promise<void> {
  const gb = Number(arg('gb', '2'));
  const rowGroupArg = arg('row-group-rows', 'match');
  const match = rowGroupArg === 'match';
  let rowGroupRows = match ? 2048 : Number(rowGroupArg);
  if (!(rowGroupRows >= 1)) throw new Error('--row-group-rows must be "match" or a positive integer');
  const dir = arg('dir', '/tmp/worldline-bench');
  if (process.argv.includes('--child')) {
    const kind = arg('child', '');
    const plan = JSON.parse(arg('plan', '{}')) as Plan;
    console.log(JSON.stringify(await child(kind, dir, plan, rowGroupRows)));
    return;
  }
  if (!(gb > 0)) throw new Error('--gb must be positive');
  rmSync(dir, { recursive: true, force: true });
  mkdirSync(dir, { recursive: true });
  // The plan: how many records make `gb` GB of JSON (untimed, in this process).
  const plan: Plan = { rows: 0, jsonBytes: 0 };
  while (plan.jsonBytes < gb * 1e9) plan.jsonBytes += JSON.stringify(record(plan.rows++)).length + 1;
  console.log(
    `${plan.rows} records, ${(plan.jsonBytes / 1e9).toFixed(2)} GB of JSON (${Math.round(plan.jsonBytes / plan.rows / 1024)} KB a row), ${match ? "row groups matched to DuckDB's" : `row groups of ${rowGroupRows} rows`}`,
  );
  const only = arg('only', 'duckdb-whole,duckdb-copy,ours-writer,ours-dataset').split(',');
  // DuckDB first: with `match`, our row-group size comes from its row-group count.
  only.sort((a, b) => Number(a.startsWith('ours')) - Number(b.startsWith('ours')));
  const results: ChildResult[] = [];
  for (const kind of only) {
    if (match && kind.startsWith('ours') && results.length) {
      const duck = results.find((r) => r.path === 'duckdb-whole') ?? results[0];
      rowGroupRows = Math.ceil(duck.rows / duck.rowGroups);
      console.log(`  (row groups of ${rowGroupRows} rows: ${duck.rowGroups} like ${duck.path})`);
    }
    const res = spawnSync(
      process.execPath,
      [
        fileURLToPath(import.meta.url),
        '--child',
        kind,
        '--dir',
        dir,
        '--plan',
        JSON.stringify(plan),
        '--row-group-rows',
        String(rowGroupRows),
        '--zstd-level',
        arg('zstd-level', String(ZSTD_LEVEL)),
      ],
      {
        encoding: 'utf8',
        maxBuffer: 64 << 20,
        stdio: ['ignore', 'pipe', 'inherit'],
      },
    );
    if (res.status !== 0) throw new Error(`${kind} failed (exit ${res.status ?? res.signal})`);
    const r = JSON.parse(res.stdout.trim().split('\n').at(-1)!) as ChildResult;
    results.push(r);
    console.log(`  ${kind}: ${r.seconds.toFixed(1)} s`);
  }
  const mb = (x: number) => (x / 1e6).toFixed(1);
  const whole = results.find((r) => r.path === 'duckdb-whole');
  console.log(
    '\n| path | seconds | rows/s | MB/s (JSON) | x DuckDB whole path | RSS at 0.5 GB (MB) | RSS at end (MB) | peak RSS (MB) | files | row groups | Parquet MB | size / DuckDB |',
  );
  console.log('|---|---|---|---|---|---|---|---|---|---|---|---|');
  for (const r of results) {
    const speedup = whole ? (whole.seconds / r.seconds).toFixed(2) : 'n/a';
    const sizeRatio = whole ? (r.fileBytes / whole.fileBytes).toFixed(3) : 'n/a';
    console.log(
      `| ${r.path} | ${r.seconds.toFixed(1)} | ${Math.round(r.rows / r.seconds)} | ${mb(r.jsonBytes / r.seconds)} | ${speedup} | ${r.rssAtHalfGbMB?.toFixed(0) ?? '-'} | ${r.rssAtEndMB.toFixed(0)} | ${r.peakRssMB.toFixed(0)} | ${r.files} | ${r.rowGroups} | ${mb(r.fileBytes)} | ${sizeRatio} |`,
    );
  }
  if (!process.argv.includes('--keep')) for (const name of readdirSync(dir)) rmSync(join(dir, name), { recursive: true, force: true });
}

await main();
