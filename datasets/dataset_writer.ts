/**
 * Writes a dataset in the Hugging Face layout, `<config>/data/train-0000i-of-0000N.parquet`,
 * with `manifest.json` (per-shard rows, bytes, sha256, row groups, schema hash) and a dataset
 * card, into a fresh version folder that replaces the old dataset only once everything is written.
 */
import { createHash } from 'node:crypto';
import { createReadStream, existsSync, lstatSync, mkdirSync, readdirSync, realpathSync, renameSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { basename, dirname, join, relative } from 'node:path';
import { withLock } from '../core/lock.js';
import { hfFeatures, type RecordSchema, tokenColumn, withTokenCounts } from '../schemas/schema.js';
import type { ExclusionSummary } from './content_policy.js';
import { huggingfaceMetadata } from './hf_features.js';
import { NearDedup, type NearDedupOptions } from './near_dedup.js';
import {
  DEFAULT_PAGE_SIZE,
  DEFAULT_ROW_GROUP_BYTES,
  DEFAULT_ROW_GROUP_ROWS,
  ensureZstd,
  ParquetFileWriter,
  schemaHash,
  type WrittenFile,
} from './parquet/writer.js';
import type { RedactionSummary } from './redact.js';
import { rowText } from './row_text.js';
import { SpilledConfig, timingFields } from './spill.js';
import { loadTokenizer, type TokenCounter, withRowTokens } from './tokens.js';

export interface ConfigSource {
  schema: RecordSchema;
  /** Read once (a generator is fine): rows are spilled to temporary files before sharding. */
  rows: Iterable<Record<string, unknown>> | AsyncIterable<Record<string, unknown>>;
}

export interface DatasetOptions {
  /** Target uncompressed bytes per shard (default 500 MB); sets the shard count unless `numShards`. */
  shardBytes?: number;
  /** Exactly this many shards per config (overrides the byte target; may leave some empty). */
  numShards?: number;
  /** Round each config's shard count up to a multiple of K, so trainers' world sizes divide it. */
  shardMultiple?: number;
  rowGroupRows?: number;
  rowGroupBytes?: number;
  /** Uncompressed bytes per data page (default 8 MB). */
  pageSize?: number;
  /** Deterministic global shuffle across repositories (default on). */
  shuffle?: boolean;
  /** The shuffle's seed (default 0). Same rows + same seed => byte-identical shards. */
  shuffleSeed?: number;
  /** Rows estimated over this many uncompressed bytes are rejected and counted (default 2 MB). */
  maxRowBytes?: number;
  /**
   * Per config, top-level fields left out of the dedup content hash, on top of those the schema
   * documents as timings ("(timing)" in the field's doc).
   */
  ignoreFields?: Record<string, string[]>;
  /** Count each text column's tokens with this tokenizer (datasets/tokens.ts) into `<column>_tokens`; none when unset. */
  tokenizer?: string;
  /** Rows whose text columns hold more tokens than this (under `tokenizer`) are rejected and counted. */
  maxRowTokens?: number;
  /** Near-duplicate removal (near_dedup.ts) over the text columns of the named configs; none when unset. */
  nearDedup?: NearDedupOptions & { configs: string[] };
  /** Free-form provenance for the card and manifest (never inside shards). */
  provenance?: Record<string, unknown>;
  /** License mix of the source repositories, for the card. */
  licenses?: Record<string, number>;
  /** What the content policy left out and redacted; asked for once every row has been read. */
  content?: () => ContentSummary;
  /** Stops the write (a stopping process): the version being written is removed, the published one stays. */
  signal?: AbortSignal;
}

/** Content safety, for the card, manifest.json and `audit`. */
export interface ContentSummary {
  /** null when redaction was turned off. */
  redaction: RedactionSummary | null;
  exclusions: ExclusionSummary;
}

/** The dataset layout knobs the CLI exposes. */
export type DatasetLayout = Pick<
  DatasetOptions,
  | 'shardBytes'
  | 'numShards'
  | 'shardMultiple'
  | 'rowGroupRows'
  | 'rowGroupBytes'
  | 'shuffle'
  | 'shuffleSeed'
  | 'maxRowBytes'
  | 'tokenizer'
  | 'maxRowTokens'
  | 'nearDedup'
>;

export const DEFAULT_SHARD_BYTES = 500_000_000;
/** What the Hugging Face viewer expects of a row. */
export const DEFAULT_MAX_ROW_BYTES = 2_000_000;

export interface ShardEntry {
  path: string;
  config: string;
  rows: number;
  bytes: number;
  sha256: string;
  row_groups: number;
  schema_hash: string;
}

export interface ConfigSummary {
  rows: number;
  shards: number;
  schema_version: number;
  schema_hash: string;
  uncompressed_bytes: number;
  /** Exact duplicates (same content hash, timing fields aside) dropped. */
  duplicates_removed: number;
  /** Rows over `max_row_bytes`, never written. */
  rows_rejected_oversize: number;
  /** Records failing schema validation, never written. */
  rows_rejected_invalid: number;
  /** Fields left out of the dedup content hash. */
  dedup_ignores: string[];
  /** Rows whose text is a near duplicate of an earlier row's (manifest `near_dedup`), never written. */
  near_duplicates_removed?: number;
  /** Rows over `max_row_tokens`, never written. */
  rows_rejected_tokens?: number;
  /** Tokens of the rows written, per text column (under the manifest's tokenizer); absent without one. */
  tokens?: Record<string, number>;
}

export interface DatasetManifest {
  format: 'worldline-dataset';
  format_version: 1;
  configs: Record<string, ConfigSummary>;
  shards: ShardEntry[];
  /** The first few rejections per config, with the field and the reason. */
  rejected: { config: string; kind: 'invalid' | 'oversize' | 'tokens'; reason: string }[];
  /** The tokenizer the `<column>_tokens` columns were counted with; absent when none was. */
  tokenizer?: { name: string; source: string; max_row_tokens: number | null };
  /** How near duplicates were found (MinHash-LSH) and in which configs; absent when not asked for. */
  near_dedup?: Required<NearDedupOptions> & { configs: string[]; bands: number; rows_per_band: number };
  layout: {
    shuffle: boolean;
    shuffle_seed: number | null;
    shard_bytes: number;
    num_shards: number | null;
    shard_multiple: number | null;
    row_group_rows: number;
    row_group_bytes: number;
    page_size: number;
    max_row_bytes: number;
  };
  provenance: Record<string, unknown>;
  /** Absent in datasets written without a content policy. */
  content?: ContentSummary;
}

async function fileSha256(path: string): Promise<string> {
  const hash = createHash('sha256');
  for await (const chunk of createReadStream(path)) hash.update(chunk as Buffer);
  return hash.digest('hex');
}

const shardName = (i: number, n: number) => `train-${String(i).padStart(5, '0')}-of-${String(n).padStart(5, '0')}.parquet`;

function positiveInt(name: string, v: number | undefined): number | undefined {
  if (v !== undefined && (!Number.isInteger(v) || v < 1)) throw new Error(`${name} must be a positive integer (got ${v})`);
  return v;
}

/** Shards for `rows` rows of `bytes` estimated bytes: the byte target or `numShards`, rounded up to `shardMultiple`. */
export function shardCount(rows: number, bytes: number, opts: DatasetOptions): number {
  const exact = positiveInt('numShards', opts.numShards);
  const multiple = positiveInt('shardMultiple', opts.shardMultiple) ?? 1;
  const shardBytes = opts.shardBytes ?? DEFAULT_SHARD_BYTES;
  if (!(shardBytes > 0)) throw new Error(`shardBytes must be positive (got ${shardBytes})`);
  if (exact !== undefined) {
    if (exact % multiple) throw new Error(`numShards ${exact} is not a multiple of shardMultiple ${multiple}`);
    return exact;
  }
  const byBytes = Math.max(1, Math.ceil(bytes / shardBytes), rows ? 0 : 1);
  return Math.ceil(byBytes / multiple) * multiple;
}

interface ConfigResult {
  files: WrittenFile[];
  spilled: SpilledConfig;
  tokens: Record<string, number>;
  near: NearDedup | null;
}

/**
 * Two passes over one config: spill (validate, cap, key, shuffle buckets), then write the kept
 * rows into a shard count known in advance, rows balanced across shards (they differ by at most one).
 */
async function writeConfig(root: string, source: ConfigSource, opts: DatasetOptions, tokenizer: TokenCounter | null): Promise<ConfigResult> {
  const schema = tokenizer ? withTokenCounts(source.schema, tokenizer.name) : source.schema;
  const dir = join(root, schema.name, 'data');
  mkdirSync(dir, { recursive: true });
  const spilled = new SpilledConfig(schema, {
    shuffle: opts.shuffle ?? true,
    seed: opts.shuffleSeed ?? 0,
    maxRowBytes: opts.maxRowBytes ?? DEFAULT_MAX_ROW_BYTES,
    ignoreFields: [...new Set([...timingFields(schema), ...(opts.ignoreFields?.[schema.name] ?? [])])],
    dir: join(root, '.spill', schema.name),
  });
  try {
    const maxTokens = opts.maxRowTokens;
    const near = opts.nearDedup?.configs.includes(schema.name) ? new NearDedup(opts.nearDedup) : null;
    const add = (raw: Record<string, unknown>) => {
      const { row, total } = withRowTokens(schema, raw, tokenizer);
      if (maxTokens !== undefined && total > maxTokens)
        spilled.reject('tokens', `row of ${total} ${tokenizer!.name} tokens is over the ${maxTokens}-token cap`);
      else if (!near?.isDuplicate(rowText(schema, row))) spilled.add(row);
    };
    const rows = source.rows;
    if (Symbol.asyncIterator in rows) for await (const row of rows) add(row);
    else for (const row of rows) add(row);
    spilled.count();
    const n = shardCount(spilled.rows, spilled.bytes, opts);
    const metadata = { huggingface: huggingfaceMetadata(schema) };
    const files: WrittenFile[] = [];
    const tokenColumns = tokenizer ? (schema.text ?? []).map((c) => [c, tokenColumn(c)] as const) : [];
    const tokens: Record<string, number> = Object.fromEntries(tokenColumns.map(([c]) => [c, 0]));
    const it = spilled.emit();
    // Fault injection for tests: die mid-shard, as a machine losing power would.
    const killAfter = Number(process.env.WORLDLINE_FAULT_KILL_AFTER_ROWS ?? NaN);
    let written = 0;
    for (let i = 0; i < n; i++) {
      const path = join(dir, shardName(i, n));
      const writer = new ParquetFileWriter(`${path}.partial`, schema, { ...opts, metadata });
      const end = Math.floor(((i + 1) * spilled.rows) / n);
      while (written < end) {
        const next = it.next();
        if (next.done) throw new Error(`${schema.name}: the spill ended after ${written} of ${spilled.rows} rows`);
        writer.writeValidated(next.value.row, next.value.size);
        for (const [c, col] of tokenColumns) tokens[c] += (next.value.row[col] as number | null) ?? 0;
        if (++written === killAfter) process.kill(process.pid, 'SIGKILL');
        if ((written & 1023) === 0) opts.signal?.throwIfAborted();
      }
      const file = writer.close();
      renameSync(file.path, path);
      files.push({ ...file, path });
    }
    return { files, spilled, tokens, near };
  } finally {
    spilled.cleanup();
  }
}

function yamlScalar(v: unknown): string {
  return typeof v === 'string' && !/^[A-Za-z0-9_./-]+$/.test(v) ? JSON.stringify(v) : String(v);
}

/** Minimal YAML emitter for the card's front matter (plain data only). */
function toYaml(value: unknown, indent = ''): string {
  if (Array.isArray(value)) {
    if (!value.length) return ' []\n';
    return (
      '\n' +
      value
        .map((item) => {
          if (item && typeof item === 'object') {
            const body = toYaml(item, indent + '  ').replace(/^\n/, '');
            return `${indent}- ${body.slice(indent.length + 2)}`;
          }
          return `${indent}- ${yamlScalar(item)}\n`;
        })
        .join('')
    );
  }
  if (value && typeof value === 'object') {
    return (
      '\n' +
      Object.entries(value)
        .map(([k, v]) => {
          const rendered = v && typeof v === 'object' ? toYaml(v, indent + '  ') : ` ${yamlScalar(v)}\n`;
          return `${indent}${k}:${rendered}`;
        })
        .join('')
    );
  }
  return ` ${yamlScalar(value)}\n`;
}

function processing(manifest: DatasetManifest): string[] {
  const l = manifest.layout;
  const n = manifest.near_dedup;
  const out = [
    l.shuffle
      ? `- Rows are globally shuffled across repositories (seed ${l.shuffle_seed}): each config is ordered by a seeded hash of its rows' content, so no shard holds one repository and the same rows give the same shards.`
      : '- Rows keep the order they were produced in (no shuffle).',
    "- Exact duplicates are removed within each config by a hash of the row's content, timing fields aside (`duplicates removed` above; `dedup_ignores` in manifest.json names the fields left out).",
    `- Rows over ${l.max_row_bytes} bytes (estimated, uncompressed) and records that fail schema validation are rejected and counted, never written; manifest.json keeps the first reasons under \`rejected\`.`,
    `- Shards: ${l.num_shards ? `${l.num_shards} per config` : `about ${l.shard_bytes} uncompressed bytes each`}${l.shard_multiple ? `, a multiple of ${l.shard_multiple} per config` : ''}, rows balanced across a config's shards; row groups at most ${l.row_group_rows} rows and about ${l.row_group_bytes} uncompressed bytes; zstd.`,
    ...(n
      ? [
          `- Near duplicates removed in ${n.configs.join(', ')} before the exact dedup: MinHash over ${n.shingleSize}-word shingles of the text columns, ${n.permutations} permutations seeded ${n.seed}, LSH with ${n.bands} bands of ${n.rows_per_band} rows for an estimated Jaccard similarity of ${n.threshold}; the first row of a group is kept (${n.configs.map((c) => `${c}: ${manifest.configs[c]?.near_duplicates_removed ?? 0} removed`).join(', ')}; \`near_duplicates_removed\` in manifest.json).`,
        ]
      : []),
    ...(manifest.configs.trace_descriptions?.rows
      ? [
          "- `trace_descriptions` holds every description written, kept or not: `kept` is true only where the final return value or exception the text states is the trace's own; the others say why in `reject_reason`. Train on `kept` rows.",
        ]
      : []),
    "- Every shard carries `huggingface` schema metadata (Features in the `datasets` >= 4 form, lists as `List`) and `worldline.schema_hash`; a config's shards share one byte-identical schema.",
  ];
  return out;
}

const kindCounts = (counts: Record<string, number>) =>
  Object.entries(counts)
    .sort((a, b) => a[0].localeCompare(b[0]))
    .map(([k, n]) => `${k} ${n}`)
    .join(', ') || 'none';

function contentSection(c: ContentSummary | undefined): string[] {
  if (!c) return [];
  const r = c.redaction;
  const e = c.exclusions;
  return [
    '## Content safety',
    '',
    r
      ? `Secrets and personal data were replaced with typed placeholders (\`<KIND>\`) in every text column before sharding: ${r.rules} rules (gitleaks' published rules, ${r.rule_source}, ${r.rule_license}; plus private-key blocks, AWS secret keys, e-mail addresses, public IPv4 addresses, high-entropy tokens and secret values of manifest env.vars).`
      : '**Redaction was turned off (--no-redact): rows may contain secrets and personal data.**',
    '',
    ...(r
      ? [
          '| config | rows redacted | placeholders by kind |',
          '|---|---|---|',
          ...Object.entries(r.by_config).map(([config, b]) => `| ${config} | ${b.rows_redacted} | ${kindCounts(b.by_kind)} |`),
          `| all | ${Object.values(r.by_config).reduce((t, b) => t + b.rows_redacted, 0)} | ${kindCounts(r.total)} |`,
          '',
        ]
      : []),
    `- License allow-list (--licenses): ${e.licenses.join(', ')}. Units left out by license: ${kindCounts(e.license_excluded)}.`,
    e.exclude_benchmarks
      ? `- Benchmark decontamination: units from the repositories of ${e.benchmark_sources.map((b) => `${b.name} (${b.repos} repositories; ${b.source})`).join('; ')} are left out. Units left out: ${kindCounts(e.benchmark_excluded)}.`
      : '- Benchmark decontamination was turned off (--no-exclude-benchmarks).',
    '- A unit left out keeps its `repos` row with status `excluded` and the reason; none of its tests, traces, tasks or trajectories are written.',
    '',
  ];
}

/** Tokens per config and text column, for trainers who budget by tokens. */
function tokenSection(manifest: DatasetManifest, schemas: RecordSchema[]): string[] {
  const t = manifest.tokenizer;
  if (!t) return [];
  const cap = t.max_row_tokens === null ? '' : ` Rows over ${t.max_row_tokens} tokens were rejected (\`rows_rejected_tokens\` in manifest.json).`;
  return [
    '## Tokens',
    '',
    `Counted with ${t.name} (${t.source}); each text column's count is in \`<column>_tokens\`.${cap}`,
    '',
    '| config | tokens | by column |',
    '|---|---|---|',
    ...schemas
      .filter((s) => manifest.configs[s.name].tokens)
      .map((s) => {
        const cols = Object.entries(manifest.configs[s.name].tokens ?? {});
        return `| ${s.name} | ${cols.reduce((n, [, v]) => n + v, 0)} | ${cols.map(([c, v]) => `${c}: ${v}`).join(', ')} |`;
      }),
    '',
  ];
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
    "of each repository's own suite, run inside a sandboxed Docker environment.",
    '',
    '## Configs',
    '',
    '| config | rows | shards | duplicates removed | rejected (oversize) | rejected (invalid) | description |',
    '|---|---|---|---|---|---|---|',
    ...schemas.map((s) => {
      const c = manifest.configs[s.name];
      return `| ${s.name} | ${c.rows} | ${c.shards} | ${c.duplicates_removed} | ${c.rows_rejected_oversize} | ${c.rows_rejected_invalid} | ${s.doc} |`;
    }),
    '',
    ...tokenSection(manifest, schemas),
    '## Processing',
    '',
    ...processing(manifest),
    '',
    '## Source licenses',
    '',
    "Each row keeps its repository's license in `repos.license`; the mix across repositories:",
    '',
    '| license | repositories |',
    '|---|---|',
    ...licenses.map(([l, n]) => `| ${l} | ${n} |`),
    '',
    ...contentSection(manifest.content),
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

/** The link a writer makes beside `datasetDir` before renaming it onto `datasetDir`. */
const linkName = (datasetDir: string) => `${datasetDir}.link-${process.pid}`;

/**
 * Points `datasetDir` (a symlink) at `version` with one rename, the only atomic replace POSIX
 * has: a reader sees the old complete version or the new one, never a mix and never nothing.
 */
function publish(datasetDir: string, version: string): void {
  const link = linkName(datasetDir);
  rmSync(link, { force: true });
  symlinkSync(relative(dirname(datasetDir), version), link);
  if (existsSync(datasetDir) && !lstatSync(datasetDir).isSymbolicLink()) {
    // A dataset written before versions existed: keep it as a version so the swap stays atomic.
    renameSync(datasetDir, join(versionsDir(datasetDir), `legacy-${Date.now()}`));
  }
  renameSync(link, datasetDir);
}

/**
 * Drops every version but the published one: superseded ones and those a killed run left, and the
 * links a killed writer made beside the dataset. Only under the writers' lock: no writer is at work.
 */
function pruneVersions(datasetDir: string): string[] {
  const links = `${basename(datasetDir)}.link-`;
  for (const name of readdirSync(dirname(datasetDir))) if (name.startsWith(links)) rmSync(join(dirname(datasetDir), name), { force: true });
  if (!existsSync(versionsDir(datasetDir))) return [];
  const current = existsSync(datasetDir) ? realpathSync(datasetDir) : null;
  const removed = readdirSync(versionsDir(datasetDir)).filter((name) => join(versionsDir(datasetDir), name) !== current);
  for (const name of removed) rmSync(join(versionsDir(datasetDir), name), { recursive: true, force: true });
  return removed;
}

/** `gc`: the versions no writer holds and none publishes (a killed shard's), removed under the writers' lock. */
export function pruneUnpublished(datasetDir: string): Promise<string[]> {
  return withLock(writerLock(datasetDir), async () => pruneVersions(datasetDir));
}

const writerLock = (datasetDir: string) => `${versionsDir(datasetDir)}.lock`;

/**
 * Writes every config into a new version folder, then publishes it as `datasetDir`. Shards are
 * deterministic for the same rows (no timestamps inside); the card and manifest carry the
 * provenance. A process killed at any moment leaves the previous version published.
 */
export async function writeDataset(datasetDir: string, sources: ConfigSource[], opts: DatasetOptions = {}): Promise<DatasetManifest> {
  // One writer at a time: two `shard` runs at once would otherwise each prune the other's
  // version while it is being written. The second waits, then publishes its own complete version.
  return withLock(writerLock(datasetDir), async () => {
    const version = join(versionsDir(datasetDir), `v${Date.now()}-${process.pid}`);
    let manifest: DatasetManifest;
    try {
      manifest = await writeVersion(datasetDir, version, sources, opts);
    } catch (e) {
      // A write that fails (a full disk, a stop) takes its version and link with it: the published
      // version stays as it was, and the space goes back for the next try.
      rmSync(version, { recursive: true, force: true });
      rmSync(linkName(datasetDir), { force: true });
      throw e;
    }
    pruneVersions(datasetDir);
    return manifest;
  });
}

/** Writes every config into `version`, then publishes it. */
async function writeVersion(datasetDir: string, version: string, sources: ConfigSource[], opts: DatasetOptions): Promise<DatasetManifest> {
  await ensureZstd();
  opts.signal?.throwIfAborted();
  mkdirSync(version, { recursive: true });
  const shuffle = opts.shuffle ?? true;
  const manifest: DatasetManifest = {
    format: 'worldline-dataset',
    format_version: 1,
    configs: {},
    shards: [],
    rejected: [],
    layout: {
      shuffle,
      shuffle_seed: shuffle ? (opts.shuffleSeed ?? 0) : null,
      shard_bytes: opts.shardBytes ?? DEFAULT_SHARD_BYTES,
      num_shards: opts.numShards ?? null,
      shard_multiple: opts.shardMultiple ?? null,
      row_group_rows: opts.rowGroupRows ?? DEFAULT_ROW_GROUP_ROWS,
      row_group_bytes: opts.rowGroupBytes ?? DEFAULT_ROW_GROUP_BYTES,
      page_size: opts.pageSize ?? DEFAULT_PAGE_SIZE,
      max_row_bytes: opts.maxRowBytes ?? DEFAULT_MAX_ROW_BYTES,
    },
    provenance: opts.provenance ?? {},
  };
  // Fail on a bad layout before any work, not after the first config's spill.
  shardCount(0, 0, opts);
  if (opts.maxRowTokens !== undefined && !opts.tokenizer) throw new Error('maxRowTokens needs a tokenizer');
  const tokenizer = opts.tokenizer ? await loadTokenizer(opts.tokenizer) : null;
  if (tokenizer) manifest.tokenizer = { name: tokenizer.name, source: tokenizer.source, max_row_tokens: opts.maxRowTokens ?? null };
  for (const source of sources) {
    const name = source.schema.name;
    const { files, spilled, tokens, near } = await writeConfig(version, source, opts, tokenizer);
    if (near && !manifest.near_dedup) manifest.near_dedup = { ...near.settings, configs: opts.nearDedup!.configs, bands: near.bands, rows_per_band: near.rows };
    const hash = schemaHash(tokenizer ? withTokenCounts(source.schema, tokenizer.name) : source.schema);
    manifest.configs[name] = {
      rows: files.reduce((s, f) => s + f.rows, 0),
      shards: files.length,
      schema_version: source.schema.version,
      schema_hash: hash,
      uncompressed_bytes: files.reduce((s, f) => s + f.uncompressedBytes, 0),
      duplicates_removed: spilled.duplicates,
      rows_rejected_oversize: spilled.oversize,
      rows_rejected_invalid: spilled.invalid,
      dedup_ignores: spilled.settings.ignoreFields,
      ...(near ? { near_duplicates_removed: near.removed } : {}),
      ...(tokenizer ? { rows_rejected_tokens: spilled.overTokens, tokens } : {}),
    };
    for (const r of spilled.rejections) manifest.rejected.push({ config: name, ...r });
    for (const f of files) {
      manifest.shards.push({
        path: relative(version, f.path),
        config: name,
        rows: f.rows,
        bytes: f.bytes,
        sha256: await fileSha256(f.path),
        row_groups: f.rowGroups,
        schema_hash: hash,
      });
    }
  }
  rmSync(join(version, '.spill'), { recursive: true, force: true });
  if (opts.content) manifest.content = opts.content();
  // Shards first, then the manifest that names them, then the card; then publish.
  writeFileSync(join(version, 'manifest.json'), JSON.stringify(manifest, null, 2) + '\n');
  writeFileSync(
    join(version, 'README.md'),
    card(
      manifest,
      sources.map((s) => (tokenizer ? withTokenCounts(s.schema, tokenizer.name) : s.schema)),
      opts,
    ),
  );
  opts.signal?.throwIfAborted();
  publish(datasetDir, version);
  return manifest;
}
