/**
 * The option groups the commands share, each with a yargs check: a bad value is a usage error
 * (exit 2, with a pointer to --help) before any work starts. Values are checked with `check`,
 * not `coerce`: yargs runs coerce callbacks before its own validation (their message would
 * replace "Missing required argument") and hands their errors to .fail() re-wrapped, so a
 * UsageError would no longer be told apart (exit 2) from a failure (exit 1). Coerce is kept for
 * parsing that cannot fail (comma lists).
 */
import { existsSync, statSync } from 'node:fs';
import { join, resolve } from 'node:path';
import type { Argv } from 'yargs';
import { PERMISSIVE_LICENSES } from '../core/license.js';
import type { ContentPolicy } from '../datasets/content_policy.js';
import type { DatasetLayout } from '../datasets/dataset_writer.js';
import { DEFAULT_MAX_ROW_BYTES, DEFAULT_SHARD_BYTES } from '../datasets/dataset_writer.js';
import { DEFAULT_ISSUE_FIX_SHARE } from '../datasets/mix.js';
import { NEAR_DEDUP_DEFAULTS } from '../datasets/near_dedup.js';
import { DEFAULT_ROW_GROUP_ROWS } from '../datasets/parquet/writer.js';
import { DEFAULT_TOKENIZER, TOKENIZERS } from '../datasets/tokens.js';
import { cutoffTime } from '../pipeline/envs/index/lock.js';
import { defaultPipIndex } from '../pipeline/envs/index/settings.js';
import { DEFAULT_QUEUE, redisConnection } from '../pipeline/queue/connection.js';
import { UsageError } from '../pipeline/run.js';
import { DEFAULTS, type PipelineOptions, type TraceCaps } from '../pipeline/runtime/options.js';
import { PROGRESS_MODES } from '../pipeline/runtime/progress.js';
import { registryHost } from '../pipeline/sandbox/registry.js';
import { readIssueExport } from '../pipeline/tasks/issue_export.js';

const envInt = (...names: string[]) => {
  for (const n of names) if (process.env[n] !== undefined && process.env[n] !== '') return Number(process.env[n]);
  return undefined;
};

/**
 * The rank a cluster scheduler gave this process: ours, else a Slurm array's index counted from
 * the array's first index and step (`--array=1-8` numbers tasks from 1, `--array=0-15:4` steps
 * by 4), else a Kubernetes indexed Job's completion index.
 */
const schedulerRank = (): number | undefined => {
  const own = envInt('WORLDLINE_RANK');
  if (own !== undefined) return own;
  const slurm = envInt('SLURM_ARRAY_TASK_ID');
  if (slurm !== undefined) return (slurm - (envInt('SLURM_ARRAY_TASK_MIN') ?? 0)) / (envInt('SLURM_ARRAY_TASK_STEP') ?? 1);
  return envInt('JOB_COMPLETION_INDEX');
};

/** The items of a comma-separated option, trimmed, empty ones dropped. */
export const commaList = (v: unknown): string[] =>
  String(v)
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);

const inUnitRange = (what: string) => (name: string, v: number) => {
  if (!(v >= 0 && v <= 1)) throw new UsageError(`${name} must be ${what} (got ${v})`);
  return v;
};
export const share = inUnitRange('a share between 0 and 1');
const probability = inUnitRange('a probability in 0..1');

/** A positive integer option; an option left out stays undefined. */
export const positiveInt = <T extends number | undefined>(name: string, v: T): T => {
  if (v !== undefined && !(Number.isInteger(v) && v > 0)) throw new UsageError(`${name} must be a positive integer (got ${v})`);
  return v;
};

/** A whole number >= min (counts, limits, rows); an option left out stays undefined. */
export const wholeAtLeast = <T extends number | undefined>(name: string, v: T, min = 0): T => {
  if (v !== undefined && !(Number.isInteger(v) && v >= min)) throw new UsageError(`${name} must be a whole number >= ${min} (got ${v})`);
  return v;
};

/**
 * Every number option holds a number: yargs turns `--limit abc` into NaN, which no comparison
 * catches (NaN is neither below nor above a bound), so one check over all of them, at the top.
 */
export function numbersAreNumbers(argv: Record<string, unknown>): true {
  for (const [key, v] of Object.entries(argv)) {
    if (/[A-Z]/.test(key) || key.length < 2) continue; // yargs' camelCase copies and one-letter aliases
    if (typeof v === 'number' && Number.isNaN(v)) throw new UsageError(`--${key} takes a number`);
  }
  return true;
}

const SIZE = /^(\d+(?:\.\d+)?)\s*(?:([kmgt])(i)?b?|(b))?$/i;
const MiB = 2 ** 20;

/**
 * Bytes of a size: a number with K, M, G or T (powers of 1000) or Ki, Mi, Gi, Ti (powers of
 * 1024), as Kubernetes writes quantities, or B for bytes; a bare number keeps the option's older
 * unit (`bare` bytes), so `--memory 4096` is still 4096 MiB and `--image-budget 20` 20 GB.
 */
export function sizeBytes(name: string, v: string | number, bare: number): number {
  const m = SIZE.exec(String(v).trim());
  if (!m) throw new UsageError(`${name} takes a size such as 500M, 4G or 4Gi (got ${v})`);
  const [, n, unit, binary, bytes] = m;
  if (!unit) return Number(n) * (bytes ? 1 : bare);
  return Number(n) * (binary ? 1024 : 1000) ** ('kmgt'.indexOf(unit.toLowerCase()) + 1);
}

/** A size in whole bytes (shards, row groups, rows), checked >= 1. */
const bytesOf = (name: string, v: string | undefined): number | undefined => {
  if (v === undefined) return undefined;
  const n = Math.round(sizeBytes(name, v, 1));
  if (n < 1) throw new UsageError(`${name} must be at least 1 byte (got ${v})`);
  return n;
};

/** A size in whole MiB (the container limits), checked >= min MiB. */
const mibOf = (name: string, v: string, min: number): number => {
  const n = Math.floor(sizeBytes(name, v, MiB) / MiB);
  if (n < min) throw new UsageError(`${name} must be at least ${min}Mi (got ${v})`);
  return n;
};

/** --image-budget in GB (10^9 bytes, Docker's image sizes), or undefined without one. */
export const imageBudgetGb = (v: string | undefined): number | undefined => (v === undefined ? undefined : sizeBytes('--image-budget', v, 1e9) / 1e9);

/** A number >= min: the pipeline's timeouts and limits. */
const atLeast = (name: string, v: number, min = 1) => {
  if (!Number.isFinite(v) || v < min) throw new UsageError(`--${name} must be a number >= ${min} (got ${v})`);
  return v;
};

/** The phases --trace-phases names; an error quotes the value as given. */
function tracePhases(option: string): string[] {
  const phases = commaList(option);
  const bad = phases.filter((p) => !['setup', 'call', 'teardown'].includes(p));
  if (bad.length || !phases.length) throw new UsageError(`--trace-phases takes setup, call and teardown (got ${option})`);
  return phases;
}

/** --out and --json, for the commands that work on an output folder. */
export const outputOptions = <T>(y: Argv<T>) =>
  y
    .option('out', { type: 'string', default: 'out', describe: 'Output folder (ledger, checkouts, logs, dataset/)' })
    .option('json', { type: 'boolean', default: false, describe: 'Print machine-readable JSON' })
    .group(['out', 'json'], 'Output:');

/** --out must name an output folder that exists: a typo is a usage error, never a new empty folder or an all-zero table. */
export const existingOut = <T extends { out: string }>(y: Argv<T>) =>
  y.check((a) => {
    if (!statSync(a.out, { throwIfNoEntry: false })?.isDirectory())
      throw new UsageError(`--out ${a.out}: no such folder (the output folder a worldline run --out ${a.out} writes)`);
    return true;
  });

/** How run and worker show progress: bars on a terminal, JSON lines off one. */
export const progressOption = <T>(y: Argv<T>) =>
  y
    .option('progress', {
      choices: PROGRESS_MODES,
      default: 'auto' as const,
      describe: 'auto: bars on a terminal, JSON lines (one per event, then the totals) on stderr otherwise',
    })
    .group(['progress'], 'Output:');

/** The Redis and queue of enqueue, worker and status. */
export const queueOptions = <T>(y: Argv<T>) =>
  y
    .option('redis', { type: 'string', default: process.env.WORLDLINE_REDIS, describe: "The queue's Redis: redis://host:port[/db] (or WORLDLINE_REDIS)" })
    .option('queue', { type: 'string', default: DEFAULT_QUEUE, describe: 'Queue name (several runs can share one Redis)' })
    .group(['redis', 'queue'], 'Queue:')
    .check((a) => {
      if (a.redis !== undefined) {
        try {
          redisConnection(a.redis);
        } catch (e) {
          throw new UsageError((e as Error).message);
        }
      }
      return true;
    });

/** A dataset folder (one with a manifest.json), or a usage error that says what to name. */
function isDataset(dir: string): true {
  if (!statSync(dir, { throwIfNoEntry: false })?.isDirectory()) throw new UsageError(`${dir}: no such folder (name a dataset: OUT/dataset of a run)`);
  if (!existsSync(join(dir, 'manifest.json'))) throw new UsageError(`${dir}: not a dataset (no manifest.json); a run writes its dataset to OUT/dataset`);
  return true;
}

/** The dataset folder the dataset commands read, as their first word. */
export const datasetDir = <T>(y: Argv<T>) =>
  y.positional('dir', { type: 'string', demandOption: true, describe: 'The dataset folder (OUT/dataset)' }).check((a) => isDataset(a.dir as string));

/** `push`'s dataset and registry: both named, the dataset a dataset, the registry HOST[:PORT]. */
export const pushOptions = <T>(y: Argv<T>) =>
  y
    .option('dataset', { type: 'string', demandOption: true, describe: 'The dataset folder (OUT/dataset) whose tasks name the images' })
    .option('registry', {
      type: 'string',
      demandOption: true,
      describe: "The registry, HOST[:PORT]: plain HTTP on 127.0.0.0/8, elsewhere TLS the engine trusts (or the engine's insecure-registries)",
    })
    .option('json', { type: 'boolean', default: false, describe: 'Print the report as JSON' })
    .check((a) => {
      isDataset(a.dataset);
      try {
        registryHost(a.registry);
      } catch (e) {
        throw new UsageError(`--registry: ${(e as Error).message}`);
      }
      return true;
    });

export type LayoutArgs = {
  'shard-bytes': string;
  'num-shards'?: number;
  'shard-multiple'?: number;
  'row-group-rows': number;
  'row-group-bytes'?: string;
  shuffle: boolean;
  'shuffle-seed': number;
  'max-row-bytes'?: string;
  tokenizer: string;
  'max-row-tokens'?: number;
  'near-dedup': boolean;
  'near-dedup-threshold': number;
  'shingle-size': number;
  'near-dedup-seed': number;
  'issue-fix-share': number;
  licenses: string[];
  redact: boolean;
  'exclude-benchmarks': boolean;
};

/** How `shard` lays the dataset out, what it keeps, and the run's task mix. */
export const layoutOptions = <T>(y: Argv<T>) =>
  y
    .option('shard-bytes', { type: 'string', default: `${DEFAULT_SHARD_BYTES / 1e6}M`, describe: 'Target uncompressed size per shard (a size: 500M, 1G)' })
    .option('num-shards', { type: 'number', describe: 'Exactly this many shards per config' })
    .option('shard-multiple', { type: 'number', describe: 'Round the shard count up to a multiple of K (trainer world sizes)' })
    .option('row-group-rows', { type: 'number', default: DEFAULT_ROW_GROUP_ROWS, describe: 'At most this many rows per row group' })
    .option('row-group-bytes', { type: 'string', describe: 'At most about this uncompressed size per row group (a size: 64M)' })
    .option('shuffle', { type: 'boolean', default: true, describe: 'Seeded global shuffle across repositories (--no-shuffle keeps order)' })
    .option('shuffle-seed', { type: 'number', default: 0, describe: 'The shuffle seed' })
    .option('max-row-bytes', { type: 'string', describe: `Rows larger than this are rejected and counted (a size; default ${DEFAULT_MAX_ROW_BYTES / 1e6}M)` })
    .option('tokenizer', {
      type: 'string',
      default: DEFAULT_TOKENIZER,
      describe: `Count each text column's tokens into <column>_tokens with ${TOKENIZERS.join(', ')}, a byte-level BPE tokenizer.json, or none`,
    })
    .option('max-row-tokens', { type: 'number', describe: 'Rows whose text holds more tokens than this are rejected and counted' })
    .option('near-dedup', { type: 'boolean', default: false, describe: 'Remove near-duplicate traces and trajectories (MinHash-LSH over their text)' })
    .option('near-dedup-threshold', {
      type: 'number',
      default: NEAR_DEDUP_DEFAULTS.threshold,
      describe: 'Estimated Jaccard similarity that counts as a near duplicate',
    })
    .option('shingle-size', { type: 'number', default: NEAR_DEDUP_DEFAULTS.shingleSize, describe: 'Words per shingle for --near-dedup' })
    .option('near-dedup-seed', { type: 'number', default: NEAR_DEDUP_DEFAULTS.seed, describe: "Seed of --near-dedup's MinHash permutations" })
    .option('issue-fix-share', {
      type: 'number',
      default: DEFAULT_ISSUE_FIX_SHARE,
      describe: 'Share of issue-fix tasks in the run; tasks of the over-represented kind are dropped (never invented)',
    })
    .option('licenses', {
      type: 'string',
      default: PERMISSIVE_LICENSES.join(','),
      defaultDescription: `the ${PERMISSIVE_LICENSES.length} permissive ones: ${PERMISSIVE_LICENSES.join(', ')}`,
      describe: 'SPDX ids of the licenses kept (add "unknown" to keep unlicensed repositories; "*" keeps all); other units are excluded with the reason',
      coerce: (v: string | string[]) => (Array.isArray(v) ? v : commaList(v)),
    })
    .option('redact', {
      type: 'boolean',
      default: true,
      describe: 'Replace secrets and personal data with typed placeholders (--no-redact turns it off)',
    })
    .option('exclude-benchmarks', {
      type: 'boolean',
      default: true,
      describe: "Leave out units from benchmarks' repositories (SWE-bench, SWE-Gym; datasets/benchmark_repos.json)",
    })
    .group(
      [
        'issue-fix-share',
        'licenses',
        'exclude-benchmarks',
        'redact',
        'tokenizer',
        'max-row-tokens',
        'max-row-bytes',
        'near-dedup',
        'near-dedup-threshold',
        'shingle-size',
        'near-dedup-seed',
        'shard-bytes',
        'num-shards',
        'shard-multiple',
        'row-group-rows',
        'row-group-bytes',
        'shuffle',
        'shuffle-seed',
      ],
      'Shard (the dataset: task mix, content policy, layout):',
    )
    .check((a) => {
      const numShards = positiveInt('--num-shards', a['num-shards']);
      const shardMultiple = positiveInt('--shard-multiple', a['shard-multiple']);
      if (numShards && shardMultiple && numShards % shardMultiple)
        throw new UsageError(`--num-shards ${numShards} is not a multiple of --shard-multiple ${shardMultiple}`);
      bytesOf('--shard-bytes', a['shard-bytes']);
      positiveInt('--row-group-rows', a['row-group-rows']);
      bytesOf('--row-group-bytes', a['row-group-bytes']);
      bytesOf('--max-row-bytes', a['max-row-bytes']);
      positiveInt('--max-row-tokens', a['max-row-tokens']);
      const tok = a.tokenizer;
      if (tok !== 'none' && !(TOKENIZERS as readonly string[]).includes(tok) && !(tok.endsWith('.json') && existsSync(tok)))
        throw new UsageError(`--tokenizer ${tok}: not one of ${TOKENIZERS.join(', ')}, none, or an existing tokenizer.json`);
      positiveInt('--shingle-size', a['shingle-size']);
      if (!(a['near-dedup-threshold'] > 0 && a['near-dedup-threshold'] < 1))
        throw new UsageError(`--near-dedup-threshold must be between 0 and 1 (got ${a['near-dedup-threshold']})`);
      if (a['max-row-tokens'] !== undefined && a.tokenizer === 'none') throw new UsageError('--max-row-tokens needs a tokenizer (not --tokenizer none)');
      share('--issue-fix-share', a['issue-fix-share']);
      return true;
    });

export function toContentPolicy(a: LayoutArgs): ContentPolicy {
  if (!a.licenses.length) throw new UsageError('--licenses names no license (use "*" to keep every license)');
  return { licenses: a.licenses, redact: a.redact, excludeBenchmarks: a['exclude-benchmarks'] };
}

export function toLayout(a: LayoutArgs): DatasetLayout {
  return {
    shardBytes: bytesOf('--shard-bytes', a['shard-bytes']),
    numShards: a['num-shards'],
    shardMultiple: a['shard-multiple'],
    rowGroupRows: a['row-group-rows'],
    rowGroupBytes: bytesOf('--row-group-bytes', a['row-group-bytes']),
    shuffle: a.shuffle,
    shuffleSeed: a['shuffle-seed'],
    maxRowBytes: bytesOf('--max-row-bytes', a['max-row-bytes']),
    tokenizer: a.tokenizer === 'none' ? undefined : a.tokenizer.endsWith('.json') ? resolve(a.tokenizer) : a.tokenizer,
    maxRowTokens: a['max-row-tokens'],
    nearDedup: a['near-dedup']
      ? { configs: ['traces', 'trajectories'], threshold: a['near-dedup-threshold'], shingleSize: a['shingle-size'], seed: a['near-dedup-seed'] }
      : undefined,
  };
}

/** --image-budget, for run and worker (a host's disk, not a job's option). */
export const imageBudgetOption = {
  type: 'string',
  describe:
    'Env images of finished units kept on this host (a size: 20G; a bare number is GB); over it, least recently used ones are removed (base images stay)',
} as const;

/** The manifest, the first group of every pipeline command's help. */
const manifestOption = <T>(y: Argv<T>) =>
  y.option('manifest', { type: 'string', demandOption: true, describe: 'Manifest: JSON Lines, one repository a line' }).group(['manifest'], 'Required:');

/** How many units at once, which, and how long each may take. */
const unitOptions = <T>(y: Argv<T>) =>
  y
    .option('concurrency', { type: 'number', default: DEFAULTS.concurrency, describe: 'Units in flight at once' })
    .option('retry-failed', { type: 'boolean', default: false, describe: 'Run again the units whose stage failed' })
    .option('unit-budget', {
      type: 'number',
      describe:
        'Wall seconds a unit may spend across its stages in this run; then its remaining work is skipped with the reason recorded (a rerun continues it)',
    })
    .group(['concurrency', 'retry-failed', 'unit-budget'], 'Units:')
    .check((a) => {
      atLeast('concurrency', a.concurrency);
      if (a['unit-budget'] !== undefined) atLeast('unit-budget', a['unit-budget']);
      return true;
    });

/** How environments are built and every container is bounded (build, validate, trace, forage). */
const sandboxOptions = <T>(y: Argv<T>) =>
  y
    .option('base-image', { type: 'string', describe: 'Use this local image as the base instead of the debootstrap ones' })
    .option('env-policy', {
      choices: ['rules', 'openai'] as const,
      default: DEFAULTS.envPolicy,
      describe:
        "Who repairs a bare line's environment when its suite does not collect: the rules alone, or also a model on the --base-url server (it may only add Debian packages, pytest arguments or move the base; each change checked)",
    })
    .option('pip-index', {
      type: 'string',
      describe:
        "Where a bare line's requirements Debian cannot meet come from: auto (this host's pip configuration: its indexes, find-links, certificate, proxy), a simple index URL, a folder of wheels, or none (Debian alone, offline). Default: WORLDLINE_PIP_INDEX, else auto when this host's pip reaches an index, else none. Resolved and downloaded on this host, locked per unit, installed in the build from the host's cache with no network",
    })
    .option('index-for', {
      choices: ['missing', 'all'] as const,
      default: DEFAULTS.indexFor,
      describe:
        "With an index, which Python requirements it gives: missing (those no Debian package meets) or all (every one as of the cut-off; Debian's package only where the index has no wheel)",
    })
    .option('exclude-newer', {
      type: 'string',
      describe: "The index's upload cut-off (a date or RFC 3339 time) for every unit, instead of each commit's date",
    })
    .option('build-timeout', { type: 'number', default: DEFAULTS.buildTimeoutS, describe: 'Image build timeout, seconds' })
    .option('memory', {
      type: 'string',
      default: `${DEFAULTS.memoryMb / 1024}Gi`,
      describe: 'Container memory limit (a size: 4Gi, 512Mi; a bare number is MiB)',
    })
    .option('work-disk', {
      type: 'string',
      default: `${DEFAULTS.workDiskMb / 1024}Gi`,
      describe: "Disk budget of a container's work folder (a size; a bare number is MiB)",
    })
    .option('cpus', { type: 'number', default: DEFAULTS.cpus, describe: 'Container CPU limit' })
    .option('pids', { type: 'number', default: DEFAULTS.pids, describe: 'Container process limit' })
    .option('image-budget', imageBudgetOption)
    .group(
      ['base-image', 'env-policy', 'pip-index', 'index-for', 'exclude-newer', 'build-timeout', 'memory', 'work-disk', 'cpus', 'pids', 'image-budget'],
      'Build and sandbox (every container):',
    )
    .check((a) => {
      atLeast('build-timeout', a['build-timeout']);
      mibOf('--memory', a.memory, 64);
      mibOf('--work-disk', a['work-disk'], 16);
      atLeast('cpus', a.cpus, 0.1);
      atLeast('pids', a.pids, 16);
      imageBudgetGb(a['image-budget']);
      if (a['exclude-newer'] !== undefined) cutoffTime(a['exclude-newer']);
      return true;
    });

const validateOptions = <T>(y: Argv<T>) =>
  y
    .option('validate-runs', { type: 'number', default: DEFAULTS.validateRuns, describe: 'Suite runs per unit; outcomes that differ are flaky' })
    .option('plain-parity', {
      type: 'boolean',
      default: DEFAULTS.plainParity,
      describe:
        'Validate also runs each suite as plain `python3 -m pytest` (no Worldline code) and records the tests whose outcome differs (--no-plain-parity: skip it)',
    })
    .option('test-timeout', { type: 'number', default: DEFAULTS.testTimeoutS, describe: 'Per-test timeout, seconds (0: off)' })
    .option('suite-timeout', { type: 'number', default: DEFAULTS.suiteTimeoutS, describe: 'Wall timeout of one suite run, seconds (grading too)' })
    .group(['validate-runs', 'plain-parity', 'test-timeout', 'suite-timeout'], 'Validate:')
    .check((a) => {
      wholeAtLeast('--validate-runs', a['validate-runs'], 1);
      atLeast('test-timeout', a['test-timeout'], 0);
      atLeast('suite-timeout', a['suite-timeout']);
      return true;
    });

const traceCapsText = (c: TraceCaps) => [c.testEpisodes, `${c.testBytes / MiB}Mi`, c.unitEpisodes, `${c.unitBytes / MiB}Mi`].join(',');

function traceCaps(text: string): TraceCaps {
  const parts = text.split(',').map((x) => x.trim());
  const bad = () =>
    new UsageError(`--trace-caps: TEST_EPISODES,TEST_BYTES,UNIT_EPISODES,UNIT_BYTES, whole numbers >= 0 and sizes such as 8Mi (0: no cap), got "${text}"`);
  if (parts.length !== 4) throw bad();
  const n = parts.map((x, i) => {
    if (i % 2) {
      try {
        return sizeBytes('--trace-caps', x, 1);
      } catch {
        throw bad();
      }
    }
    return /^\d+$/.test(x) ? Number(x) : Number.NaN;
  });
  if (n.some((x) => !Number.isInteger(x) || x < 0)) throw bad();
  return { testEpisodes: n[0], testBytes: n[1], unitEpisodes: n[2], unitBytes: n[3] };
}

const traceOptions = <T>(y: Argv<T>) =>
  y
    .option('step-in', { type: 'number', default: DEFAULTS.traceStepIn, describe: 'Probability that an episode steps into a callee' })
    .option('trace-seed', { type: 'number', default: DEFAULTS.traceSeed, describe: 'Seed of the step-in choices (and of which episodes are described)' })
    .option('max-events', { type: 'number', default: DEFAULTS.traceMaxEvents, describe: 'Raw events per test before it is cut (truncated)' })
    .option('trace-phases', { type: 'string', default: DEFAULTS.tracePhases.join(','), describe: 'Test phases to trace (call, setup, teardown)' })
    .option('determinism-sample', {
      type: 'number',
      default: DEFAULTS.determinismSample,
      describe: 'Trace the units on the first N manifest lines twice and record the share of episodes that differ',
    })
    .option('trace-caps', {
      type: 'string',
      default: traceCapsText(DEFAULTS.traceCaps),
      describe:
        'Episodes and bytes kept per test and per unit, TEST_EPISODES,TEST_BYTES,UNIT_EPISODES,UNIT_BYTES (sizes such as 8Mi; 0: no cap); past them a seeded sample',
    })
    .option('trace-slowdown', { type: 'number', default: DEFAULTS.traceSlowdown, describe: 'Timeouts are multiplied by this under the tracer' })
    .group(['step-in', 'trace-seed', 'max-events', 'trace-phases', 'trace-caps', 'trace-slowdown', 'determinism-sample'], 'Trace:')
    .option('describe-share', {
      type: 'number',
      default: DEFAULTS.describeShare,
      describe: "Share of each unit's trace episodes described in natural language (chosen by a hash seeded with --trace-seed)",
    })
    .option('describe-model', {
      type: 'boolean',
      default: false,
      describe: 'The model server (--base-url, --model) writes the trace descriptions (else the template describer)',
    })
    .group(['describe-share', 'describe-model'], 'Describe:')
    .check((a) => {
      probability('--step-in', a['step-in']);
      probability('--describe-share', a['describe-share']);
      tracePhases(a['trace-phases']);
      traceCaps(a['trace-caps']);
      atLeast('max-events', a['max-events']);
      atLeast('trace-slowdown', a['trace-slowdown']);
      wholeAtLeast('--determinism-sample', a['determinism-sample']);
      return true;
    });

const forageOptions = <T>(y: Argv<T>) =>
  y
    .option('policy', {
      choices: ['oracle', 'openai', 'replay', 'none'] as const,
      default: DEFAULTS.policy,
      describe: 'Who works the tasks (oracle: the gold fix through the real tools; openai: a model server; replay: recorded trajectories; none: tasks only)',
    })
    .option('mutation-tries', { type: 'number', default: DEFAULTS.mutationTries, describe: 'Mutation candidates tried per unit' })
    .option('mutations-per-unit', { type: 'number', default: DEFAULTS.mutationsPerUnit, describe: 'Mutation-fix tasks kept per unit at most' })
    .option('forage-seed', { type: 'number', default: DEFAULTS.forageSeed, describe: 'Seed of candidate and site choices' })
    .option('task-concurrency', {
      type: 'number',
      default: DEFAULTS.taskConcurrency,
      describe: 'Tasks of one unit worked at once (each in its own containers)',
    })
    .option('mutant-test-timeout', {
      type: 'number',
      default: DEFAULTS.mutantTestTimeoutS,
      describe: 'Per-test timeout while running a mutant, seconds',
    })
    .group(['policy', 'mutation-tries', 'mutations-per-unit', 'forage-seed', 'task-concurrency', 'mutant-test-timeout'], 'Forage (tasks and rollouts):')
    .check((a) => {
      wholeAtLeast('--mutation-tries', a['mutation-tries']);
      wholeAtLeast('--mutations-per-unit', a['mutations-per-unit']);
      wholeAtLeast('--task-concurrency', a['task-concurrency'], 1);
      atLeast('mutant-test-timeout', a['mutant-test-timeout']);
      return true;
    });

/** Where forage's tasks and rollouts come from, and a rollout's budget. */
const rolloutOptions = <T extends { policy: PipelineOptions['policy'] }>(y: Argv<T>) =>
  y
    .option('replay-from', { type: 'string', describe: 'With --policy replay: a trajectories dataset folder whose rollouts are replayed' })
    .option('issues', { type: 'string', describe: 'Issue export (JSON Lines: number, title, body) for issue-fix problem statements' })
    .option('issue-candidates', { type: 'number', default: DEFAULTS.issueCandidates, describe: 'Issue-fix candidates mined per repository (0: none)' })
    .option('statement-model', {
      type: 'boolean',
      default: false,
      describe: 'The model server (--base-url, --model) writes issue-fix statements where no issue is linked',
    })
    .option('max-turns', { type: 'number', default: DEFAULTS.maxTurns, describe: 'Turns per rollout' })
    .option('max-tokens', { type: 'number', default: DEFAULTS.maxTokens, describe: 'Tokens per rollout' })
    .option('max-wall', { type: 'number', default: DEFAULTS.maxWallS, describe: 'Wall seconds per rollout' })
    .option('bash-timeout', { type: 'number', default: DEFAULTS.bashTimeoutS, describe: 'Seconds per bash call in a rollout' })
    .group(
      ['replay-from', 'issues', 'issue-candidates', 'statement-model', 'max-turns', 'max-tokens', 'max-wall', 'bash-timeout'],
      'Forage (tasks and rollouts):',
    )
    .check((a) => {
      if (a.policy === 'replay' && (!a['replay-from'] || !existsSync(join(a['replay-from'], 'manifest.json')))) {
        throw new UsageError('--policy replay needs --replay-from DATASET_DIR (a dataset with a trajectories config)');
      }
      if (a.issues) {
        try {
          readIssueExport(a.issues);
        } catch (e) {
          throw new UsageError((e as Error).message);
        }
      }
      wholeAtLeast('--issue-candidates', a['issue-candidates']);
      atLeast('max-turns', a['max-turns']);
      atLeast('max-tokens', a['max-tokens']);
      atLeast('max-wall', a['max-wall']);
      atLeast('bash-timeout', a['bash-timeout']);
      return true;
    });

/** The OpenAI-compatible server of `--policy openai`, `--statement-model` and `--describe-model`; checked only when one of them uses it. */
const openaiOptions = <
  T extends { policy: PipelineOptions['policy']; 'statement-model': boolean; 'describe-model': boolean; 'env-policy': PipelineOptions['envPolicy'] },
>(
  y: Argv<T>,
) =>
  y
    .option('base-url', {
      type: 'string',
      default: process.env.OPENAI_BASE_URL,
      describe: 'The OpenAI-compatible server, e.g. http://127.0.0.1:8000/v1 (key from OPENAI_API_KEY)',
    })
    .option('model', { type: 'string', describe: 'Model name' })
    .option('temperature', { type: 'number', describe: 'Sampling temperature' })
    .option('top-p', { type: 'number', describe: 'Nucleus sampling' })
    .option('max-completion-tokens', { type: 'number', describe: 'Tokens per completion' })
    .option('sampling-seed', { type: 'number', describe: 'Sampling seed, where the server supports it' })
    .option('request-timeout', { type: 'number', default: 600, describe: 'Seconds per request' })
    .option('max-retries', { type: 'number', default: 6, describe: 'Retries on 408/409/429/5xx and connection errors' })
    .group(
      ['base-url', 'model', 'temperature', 'top-p', 'max-completion-tokens', 'sampling-seed', 'request-timeout', 'max-retries'],
      'Model server (--policy openai, --statement-model, --describe-model, --env-policy openai):',
    )
    .check((a) => {
      if (a.temperature !== undefined) atLeast('temperature', a.temperature, 0);
      if (a['top-p'] !== undefined) share('--top-p', a['top-p']);
      positiveInt('--max-completion-tokens', a['max-completion-tokens']);
      const user =
        a.policy === 'openai'
          ? '--policy openai'
          : a['statement-model']
            ? '--statement-model'
            : a['describe-model']
              ? '--describe-model'
              : a['env-policy'] === 'openai'
                ? '--env-policy openai'
                : null;
      if (!user) return true;
      if (!a['base-url'] || !a.model) throw new UsageError(`${user} needs --base-url (or OPENAI_BASE_URL) and --model`);
      atLeast('max-retries', a['max-retries'], 0);
      atLeast('request-timeout', a['request-timeout']);
      return true;
    });

/** Older commits, and this process's share of the units (--rank is checked against the units by runPipeline). */
const spreadOptions = <T>(y: Argv<T>) =>
  y
    .option('commits', {
      type: 'number',
      default: DEFAULTS.historyCommits,
      describe: 'Also trace up to K older commits per repository, sampled from its git log',
    })
    .option('commit-tries', {
      type: 'number',
      default: DEFAULTS.historyTries,
      describe: 'Older commits tried to find K that work (0: 10 per wanted, at most 40)',
    })
    .option('rank', {
      type: 'number',
      default: schedulerRank() ?? 0,
      describe: "This process's share of the units (0-based)",
    })
    .option('world-size', {
      type: 'number',
      default: envInt('WORLDLINE_WORLD_SIZE', 'SLURM_ARRAY_TASK_COUNT') ?? 1,
      describe: 'How many processes share the units',
    })
    .option('shard', {
      type: 'boolean',
      default: false,
      describe: 'With --world-size > 1: this rank also writes the dataset (by default no rank does; run worldline shard once after all)',
    })
    .group(['commits', 'commit-tries', 'rank', 'world-size', 'shard'], 'Units:')
    .check((a) => {
      wholeAtLeast('--commits', a.commits);
      wholeAtLeast('--commit-tries', a['commit-tries']);
      return true;
    });

/**
 * Everything a pipeline command takes, its help grouped by the stage each option affects, the
 * required manifest first. Checks run in the order the groups are added: of several bad values,
 * the first group's is reported.
 */
export const pipelineOptions = (y: Argv) => {
  const run = unitOptions(progressOption(outputOptions(manifestOption(y))));
  const stages = forageOptions(traceOptions(validateOptions(sandboxOptions(spreadOptions(run)))));
  return layoutOptions(openaiOptions(rolloutOptions(stages)));
};

export type PipelineArgs = Awaited<ReturnType<ReturnType<typeof pipelineOptions>['parse']>>;

/** `none` is no index (undefined: the resolutions and keys of a run without one); a folder, absolute. */
function pipIndexOf(given: string): string | undefined {
  if (given === 'none') return undefined;
  return /^([a-z][a-z0-9+.-]*:\/\/|auto$)/i.test(given) ? given : resolve(given);
}

/** The checked arguments as the pipeline takes them. */
export function toPipelineOptions(a: PipelineArgs): PipelineOptions {
  return {
    out: resolve(a.out),
    layout: toLayout(a),
    content: toContentPolicy(a),
    issueFixShare: a['issue-fix-share'],
    concurrency: a.concurrency,
    retryFailed: a['retry-failed'],
    unitBudgetS: a['unit-budget'],
    baseImage: a['base-image'],
    envPolicy: a['env-policy'],
    pipIndex: pipIndexOf(a['pip-index'] ?? defaultPipIndex()),
    indexFor: a['index-for'],
    excludeNewer: a['exclude-newer'] === undefined ? undefined : cutoffTime(a['exclude-newer']),
    buildTimeoutS: a['build-timeout'],
    validateRuns: a['validate-runs'],
    plainParity: a['plain-parity'],
    testTimeoutS: a['test-timeout'],
    suiteTimeoutS: a['suite-timeout'],
    memoryMb: mibOf('--memory', a.memory, 64),
    workDiskMb: mibOf('--work-disk', a['work-disk'], 16),
    cpus: a.cpus,
    pids: a.pids,
    traceStepIn: a['step-in'],
    traceSeed: a['trace-seed'],
    tracePhases: tracePhases(a['trace-phases']),
    traceMaxEvents: a['max-events'],
    traceCaps: traceCaps(a['trace-caps']),
    determinismSample: a['determinism-sample'],
    traceSlowdown: a['trace-slowdown'],
    describeShare: a['describe-share'],
    describeModel: a['describe-model'],
    forageSeed: a['forage-seed'],
    mutationTries: a['mutation-tries'],
    mutationsPerUnit: a['mutations-per-unit'],
    taskConcurrency: a['task-concurrency'],
    mutantTestTimeoutS: a['mutant-test-timeout'],
    policy: a.policy,
    // The checks made sure that an openai policy has its server and model, and a replay policy its recordings.
    statementModel: a['statement-model'],
    openai:
      a.policy === 'openai' || a['statement-model'] || a['describe-model'] || a['env-policy'] === 'openai'
        ? {
            baseURL: a['base-url']!,
            model: a.model!,
            temperature: a.temperature,
            topP: a['top-p'],
            maxTokens: a['max-completion-tokens'],
            seed: a['sampling-seed'],
            maxRetries: a['max-retries'],
            timeoutMs: a['request-timeout'] * 1000,
          }
        : undefined,
    replayFrom: a.policy === 'replay' ? resolve(a['replay-from']!) : undefined,
    issuesFile: a.issues ? resolve(a.issues) : undefined,
    issueCandidates: a['issue-candidates'],
    maxTurns: a['max-turns'],
    maxTokens: a['max-tokens'],
    maxWallS: a['max-wall'],
    bashTimeoutS: a['bash-timeout'],
    historyCommits: a.commits,
    historyTries: a['commit-tries'],
    rank: a.rank,
    worldSize: a['world-size'],
    shardRank: a.shard,
    imageBudgetGb: imageBudgetGb(a['image-budget']),
  };
}

/** `worldline serve`: where it listens, how many sessions at once, and each session's limits. */
export const serveOptions = <T>(y: Argv<T>) =>
  y
    .option('dataset', { type: 'string', demandOption: true, describe: "The dataset whose tasks are served: a run's OUT/dataset (its ledger beside it)" })
    .option('manifest', { type: 'string', describe: "The run's manifest: needed when a unit's environment was its manifest line's own" })
    .option('host', { type: 'string', default: '127.0.0.1', describe: 'Address to bind; anything but loopback needs --token' })
    .option('port', { type: 'number', default: 8000, describe: 'Port (0: any free one, printed)' })
    .option('token', { type: 'string', describe: 'Bearer token every request must carry (default: WORLDLINE_SERVE_TOKEN)' })
    .option('max-sessions', { type: 'number', default: 16, describe: 'Sessions with a container at once; a reset past them gets CAPACITY_REACHED' })
    .option('idle-timeout', { type: 'number', default: 600, describe: 'Seconds a session may stay silent before it is closed and its container removed' })
    .option('max-turns', { type: 'number', default: DEFAULTS.maxTurns, describe: 'Tool calls per episode; the last one ends it with the grader reward' })
    .option('max-wall', {
      type: 'number',
      default: DEFAULTS.maxWallS,
      describe: 'Wall seconds per episode; past it the next action ends it with the grader reward',
    })
    .option('bash-timeout', { type: 'number', default: DEFAULTS.bashTimeoutS, describe: 'Seconds one bash call may run' })
    .option('memory', { type: 'number', default: 2048, describe: "MB of memory for a session's container (and for grading's)" })
    .option('cpus', { type: 'number', default: 1, describe: "CPUs for a session's container (and for grading's)" })
    .option('pids', { type: 'number', default: DEFAULTS.pids, describe: "Processes in a session's container" })
    .option('work-disk', { type: 'number', default: DEFAULTS.workDiskMb, describe: "MB of disk for grading's work folder" })
    .option('registry', {
      type: 'string',
      describe: "Pull the task images this host lacks from this registry (HOST[:PORT]), by the digests worldline push recorded in the dataset's images.json",
    })
    .option('record', { type: 'boolean', default: true, describe: "Write each episode's trajectory row to OUT/served/trajectories/ (--no-record: off)" })
    .check((a) => {
      for (const k of ['max-sessions', 'idle-timeout', 'max-turns', 'max-wall', 'bash-timeout', 'memory', 'cpus', 'pids', 'work-disk'] as const)
        positiveInt(`--${k}`, a[k] as number);
      wholeAtLeast('--port', a.port);
      if (a.registry !== undefined) {
        try {
          registryHost(a.registry as string);
        } catch (e) {
          throw new UsageError(`--registry: ${(e as Error).message}`);
        }
      }
      if (!existsSync(join(a.dataset as string, 'manifest.json')))
        throw new UsageError(`${a.dataset}: not a dataset (no manifest.json); a run writes its dataset to OUT/dataset`);
      return true;
    });
