/**
 * The option groups the commands share, each with a yargs check: a bad value is a usage error
 * (exit 2, with a pointer to --help) before any work starts. Values are checked with `check`,
 * not `coerce`: yargs runs coerce callbacks before its own validation (their message would
 * replace "Missing required argument") and hands their errors to .fail() re-wrapped, so a
 * UsageError would no longer be told apart (exit 2) from a failure (exit 1). Coerce is kept for
 * parsing that cannot fail (comma lists).
 */
import { existsSync } from 'node:fs';
import { join, resolve } from 'node:path';
import type { Argv } from 'yargs';
import { PERMISSIVE_LICENSES } from '../core/license.js';
import type { ContentPolicy } from '../datasets/content_policy.js';
import type { DatasetLayout } from '../datasets/dataset_writer.js';
import { DEFAULT_SHARD_BYTES } from '../datasets/dataset_writer.js';
import { DEFAULT_ISSUE_FIX_SHARE } from '../datasets/mix.js';
import { NEAR_DEDUP_DEFAULTS } from '../datasets/near_dedup.js';
import { DEFAULT_ROW_GROUP_ROWS } from '../datasets/parquet/writer.js';
import { DEFAULT_TOKENIZER, TOKENIZERS } from '../datasets/tokens.js';
import { DEFAULT_QUEUE, redisConnection } from '../pipeline/queue/connection.js';
import { UsageError } from '../pipeline/run.js';
import { DEFAULTS, type PipelineOptions, type TraceCaps } from '../pipeline/runtime/options.js';
import { PROGRESS_MODES } from '../pipeline/runtime/progress.js';
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

/** A number >= min: the pipeline's sizes, timeouts and limits. */
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
    .option('json', { type: 'boolean', default: false, describe: 'Print machine-readable JSON' });

/** How run and worker show progress: bars on a terminal, JSON lines off one. */
export const progressOption = <T>(y: Argv<T>) =>
  y.option('progress', {
    choices: PROGRESS_MODES,
    default: 'auto' as const,
    describe: 'auto: bars on a terminal, JSON lines (one per event, then the totals) on stderr otherwise',
  });

/** The Redis and queue of enqueue, worker and status. */
export const queueOptions = <T>(y: Argv<T>) =>
  y
    .option('redis', { type: 'string', default: process.env.WORLDLINE_REDIS, describe: "The queue's Redis: redis://host:port[/db] (or WORLDLINE_REDIS)" })
    .option('queue', { type: 'string', default: DEFAULT_QUEUE, describe: 'Queue name (several runs can share one Redis)' })
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

/** The dataset folder the dataset commands read. */
export const datasetDir = <T>(y: Argv<T>) => y.positional('dir', { type: 'string', demandOption: true, describe: 'The dataset folder (OUT/dataset)' });

export type LayoutArgs = {
  'shard-bytes': number;
  'num-shards'?: number;
  'shard-multiple'?: number;
  'row-group-rows': number;
  'row-group-bytes'?: number;
  shuffle: boolean;
  'shuffle-seed': number;
  'max-row-bytes'?: number;
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

/** How `shard` lays the dataset out, and the run's task mix. */
export const layoutOptions = <T>(y: Argv<T>) =>
  y
    .option('shard-bytes', { type: 'number', default: DEFAULT_SHARD_BYTES, describe: 'shard: target uncompressed bytes per shard' })
    .option('num-shards', { type: 'number', describe: 'shard: exactly this many shards per config' })
    .option('shard-multiple', { type: 'number', describe: 'shard: round the shard count up to a multiple of K (trainer world sizes)' })
    .option('row-group-rows', { type: 'number', default: DEFAULT_ROW_GROUP_ROWS, describe: 'shard: at most this many rows per row group' })
    .option('row-group-bytes', { type: 'number', describe: 'shard: at most about this many uncompressed bytes per row group' })
    .option('shuffle', { type: 'boolean', default: true, describe: 'shard: seeded global shuffle across repositories (--no-shuffle keeps order)' })
    .option('shuffle-seed', { type: 'number', default: 0, describe: 'shard: the shuffle seed' })
    .option('max-row-bytes', { type: 'number', describe: 'shard: rows larger than this are rejected and counted (default 2 MB)' })
    .option('tokenizer', {
      type: 'string',
      default: DEFAULT_TOKENIZER,
      describe: `shard: count each text column's tokens into <column>_tokens with ${TOKENIZERS.join(', ')}, a byte-level BPE tokenizer.json, or none`,
    })
    .option('max-row-tokens', { type: 'number', describe: 'shard: rows whose text holds more tokens than this are rejected and counted' })
    .option('near-dedup', { type: 'boolean', default: false, describe: 'shard: remove near-duplicate traces and trajectories (MinHash-LSH over their text)' })
    .option('near-dedup-threshold', {
      type: 'number',
      default: NEAR_DEDUP_DEFAULTS.threshold,
      describe: 'shard: estimated Jaccard similarity that counts as a near duplicate',
    })
    .option('shingle-size', { type: 'number', default: NEAR_DEDUP_DEFAULTS.shingleSize, describe: 'shard: words per shingle for --near-dedup' })
    .option('near-dedup-seed', { type: 'number', default: NEAR_DEDUP_DEFAULTS.seed, describe: "shard: seed of --near-dedup's MinHash permutations" })
    .option('issue-fix-share', {
      type: 'number',
      default: DEFAULT_ISSUE_FIX_SHARE,
      describe: 'shard: share of issue-fix tasks in the run; tasks of the over-represented kind are dropped (never invented)',
    })
    .option('licenses', {
      type: 'string',
      default: PERMISSIVE_LICENSES.join(','),
      describe: 'shard: SPDX ids of the licenses kept (add "unknown" to keep unlicensed repositories; "*" keeps all); other units are excluded with the reason',
      coerce: (v: string | string[]) => (Array.isArray(v) ? v : commaList(v)),
    })
    .option('redact', {
      type: 'boolean',
      default: true,
      describe: 'shard: replace secrets and personal data with typed placeholders (--no-redact turns it off)',
    })
    .option('exclude-benchmarks', {
      type: 'boolean',
      default: true,
      describe: "shard: leave out units from benchmarks' repositories (SWE-bench, SWE-Gym; datasets/benchmark_repos.json)",
    })
    .check((a) => {
      const numShards = positiveInt('--num-shards', a['num-shards']);
      const shardMultiple = positiveInt('--shard-multiple', a['shard-multiple']);
      if (numShards && shardMultiple && numShards % shardMultiple)
        throw new UsageError(`--num-shards ${numShards} is not a multiple of --shard-multiple ${shardMultiple}`);
      positiveInt('--shard-bytes', a['shard-bytes']);
      positiveInt('--row-group-rows', a['row-group-rows']);
      positiveInt('--row-group-bytes', a['row-group-bytes']);
      positiveInt('max-row-bytes', a['max-row-bytes']);
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
    shardBytes: a['shard-bytes'],
    numShards: a['num-shards'],
    shardMultiple: a['shard-multiple'],
    rowGroupRows: a['row-group-rows'],
    rowGroupBytes: a['row-group-bytes'],
    shuffle: a.shuffle,
    shuffleSeed: a['shuffle-seed'],
    maxRowBytes: a['max-row-bytes'],
    tokenizer: a.tokenizer === 'none' ? undefined : a.tokenizer.endsWith('.json') ? resolve(a.tokenizer) : a.tokenizer,
    maxRowTokens: a['max-row-tokens'],
    nearDedup: a['near-dedup']
      ? { configs: ['traces', 'trajectories'], threshold: a['near-dedup-threshold'], shingleSize: a['shingle-size'], seed: a['near-dedup-seed'] }
      : undefined,
  };
}

/** --image-budget, for run and worker (a host's disk, not a job's option). */
export const imageBudgetOption = {
  type: 'number',
  describe: 'GB of env images of finished units kept on this host; over it, least recently used ones are removed (base images stay)',
} as const;

/** The manifest, and how units are built and their suites run. */
const runOptions = <T>(y: Argv<T>) =>
  y
    .option('manifest', { type: 'string', demandOption: true, describe: 'Manifest: JSON Lines, one repository a line' })
    .option('concurrency', { type: 'number', default: DEFAULTS.concurrency, describe: 'Units in flight at once' })
    .option('retry-failed', { type: 'boolean', default: false, describe: 'Run again the units whose stage failed' })
    .option('unit-budget', {
      type: 'number',
      describe:
        'Wall seconds a unit may spend across its stages in this run; then its remaining work is skipped with the reason recorded (a rerun continues it)',
    })
    .option('base-image', { type: 'string', describe: 'Use this local image as the base instead of the debootstrap ones' })
    .option('build-timeout', { type: 'number', default: DEFAULTS.buildTimeoutS, describe: 'Image build timeout, seconds' })
    .option('validate-runs', { type: 'number', default: DEFAULTS.validateRuns, describe: 'Suite runs per unit; outcomes that differ are flaky' })
    .option('plain-parity', {
      type: 'boolean',
      default: DEFAULTS.plainParity,
      describe:
        'Validate also runs each suite as plain `python3 -m pytest` (no Worldline code) and records the tests whose outcome differs (--no-plain-parity: skip it)',
    })
    .option('test-timeout', { type: 'number', default: DEFAULTS.testTimeoutS, describe: 'Per-test timeout, seconds (0: off)' })
    .option('suite-timeout', { type: 'number', default: DEFAULTS.suiteTimeoutS, describe: 'Wall timeout of one suite run, seconds' })
    .option('memory', { type: 'number', default: DEFAULTS.memoryMb, describe: 'Container memory limit, MB' })
    .option('work-disk', { type: 'number', default: DEFAULTS.workDiskMb, describe: "Disk budget of a container's work folder, MB" })
    .option('cpus', { type: 'number', default: DEFAULTS.cpus, describe: 'Container CPU limit' })
    .option('pids', { type: 'number', default: DEFAULTS.pids, describe: 'Container process limit' })
    .option('image-budget', imageBudgetOption)
    .check((a) => {
      atLeast('concurrency', a.concurrency);
      if (a['unit-budget'] !== undefined) atLeast('unit-budget', a['unit-budget']);
      atLeast('build-timeout', a['build-timeout']);
      atLeast('validate-runs', a['validate-runs']);
      atLeast('test-timeout', a['test-timeout'], 0);
      atLeast('suite-timeout', a['suite-timeout']);
      atLeast('memory', a.memory, 64);
      atLeast('work-disk', a['work-disk'], 16);
      atLeast('cpus', a.cpus, 0.1);
      atLeast('pids', a.pids, 16);
      if (a['image-budget'] !== undefined) atLeast('image-budget', a['image-budget'], 0);
      return true;
    });

const traceCapsText = (c: TraceCaps) => [c.testEpisodes, c.testBytes, c.unitEpisodes, c.unitBytes].join(',');

function traceCaps(text: string): TraceCaps {
  const n = text.split(',').map((x) => Number(x.trim()));
  if (n.length !== 4 || n.some((x) => !Number.isInteger(x) || x < 0))
    throw new UsageError(`--trace-caps: four whole numbers >= 0 (test episodes, test bytes, unit episodes, unit bytes), got "${text}"`);
  return { testEpisodes: n[0], testBytes: n[1], unitEpisodes: n[2], unitBytes: n[3] };
}

const traceOptions = <T>(y: Argv<T>) =>
  y
    .option('step-in', { type: 'number', default: DEFAULTS.traceStepIn, describe: 'trace: probability that an episode steps into a callee' })
    .option('trace-seed', { type: 'number', default: DEFAULTS.traceSeed, describe: 'trace: seed of the step-in choices' })
    .option('max-events', { type: 'number', default: DEFAULTS.traceMaxEvents, describe: 'trace: raw events per test before it is cut (truncated)' })
    .option('trace-phases', { type: 'string', default: DEFAULTS.tracePhases.join(','), describe: 'trace: test phases to trace (call, setup, teardown)' })
    .option('determinism-sample', {
      type: 'number',
      default: DEFAULTS.determinismSample,
      describe: 'trace: trace the units on the first N manifest lines twice and record the share of episodes that differ',
    })
    .option('trace-caps', {
      type: 'string',
      default: traceCapsText(DEFAULTS.traceCaps),
      describe:
        'trace: episodes and bytes kept per test and per unit, TEST_EPISODES,TEST_BYTES,UNIT_EPISODES,UNIT_BYTES (0: no cap); past them a seeded sample',
    })
    .option('trace-slowdown', { type: 'number', default: DEFAULTS.traceSlowdown, describe: 'trace: timeouts are multiplied by this under the tracer' })
    .option('describe-share', {
      type: 'number',
      default: DEFAULTS.describeShare,
      describe: "describe: share of each unit's trace episodes described in natural language (chosen by a hash seeded with --trace-seed)",
    })
    .check((a) => {
      probability('--step-in', a['step-in']);
      probability('--describe-share', a['describe-share']);
      tracePhases(a['trace-phases']);
      atLeast('max-events', a['max-events']);
      atLeast('trace-slowdown', a['trace-slowdown']);
      return true;
    });

const forageOptions = <T>(y: Argv<T>) =>
  y
    .option('forage-seed', { type: 'number', default: DEFAULTS.forageSeed, describe: 'forage: seed of candidate and site choices' })
    .option('mutation-tries', { type: 'number', default: DEFAULTS.mutationTries, describe: 'forage: mutation candidates tried per unit' })
    .option('mutations-per-unit', { type: 'number', default: DEFAULTS.mutationsPerUnit, describe: 'forage: mutation-fix tasks kept per unit at most' })
    .option('task-concurrency', {
      type: 'number',
      default: DEFAULTS.taskConcurrency,
      describe: 'forage: tasks of one unit worked at once (each in its own containers)',
    })
    .option('mutant-test-timeout', {
      type: 'number',
      default: DEFAULTS.mutantTestTimeoutS,
      describe: 'forage: per-test timeout while running a mutant, seconds',
    })
    .option('policy', {
      choices: ['oracle', 'openai', 'replay', 'none'] as const,
      default: DEFAULTS.policy,
      describe:
        'forage: who works the tasks (oracle: the gold fix through the real tools; openai: a model server; replay: recorded trajectories; none: tasks only)',
    })
    .check((a) => {
      atLeast('mutation-tries', a['mutation-tries'], 0);
      atLeast('mutations-per-unit', a['mutations-per-unit'], 0);
      atLeast('task-concurrency', a['task-concurrency']);
      atLeast('mutant-test-timeout', a['mutant-test-timeout']);
      return true;
    });

/** The OpenAI-compatible server of `--policy openai`; checked only under that policy. */
const openaiOptions = <T extends { policy: PipelineOptions['policy'] }>(y: Argv<T>) =>
  y
    .option('statement-model', {
      type: 'boolean',
      default: false,
      describe: 'forage: the openai server (--base-url, --model) writes issue-fix statements where no issue is linked',
    })
    .option('describe-model', {
      type: 'boolean',
      default: false,
      describe: 'describe: the openai server (--base-url, --model) writes the trace descriptions (else the template describer)',
    })
    .option('base-url', {
      type: 'string',
      default: process.env.OPENAI_BASE_URL,
      describe: 'openai: the OpenAI-compatible server, e.g. http://127.0.0.1:8000/v1 (key from OPENAI_API_KEY)',
    })
    .option('model', { type: 'string', describe: 'openai: model name' })
    .option('temperature', { type: 'number', describe: 'openai: sampling temperature' })
    .option('top-p', { type: 'number', describe: 'openai: nucleus sampling' })
    .option('max-completion-tokens', { type: 'number', describe: 'openai: tokens per completion' })
    .option('sampling-seed', { type: 'number', describe: 'openai: sampling seed, where the server supports it' })
    .option('request-timeout', { type: 'number', default: 600, describe: 'openai: seconds per request' })
    .option('max-retries', { type: 'number', default: 6, describe: 'openai: retries on 408/409/429/5xx and connection errors' })
    .check((a) => {
      const user = a.policy === 'openai' ? '--policy openai' : a['statement-model'] ? '--statement-model' : a['describe-model'] ? '--describe-model' : null;
      if (!user) return true;
      if (!a['base-url'] || !a.model) throw new UsageError(`${user} needs --base-url (or OPENAI_BASE_URL) and --model`);
      atLeast('max-retries', a['max-retries'], 0);
      atLeast('request-timeout', a['request-timeout']);
      return true;
    });

/** Where forage's tasks and rollouts come from, and a rollout's budget. */
const rolloutOptions = <T extends { policy: PipelineOptions['policy'] }>(y: Argv<T>) =>
  y
    .option('replay-from', { type: 'string', describe: 'replay: a trajectories dataset folder whose rollouts are replayed' })
    .option('issues', { type: 'string', describe: 'forage: issue export (JSON Lines: number, title, body) for issue-fix problem statements' })
    .option('issue-candidates', { type: 'number', default: DEFAULTS.issueCandidates, describe: 'forage: issue-fix candidates mined per repository (0: none)' })
    .option('max-turns', { type: 'number', default: DEFAULTS.maxTurns, describe: 'forage: turns per rollout' })
    .option('max-tokens', { type: 'number', default: DEFAULTS.maxTokens, describe: 'forage: tokens per rollout' })
    .option('max-wall', { type: 'number', default: DEFAULTS.maxWallS, describe: 'forage: wall seconds per rollout' })
    .option('bash-timeout', { type: 'number', default: DEFAULTS.bashTimeoutS, describe: 'forage: seconds per bash call in a rollout' })
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
      atLeast('issue-candidates', a['issue-candidates'], 0);
      atLeast('max-turns', a['max-turns']);
      atLeast('max-tokens', a['max-tokens']);
      atLeast('max-wall', a['max-wall']);
      atLeast('bash-timeout', a['bash-timeout']);
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
    .check((a) => {
      atLeast('commits', a.commits, 0);
      atLeast('commit-tries', a['commit-tries'], 0);
      return true;
    });

/** Everything a pipeline command takes. Checks run in the order the groups are added: of several bad values, the first group's is reported. */
export const pipelineOptions = (y: Argv) =>
  progressOption(spreadOptions(rolloutOptions(openaiOptions(forageOptions(traceOptions(runOptions(layoutOptions(outputOptions(y)))))))));

export type PipelineArgs = Awaited<ReturnType<ReturnType<typeof pipelineOptions>['parse']>>;

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
    buildTimeoutS: a['build-timeout'],
    validateRuns: a['validate-runs'],
    plainParity: a['plain-parity'],
    testTimeoutS: a['test-timeout'],
    suiteTimeoutS: a['suite-timeout'],
    memoryMb: a.memory,
    workDiskMb: a['work-disk'],
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
      a.policy === 'openai' || a['statement-model'] || a['describe-model']
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
    imageBudgetGb: a['image-budget'],
  };
}
