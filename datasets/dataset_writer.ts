/**
 * Writes a dataset in the Hugging Face layout, `<config>/data/train-0000i-of-0000N.parquet`,
 * with `manifest.json` (per-shard rows, bytes, sha256, row groups, schema hash) and a dataset
 * card, into a fresh version folder that replaces the old dataset only once everything is written.
 */
import { createHash } from 'node:crypto';
import { createReadStream, existsSync, lstatSync, mkdirSync, readdirSync, realpathSync, renameSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { dirname, join, relative } from 'node:path';
import { hfFeatures, type RecordSchema } from '../schemas/schema.js';
import { ensureZstd, ParquetFileWriter, schemaHash, type WrittenFile } from './parquet_writer.js';

export interface ConfigSource {
  schema: RecordSchema;
  rows: Iterable<Record<string, unknown>>;
}

export interface DatasetOptions {
  /** Target uncompressed bytes per shard. */
  shardBytes?: number;
  rowGroupRows?: number;
  rowGroupBytes?: number;
  /** Free-form provenance for the card and manifest (never inside shards). */
  provenance?: Record<string, unknown>;
  /** License mix of the source repositories, for the card. */
  licenses?: Record<string, number>;
}

export const DEFAULT_SHARD_BYTES = 500_000_000;

export interface ShardEntry {
  path: string;
  config: string;
  rows: number;
  bytes: number;
  sha256: string;
  row_groups: number;
  schema_hash: string;
}

export interface DatasetManifest {
  format: 'worldline-dataset';
  format_version: 1;
  configs: Record<string, { rows: number; shards: number; schema_version: number; schema_hash: string; uncompressed_bytes: number }>;
  shards: ShardEntry[];
  provenance: Record<string, unknown>;
}

async function fileSha256(path: string): Promise<string> {
  const hash = createHash('sha256');
  for await (const chunk of createReadStream(path)) hash.update(chunk as Buffer);
  return hash.digest('hex');
}

const shardName = (i: number, n: number) => `train-${String(i).padStart(5, '0')}-of-${String(n).padStart(5, '0')}.parquet`;

/** Streams one config's rows into shards of about `shardBytes` uncompressed each. */
async function writeConfig(root: string, source: ConfigSource, opts: DatasetOptions): Promise<{ files: WrittenFile[]; rows: number }> {
  const dir = join(root, source.schema.name, 'data');
  mkdirSync(dir, { recursive: true });
  const shardBytes = opts.shardBytes ?? DEFAULT_SHARD_BYTES;
  const files: WrittenFile[] = [];
  let writer: ParquetFileWriter | null = null;
  const open = () => new ParquetFileWriter(join(dir, `part-${String(files.length).padStart(5, '0')}.parquet.partial`), source.schema, opts);
  // Fault injection for tests: die mid-shard, as a machine losing power would.
  const killAfter = Number(process.env.WORLDLINE_FAULT_KILL_AFTER_ROWS ?? NaN);
  let written = 0;
  for (const row of source.rows) {
    writer ??= open();
    writer.write(row);
    if (++written === killAfter) process.kill(process.pid, 'SIGKILL');
    if (writer.size >= shardBytes) {
      files.push(writer.close());
      writer = null;
    }
  }
  // An empty config still gets one (empty) shard, so its schema is there for readers.
  if (writer || !files.length) files.push((writer ?? open()).close());
  const n = files.length;
  const named = files.map((f, i) => {
    const path = join(dir, shardName(i, n));
    renameSync(f.path, path);
    return { ...f, path };
  });
  return { files: named, rows: named.reduce((s, f) => s + f.rows, 0) };
}

function yamlScalar(v: unknown): string {
  return typeof v === 'string' && !/^[A-Za-z0-9_.\/-]+$/.test(v) ? JSON.stringify(v) : String(v);
}

/** Minimal YAML emitter for the card's front matter (plain data only). */
function toYaml(value: unknown, indent = ''): string {
  if (Array.isArray(value)) {
    if (!value.length) return ' []\n';
    return '\n' + value.map((item) => {
      if (item && typeof item === 'object') {
        const body = toYaml(item, indent + '  ').replace(/^\n/, '');
        return `${indent}- ${body.slice(indent.length + 2)}`;
      }
      return `${indent}- ${yamlScalar(item)}\n`;
    }).join('');
  }
  if (value && typeof value === 'object') {
    return '\n' + Object.entries(value).map(([k, v]) => {
      const rendered = v && typeof v === 'object' ? toYaml(v, indent + '  ') : ` ${yamlScalar(v)}\n`;
      return `${indent}${k}:${rendered}`;
    }).join('');
  }
  return ` ${yamlScalar(value)}\n`;
}

function card(manifest: DatasetManifest, schemas: RecordSchema[], opts: DatasetOptions): string {
  const front = {
    configs: schemas.map((s, i) => ({
      config_name: s.name,
      data_files: [{ split: 'train', path: `${s.name}/data/train-*.parquet` }],
      ...(i === 0 ? { default: true } : {}),
    })),
    dataset_info: schemas.map((s) => ({
      config_name: s.name,
      features: hfFeatures(s),
      splits: [{ name: 'train', num_bytes: manifest.configs[s.name].uncompressed_bytes, num_examples: manifest.configs[s.name].rows }],
      download_size: manifest.shards.filter((sh) => sh.config === s.name).reduce((t, sh) => t + sh.bytes, 0),
      dataset_size: manifest.configs[s.name].uncompressed_bytes,
    })),
    license: 'other',
    tags: ['code', 'execution-traces', 'world-model', 'worldline'],
  };
  const licenses = Object.entries(opts.licenses ?? {}).sort((a, b) => b[1] - a[1] || a[0].localeCompare(b[0]));
  return [
    `---${toYaml(front)}---`,
    '',
    '# Worldline dataset',
    '',
    'Code-world-model training data generated by Worldline from Python repositories: per-test outcomes',
    'of each repository\'s own suite, run inside a sandboxed Docker environment.',
    '',
    '## Configs',
    '',
    '| config | rows | shards | description |',
    '|---|---|---|---|',
    ...schemas.map((s) => `| ${s.name} | ${manifest.configs[s.name].rows} | ${manifest.configs[s.name].shards} | ${s.doc} |`),
    '',
    '## Source licenses',
    '',
    'Each row keeps its repository\'s license in `repos.license`; the mix across repositories:',
    '',
    '| license | repositories |',
    '|---|---|',
    ...licenses.map(([l, n]) => `| ${l} | ${n} |`),
    '',
    '## Provenance',
    '',
    '```json',
    JSON.stringify(manifest.provenance, null, 2),
    '```',
    '',
  ].join('\n');
}

/** Where the versions of the dataset at `datasetDir` live, beside it. */
export function versionsDir(datasetDir: string): string {
  return `${datasetDir}-versions`;
}

/**
 * Points `datasetDir` (a symlink) at `version` with one rename, the only atomic replace POSIX
 * has: a reader sees the old complete version or the new one, never a mix and never nothing.
 */
function publish(datasetDir: string, version: string): void {
  const link = `${datasetDir}.link-${process.pid}`;
  rmSync(link, { force: true });
  symlinkSync(relative(dirname(datasetDir), version), link);
  if (existsSync(datasetDir) && !lstatSync(datasetDir).isSymbolicLink()) {
    // A dataset written before versions existed: keep it as a version so the swap stays atomic.
    renameSync(datasetDir, join(versionsDir(datasetDir), `legacy-${Date.now()}`));
  }
  renameSync(link, datasetDir);
}

/** Drops every version but the published one: superseded ones and those a killed run left. */
function pruneVersions(datasetDir: string): void {
  const current = realpathSync(datasetDir);
  for (const name of readdirSync(versionsDir(datasetDir))) {
    const path = join(versionsDir(datasetDir), name);
    if (path !== current) rmSync(path, { recursive: true, force: true });
  }
}

/**
 * Writes every config into a new version folder, then publishes it as `datasetDir`. Shards are
 * deterministic for the same rows (no timestamps inside); the card and manifest carry the
 * provenance. A process killed at any moment leaves the previous version published.
 */
export async function writeDataset(datasetDir: string, sources: ConfigSource[], opts: DatasetOptions = {}): Promise<DatasetManifest> {
  await ensureZstd();
  const version = join(versionsDir(datasetDir), `v${Date.now()}-${process.pid}`);
  mkdirSync(version, { recursive: true });
  const manifest: DatasetManifest = { format: 'worldline-dataset', format_version: 1, configs: {}, shards: [], provenance: opts.provenance ?? {} };
  for (const source of sources) {
    const { files, rows } = await writeConfig(version, source, opts);
    const hash = schemaHash(source.schema);
    manifest.configs[source.schema.name] = {
      rows,
      shards: files.length,
      schema_version: source.schema.version,
      schema_hash: hash,
      uncompressed_bytes: files.reduce((s, f) => s + f.uncompressedBytes, 0),
    };
    for (const f of files) {
      manifest.shards.push({
        path: relative(version, f.path),
        config: source.schema.name,
        rows: f.rows,
        bytes: f.bytes,
        sha256: await fileSha256(f.path),
        row_groups: f.rowGroups,
        schema_hash: hash,
      });
    }
  }
  // Shards first, then the manifest that names them, then the card; then publish.
  writeFileSync(join(version, 'manifest.json'), JSON.stringify(manifest, null, 2) + '\n');
  writeFileSync(join(version, 'README.md'), card(manifest, sources.map((s) => s.schema), opts));
  publish(datasetDir, version);
  pruneVersions(datasetDir);
  return manifest;
}
