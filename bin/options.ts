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
import type { DatasetLayout } from '../datasets/dataset_writer.js';
import { DEFAULT_SHARD_BYTES } from '../datasets/dataset_writer.js';
import { DEFAULT_ISSUE_FIX_SHARE } from '../datasets/mix.js';
import { DEFAULT_ROW_GROUP_ROWS } from '../datasets/parquet/writer.js';
import { UsageError } from '../pipeline/run.js';
import { DEFAULTS, type PipelineOptions } from '../pipeline/runtime/options.js';
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
  'issue-fix-share': number;
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
    .option('issue-fix-share', {
      type: 'number',
      default: DEFAULT_ISSUE_FIX_SHARE,
      describe: 'shard: share of issue-fix tasks in the run; tasks of the over-represented kind are dropped (never invented)',
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
      share('--issue-fix-share', a['issue-fix-share']);
      return true;
    });

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
  };
}

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
    .option('test-timeout', { type: 'number', default: DEFAULTS.testTimeoutS, describe: 'Per-test timeout, seconds (0: off)' })
    .option('suite-timeout', { type: 'number', default: DEFAULTS.suiteTimeoutS, describe: 'Wall timeout of one suite run, seconds' })
    .option('memory', { type: 'number', default: DEFAULTS.memoryMb, describe: 'Container memory limit, MB' })
    .option('cpus', { type: 'number', default: DEFAULTS.cpus, describe: 'Container CPU limit' })
    .option('pids', { type: 'number', default: DEFAULTS.pids, describe: 'Container process limit' })
    .check((a) => {
      atLeast('concurrency', a.concurrency);
      if (a['unit-budget'] !== undefined) atLeast('unit-budget', a['unit-budget']);
      atLeast('build-timeout', a['build-timeout']);
      atLeast('validate-runs', a['validate-runs']);
      atLeast('test-timeout', a['test-timeout'], 0);
      atLeast('suite-timeout', a['suite-timeout']);
      atLeast('memory', a.memory, 64);
      atLeast('cpus', a.cpus, 0.1);
      atLeast('pids', a.pids, 16);
      return true;
    });

const traceOptions = <T>(y: Argv<T>) =>
  y
    .option('step-in', { type: 'number', default: DEFAULTS.traceStepIn, describe: 'trace: probability that an episode steps into a callee' })
    .option('trace-seed', { type: 'number', default: DEFAULTS.traceSeed, describe: 'trace: seed of the step-in choices' })
    .option('max-events', { type: 'number', default: DEFAULTS.traceMaxEvents, describe: 'trace: raw events per test before it is cut (truncated)' })
    .option('trace-phases', { type: 'string', default: DEFAULTS.tracePhases.join(','), describe: 'trace: test phases to trace (call, setup, teardown)' })
    .option('trace-slowdown', { type: 'number', default: DEFAULTS.traceSlowdown, describe: 'trace: timeouts are multiplied by this under the tracer' })
    .check((a) => {
      probability('--step-in', a['step-in']);
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
      atLeast('mutant-test-timeout', a['mutant-test-timeout']);
      return true;
    });

/** The OpenAI-compatible server of `--policy openai`; checked only under that policy. */
const openaiOptions = <T extends { policy: PipelineOptions['policy'] }>(y: Argv<T>) =>
  y
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
      if (a.policy !== 'openai') return true;
      if (!a['base-url'] || !a.model) throw new UsageError('--policy openai needs --base-url (or OPENAI_BASE_URL) and --model');
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
    .check((a) => {
      atLeast('commits', a.commits, 0);
      atLeast('commit-tries', a['commit-tries'], 0);
      return true;
    });

/** Everything a pipeline command takes. Checks run in the order the groups are added: of several bad values, the first group's is reported. */
export const pipelineOptions = (y: Argv) =>
  spreadOptions(rolloutOptions(openaiOptions(forageOptions(traceOptions(runOptions(layoutOptions(outputOptions(y))))))));

export type PipelineArgs = Awaited<ReturnType<ReturnType<typeof pipelineOptions>['parse']>>;

/** The checked arguments as the pipeline takes them. */
export function toPipelineOptions(a: PipelineArgs): PipelineOptions {
  return {
    out: resolve(a.out),
    layout: toLayout(a),
    issueFixShare: a['issue-fix-share'],
    concurrency: a.concurrency,
    retryFailed: a['retry-failed'],
    unitBudgetS: a['unit-budget'],
    baseImage: a['base-image'],
    buildTimeoutS: a['build-timeout'],
    validateRuns: a['validate-runs'],
    testTimeoutS: a['test-timeout'],
    suiteTimeoutS: a['suite-timeout'],
    memoryMb: a.memory,
    cpus: a.cpus,
    pids: a.pids,
    traceStepIn: a['step-in'],
    traceSeed: a['trace-seed'],
    tracePhases: tracePhases(a['trace-phases']),
    traceMaxEvents: a['max-events'],
    traceSlowdown: a['trace-slowdown'],
    forageSeed: a['forage-seed'],
    mutationTries: a['mutation-tries'],
    mutationsPerUnit: a['mutations-per-unit'],
    mutantTestTimeoutS: a['mutant-test-timeout'],
    policy: a.policy,
    // The checks made sure that an openai policy has its server and model, and a replay policy its recordings.
    openai:
      a.policy === 'openai'
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
  };
}
