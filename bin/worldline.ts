#!/usr/bin/env node
/** The `worldline` command line: argument parsing only; the work lives in pipeline/. */
import yargs, { type Argv } from 'yargs';
import { hideBin } from 'yargs/helpers';
import { DEFAULT_ISSUE_FIX_SHARE, DEFAULT_MIX_SEED } from '../datasets/mix.js';
import { ALL_STAGES, formatRun, formatShard, runJson, runPipeline, UsageError } from '../pipeline/run.js';
import { DEFAULTS, type PipelineOptions } from '../pipeline/runtime/options.js';
import { formatStatus, readStatus } from '../pipeline/runtime/status.js';
import { shardOutput, type DatasetLayout } from '../pipeline/stages/shard.js';
import { existsSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { readIssueExport } from '../pipeline/tasks/issue_tasks.js';
import { exportSwebench, readDatasetTasks } from '../datasets/swebench.js';
import { DEFAULT_SHARD_BYTES } from '../datasets/dataset_writer.js';
import { DEFAULT_ROW_GROUP_ROWS } from '../datasets/parquet_writer.js';
import { readRows } from '../datasets/reader.js';
import { allTraced, formatScriptTraces, traceScript } from '../pipeline/trace_script.js';
import { DEFAULT_PYTHON, PYTHON_VERSIONS, type PythonVersion } from '../pipeline/runtime/manifest.js';
import { isTraceFormat, isTrajectoryFormat, renderTraces, renderTrajectories, TRACE_FORMATS, TRAJECTORY_FORMATS } from '../datasets/render.js';
import { formatVerify, verifyDataset } from '../datasets/verify.js';
import { writeStdout } from '../core/stdout.js';
import { auditDataset, DEFAULT_TOP_K } from '../datasets/audit.js';
import { formatAudit } from '../datasets/audit_text.js';
import { auditHtml } from '../datasets/audit_html.js';
import { MIX_TOLERANCE, MixUnreachable } from '../datasets/mix.js';
import { formatRebalance, rebalanceDataset, RebalanceRefused } from '../datasets/rebalance.js';

const envInt = (...names: string[]) => {
  for (const n of names) if (process.env[n] !== undefined && process.env[n] !== '') return Number(process.env[n]);
  return undefined;
};

const withOut = <T>(y: Argv<T>) =>
  y
    .option('out', { type: 'string', default: 'out', describe: 'Output folder (ledger, checkouts, logs, dataset/)' })
    .option('json', { type: 'boolean', default: false, describe: 'Print machine-readable JSON' });

const withLayout = <T>(y: Argv<T>) =>
  y
    .option('shard-bytes', { type: 'number', default: DEFAULT_SHARD_BYTES, describe: 'shard: target uncompressed bytes per shard' })
    .option('num-shards', { type: 'number', describe: 'shard: exactly this many shards per config' })
    .option('shard-multiple', { type: 'number', describe: 'shard: round the shard count up to a multiple of K (trainer world sizes)' })
    .option('row-group-rows', { type: 'number', default: DEFAULT_ROW_GROUP_ROWS, describe: 'shard: at most this many rows per row group' })
    .option('row-group-bytes', { type: 'number', describe: 'shard: at most about this many uncompressed bytes per row group' })
    .option('shuffle', { type: 'boolean', default: true, describe: 'shard: seeded global shuffle across repositories (--no-shuffle keeps order)' })
    .option('shuffle-seed', { type: 'number', default: 0, describe: 'shard: the shuffle seed' })
    .option('max-row-bytes', { type: 'number', describe: 'shard: rows larger than this are rejected and counted (default 2 MB)' })
    .option('issue-fix-share', { type: 'number', default: DEFAULT_ISSUE_FIX_SHARE, describe: 'shard: share of issue-fix tasks in the run; tasks of the over-represented kind are dropped (never invented)' });

type LayoutArgs = { 'shard-bytes': number; 'num-shards'?: number; 'shard-multiple'?: number; 'row-group-rows': number; 'row-group-bytes'?: number; shuffle: boolean; 'shuffle-seed': number; 'max-row-bytes'?: number; 'issue-fix-share': number };

const share = (name: string, v: number) => {
  if (!(v >= 0 && v <= 1)) throw new UsageError(`${name} must be a share between 0 and 1 (got ${v})`);
  return v;
};

/** A positive integer option; an option left out stays undefined. */
const count = <T extends number | undefined>(name: string, v: T): T => {
  if (v !== undefined && !(Number.isInteger(v) && v > 0)) throw new UsageError(`${name} must be a positive integer (got ${v})`);
  return v;
};

function layout(a: LayoutArgs): DatasetLayout {
  const numShards = count('--num-shards', a['num-shards']);
  const shardMultiple = count('--shard-multiple', a['shard-multiple']);
  if (numShards && shardMultiple && numShards % shardMultiple) throw new UsageError(`--num-shards ${numShards} is not a multiple of --shard-multiple ${shardMultiple}`);
  return {
    shardBytes: count('--shard-bytes', a['shard-bytes']),
    numShards,
    shardMultiple,
    rowGroupRows: count('--row-group-rows', a['row-group-rows']),
    rowGroupBytes: count('--row-group-bytes', a['row-group-bytes']),
    shuffle: a.shuffle,
    shuffleSeed: a['shuffle-seed'],
    maxRowBytes: count('max-row-bytes', a['max-row-bytes']),
  };
}

const withPipeline = (y: Argv) =>
  withLayout(withOut(y))
    .option('manifest', { type: 'string', demandOption: true, describe: 'Manifest: JSON Lines, one repository a line' })
    .option('concurrency', { type: 'number', default: DEFAULTS.concurrency, describe: 'Units in flight at once' })
    .option('retry-failed', { type: 'boolean', default: false, describe: 'Run again the units whose stage failed' })
    .option('base-image', { type: 'string', describe: 'Use this local image as the base instead of the debootstrap ones' })
    .option('build-timeout', { type: 'number', default: DEFAULTS.buildTimeoutS, describe: 'Image build timeout, seconds' })
    .option('validate-runs', { type: 'number', default: DEFAULTS.validateRuns, describe: 'Suite runs per unit; outcomes that differ are flaky' })
    .option('test-timeout', { type: 'number', default: DEFAULTS.testTimeoutS, describe: 'Per-test timeout, seconds (0: off)' })
    .option('suite-timeout', { type: 'number', default: DEFAULTS.suiteTimeoutS, describe: 'Wall timeout of one suite run, seconds' })
    .option('memory', { type: 'number', default: DEFAULTS.memoryMb, describe: 'Container memory limit, MB' })
    .option('cpus', { type: 'number', default: DEFAULTS.cpus, describe: 'Container CPU limit' })
    .option('pids', { type: 'number', default: DEFAULTS.pids, describe: 'Container process limit' })
    .option('step-in', { type: 'number', default: DEFAULTS.traceStepIn, describe: 'trace: probability that an episode steps into a callee' })
    .option('trace-seed', { type: 'number', default: DEFAULTS.traceSeed, describe: 'trace: seed of the step-in choices' })
    .option('max-events', { type: 'number', default: DEFAULTS.traceMaxEvents, describe: 'trace: raw events per test before it is cut (truncated)' })
    .option('trace-phases', { type: 'string', default: DEFAULTS.tracePhases.join(','), describe: 'trace: test phases to trace (call, setup, teardown)' })
    .option('trace-slowdown', { type: 'number', default: DEFAULTS.traceSlowdown, describe: 'trace: timeouts are multiplied by this under the tracer' })
    .option('forage-seed', { type: 'number', default: DEFAULTS.forageSeed, describe: 'forage: seed of candidate and site choices' })
    .option('mutation-tries', { type: 'number', default: DEFAULTS.mutationTries, describe: 'forage: mutation candidates tried per unit' })
    .option('mutations-per-unit', { type: 'number', default: DEFAULTS.mutationsPerUnit, describe: 'forage: mutation-fix tasks kept per unit at most' })
    .option('mutant-test-timeout', { type: 'number', default: DEFAULTS.mutantTestTimeoutS, describe: 'forage: per-test timeout while running a mutant, seconds' })
    .option('policy', { choices: ['oracle', 'openai', 'replay', 'none'] as const, default: DEFAULTS.policy, describe: 'forage: who works the tasks (oracle: the gold fix through the real tools; openai: a model server; replay: recorded trajectories; none: tasks only)' })
    .option('base-url', { type: 'string', default: process.env.OPENAI_BASE_URL, describe: 'openai: the OpenAI-compatible server, e.g. http://127.0.0.1:8000/v1 (key from OPENAI_API_KEY)' })
    .option('model', { type: 'string', describe: 'openai: model name' })
    .option('temperature', { type: 'number', describe: 'openai: sampling temperature' })
    .option('top-p', { type: 'number', describe: 'openai: nucleus sampling' })
    .option('max-completion-tokens', { type: 'number', describe: 'openai: tokens per completion' })
    .option('sampling-seed', { type: 'number', describe: 'openai: sampling seed, where the server supports it' })
    .option('request-timeout', { type: 'number', default: 600, describe: 'openai: seconds per request' })
    .option('max-retries', { type: 'number', default: 6, describe: 'openai: retries on 408/429/5xx and connection errors' })
    .option('replay-from', { type: 'string', describe: 'replay: a trajectories dataset folder whose rollouts are replayed' })
    .option('issues', { type: 'string', describe: 'forage: issue export (JSON Lines: number, title, body) for issue-fix problem statements' })
    .option('issue-candidates', { type: 'number', default: DEFAULTS.issueCandidates, describe: 'forage: issue-fix candidates mined per repository (0: none)' })
    .option('max-turns', { type: 'number', default: DEFAULTS.maxTurns, describe: 'forage: turns per rollout' })
    .option('max-tokens', { type: 'number', default: DEFAULTS.maxTokens, describe: 'forage: tokens per rollout' })
    .option('max-wall', { type: 'number', default: DEFAULTS.maxWallS, describe: 'forage: wall seconds per rollout' })
    .option('bash-timeout', { type: 'number', default: DEFAULTS.bashTimeoutS, describe: 'forage: seconds per bash call in a rollout' })
    .option('commits', { type: 'number', default: DEFAULTS.historyCommits, describe: 'Also trace up to K older commits per repository, sampled from its git log' })
    .option('commit-tries', { type: 'number', default: DEFAULTS.historyTries, describe: 'Older commits tried to find K that work (0: 10 per wanted, at most 40)' })
    .option('rank', { type: 'number', default: envInt('WORLDLINE_RANK', 'SLURM_ARRAY_TASK_ID', 'JOB_COMPLETION_INDEX') ?? 0, describe: 'This process\'s share of the units (0-based)' })
    .option('world-size', { type: 'number', default: envInt('WORLDLINE_WORLD_SIZE', 'SLURM_ARRAY_TASK_COUNT') ?? 1, describe: 'How many processes share the units' });

type PipelineArgs = Awaited<ReturnType<ReturnType<typeof withPipeline>['parse']>>;

function options(a: PipelineArgs): PipelineOptions {
  const positive = (name: string, v: number, min = 1) => {
    if (!Number.isFinite(v) || v < min) throw new UsageError(`--${name} must be a number >= ${min} (got ${v})`);
    return v;
  };
  return {
    out: resolve(a.out),
    layout: layout(a),
    issueFixShare: share('--issue-fix-share', a['issue-fix-share']),
    concurrency: positive('concurrency', a.concurrency),
    retryFailed: a['retry-failed'],
    baseImage: a['base-image'],
    buildTimeoutS: positive('build-timeout', a['build-timeout']),
    validateRuns: positive('validate-runs', a['validate-runs']),
    testTimeoutS: positive('test-timeout', a['test-timeout'], 0),
    suiteTimeoutS: positive('suite-timeout', a['suite-timeout']),
    memoryMb: positive('memory', a.memory, 64),
    cpus: positive('cpus', a.cpus, 0.1),
    pids: positive('pids', a.pids, 16),
    traceStepIn: (() => {
      const p = a['step-in'];
      if (!(p >= 0 && p <= 1)) throw new UsageError(`--step-in must be a probability in 0..1 (got ${p})`);
      return p;
    })(),
    traceSeed: a['trace-seed'],
    tracePhases: (() => {
      const phases = String(a['trace-phases']).split(',').map((p) => p.trim()).filter(Boolean);
      const bad = phases.filter((p) => !['setup', 'call', 'teardown'].includes(p));
      if (bad.length || !phases.length) throw new UsageError(`--trace-phases takes setup, call and teardown (got ${a['trace-phases']})`);
      return phases;
    })(),
    traceMaxEvents: positive('max-events', a['max-events']),
    traceSlowdown: positive('trace-slowdown', a['trace-slowdown']),
    forageSeed: a['forage-seed'],
    mutationTries: positive('mutation-tries', a['mutation-tries'], 0),
    mutationsPerUnit: positive('mutations-per-unit', a['mutations-per-unit'], 0),
    mutantTestTimeoutS: positive('mutant-test-timeout', a['mutant-test-timeout']),
    policy: a.policy,
    openai: (() => {
      if (a.policy !== 'openai') return undefined;
      if (!a['base-url'] || !a.model) throw new UsageError('--policy openai needs --base-url (or OPENAI_BASE_URL) and --model');
      return {
        baseURL: a['base-url'],
        model: a.model,
        temperature: a.temperature,
        topP: a['top-p'],
        maxTokens: a['max-completion-tokens'],
        seed: a['sampling-seed'],
        maxRetries: positive('max-retries', a['max-retries'], 0),
        timeoutMs: positive('request-timeout', a['request-timeout']) * 1000,
      };
    })(),
    replayFrom: (() => {
      if (a.policy !== 'replay') return undefined;
      if (!a['replay-from'] || !existsSync(join(a['replay-from'], 'manifest.json'))) throw new UsageError('--policy replay needs --replay-from DATASET_DIR (a dataset with a trajectories config)');
      return resolve(a['replay-from']);
    })(),
    issuesFile: (() => {
      if (!a.issues) return undefined;
      try {
        readIssueExport(a.issues);
      } catch (e) {
        throw new UsageError((e as Error).message);
      }
      return resolve(a.issues);
    })(),
    issueCandidates: positive('issue-candidates', a['issue-candidates'], 0),
    maxTurns: positive('max-turns', a['max-turns']),
    maxTokens: positive('max-tokens', a['max-tokens']),
    maxWallS: positive('max-wall', a['max-wall']),
    bashTimeoutS: positive('bash-timeout', a['bash-timeout']),
    historyCommits: positive('commits', a.commits, 0),
    historyTries: positive('commit-tries', a['commit-tries'], 0),
    rank: a.rank,
    worldSize: a['world-size'],
  };
}

const log = (m: string) => process.stderr.write(`${m}\n`);

// A reader that stops early (`| head`) closes the pipe; that ends our output, not in an error.
process.stdout.on('error', (e: NodeJS.ErrnoException) => {
  if (e.code === 'EPIPE') process.exit(0);
  throw e;
});

async function pipelineCommand(a: PipelineArgs, stages: string[]): Promise<void> {
  const run = await runPipeline(a.manifest, stages, options(a), log);
  process.stdout.write((a.json ? JSON.stringify(runJson(run), null, 2) : formatRun(run)) + '\n');
  process.exitCode = run.exitCode;
}

const stageCommand = (name: string, describe: string) => ({
  command: name,
  describe,
  builder: withPipeline,
  handler: (a: PipelineArgs) => pipelineCommand(a, [name]),
});

await yargs(hideBin(process.argv))
  .scriptName('worldline')
  .command({
    command: 'run',
    describe: 'Run the stages in order (clone, build, validate, trace, forage, shard) for every unit of the manifest',
    builder: (y) => withPipeline(y).option('stages', { type: 'string', default: ALL_STAGES.join(','), describe: 'Comma-separated stages to run' }),
    handler: (a) => pipelineCommand(a as PipelineArgs, String(a.stages).split(',').map((s) => s.trim()).filter(Boolean)),
  })
  .command(stageCommand('clone', 'Mirror each repository, check out its commit, record provenance and license'))
  .command(stageCommand('build', 'Build one environment image per unit from its base image'))
  .command(stageCommand('validate', 'Run each suite in a sandbox, N times, and record per-test outcomes'))
  .command(stageCommand('trace', 'Trace each validated suite line by line and cut CWM function-level episodes'))
  .command(stageCommand('forage', 'Create mutation-fix and issue-fix tasks, roll a policy out on each in the repository container, verify, and trace each fix'))
  .command({
    command: 'shard',
    describe: 'Write the dataset (Parquet shards, manifest.json, card) from what the output folder holds',
    builder: (y) => withLayout(withOut(y)),
    handler: async (a) => {
      const { mix, ...manifest } = await shardOutput(resolve(a.out), {}, layout(a as unknown as LayoutArgs), share('--issue-fix-share', a['issue-fix-share'] as number));
      if (mix.warning) log(`warning: ${mix.warning}`);
      process.stdout.write((a.json ? JSON.stringify(manifest, null, 2) : formatShard(manifest.configs, mix)) + '\n');
    },
  })
  .command({
    command: 'status',
    describe: 'Per-stage counts and every failure with its reason',
    builder: withOut,
    handler: (a) => {
      const s = readStatus(resolve(a.out));
      process.stdout.write((a.json ? JSON.stringify(s, null, 2) : formatStatus(s)) + '\n');
    },
  })
  .command({
    command: 'verify <dir>',
    describe: 'Check a dataset against its manifest: checksums, row counts, schemas, every shard and nested column readable by DuckDB',
    builder: (y) => y.positional('dir', { type: 'string', demandOption: true, describe: 'The dataset folder (OUT/dataset)' }).option('json', { type: 'boolean', default: false }),
    handler: async (a) => {
      const report = await verifyDataset(resolve(a.dir as string));
      process.stdout.write((a.json ? JSON.stringify(report, null, 2) : formatVerify(report)) + '\n');
      process.exitCode = report.ok ? 0 : 1;
    },
  })
  .command({
    command: 'audit <dir>',
    describe: 'Is the dataset fit for training? Task mix against its target, outcomes, traces, repository dominance, run health (DuckDB over the shards)',
    builder: (y) =>
      y
        .positional('dir', { type: 'string', demandOption: true, describe: 'The dataset folder (OUT/dataset)' })
        .option('target', { type: 'number', default: DEFAULT_ISSUE_FIX_SHARE, describe: 'Issue-fix share the task mix is judged against' })
        .option('tolerance', { type: 'number', default: MIX_TOLERANCE, describe: 'Distance from the target (a share: 0.005 is half a point) still judged OK' })
        .option('top', { type: 'number', default: DEFAULT_TOP_K, describe: 'How many of the largest repositories the dominance figures count' })
        .option('json', { type: 'boolean', default: false, describe: 'Print every figure as one JSON object' })
        .option('html', { type: 'string', describe: 'Also write a self-contained HTML report with charts to this file' })
        .option('fail-on-drift', { type: 'boolean', default: false, describe: 'Exit 1 when the task mix is off its target (for CI gates)' }),
    handler: async (a) => {
      const report = await auditDataset(resolve(a.dir as string), { target: share('--target', a.target), tolerance: share('--tolerance', a.tolerance), topK: count('--top', a.top) });
      if (a.html) writeFileSync(resolve(a.html), auditHtml(report));
      process.stdout.write((a.json ? JSON.stringify(report, null, 2) : formatAudit(report)) + '\n');
      if (a.html && !a.json) process.stdout.write(`report: ${resolve(a.html)}\n`);
      if (a['fail-on-drift'] && report.mix.status === 'DRIFT') process.exitCode = 1;
    },
  })
  .command({
    command: 'rebalance <dir>',
    describe: 'Write a new, verified dataset whose task issue-fix share is within half a point of --target; dropped tasks take their trajectories and before/after traces',
    builder: (y) =>
      y
        .positional('dir', { type: 'string', demandOption: true, describe: 'The dataset folder (OUT/dataset)' })
        .option('target', { type: 'number', default: DEFAULT_ISSUE_FIX_SHARE, describe: 'Issue-fix share of the tasks to reach' })
        .option('out', { type: 'string', demandOption: true, describe: 'The new dataset folder (a symlink to its version, like OUT/dataset)' })
        .option('seed', { type: 'string', default: DEFAULT_MIX_SEED, describe: 'Seed of which tasks of a kind are dropped' })
        .option('json', { type: 'boolean', default: false, describe: 'Print the report as JSON' }),
    handler: async (a) => {
      let report;
      try {
        report = await rebalanceDataset(resolve(a.dir as string), resolve(a.out), share('--target', a.target), { seed: a.seed });
      } catch (e) {
        throw e instanceof MixUnreachable || e instanceof RebalanceRefused ? new UsageError(e.message) : e;
      }
      process.stdout.write((a.json ? JSON.stringify(report, null, 2) : formatRebalance(report)) + '\n');
      process.exitCode = report.verify.ok ? 0 : 1;
    },
  })
  .command({
    command: 'cat <dir>',
    describe: 'Stream rows of one config as JSON Lines (bounded memory)',
    builder: (y) =>
      y
        .positional('dir', { type: 'string', demandOption: true, describe: 'The dataset folder (OUT/dataset)' })
        .option('config', { type: 'string', demandOption: true, describe: 'repos, tests, ...' })
        .option('limit', { type: 'number', describe: 'At most this many rows' })
        .option('columns', { type: 'string', describe: 'Comma-separated columns (default: all)' })
        .option('rank', { type: 'number', default: 0, describe: 'Read only the shards of this rank' })
        .option('world-size', { type: 'number', default: 1, describe: 'Ranks sharing the shards' }),
    handler: async (a) => {
      const rows = readRows(resolve(a.dir as string), {
        config: a.config,
        limit: a.limit,
        columns: a.columns?.split(',').map((c) => c.trim()).filter(Boolean),
        rank: a.rank,
        worldSize: a['world-size'],
      });
      for await (const row of rows) await writeStdout(JSON.stringify(row) + '\n');
    },
  })
  .command({
    command: 'export <dir>',
    describe: "Write a dataset's tasks as SWE-bench JSON Lines (FAIL_TO_PASS/PASS_TO_PASS as JSON strings) for its harness",
    builder: (y) =>
      y
        .positional('dir', { type: 'string', demandOption: true, describe: 'The dataset folder (OUT/dataset)' })
        .option('swebench-only', { type: 'boolean', default: false, describe: "Only SWE-bench's own fields (issue-fix tasks only: a mutation's state needs bug_patch)" }),
    handler: async (a) => {
      const tasks = await readDatasetTasks(resolve(a.dir as string));
      try {
        process.stdout.write(exportSwebench(tasks, { swebenchOnly: a['swebench-only'] }));
      } catch (e) {
        throw new UsageError((e as Error).message);
      }
    },
  })
  .command({
    command: 'render <dir>',
    describe: "Write trace episodes in CWM's token format (re-rendered from their frames), or trajectories as chat messages or transitions",
    builder: (y) =>
      y
        .positional('dir', { type: 'string', demandOption: true, describe: 'The dataset folder (OUT/dataset)' })
        .option('config', { type: 'string', default: 'traces', describe: 'traces or trajectories' })
        .option('format', {
          choices: [...TRACE_FORMATS, ...TRAJECTORY_FORMATS],
          default: 'jsonl' as const,
          describe: 'traces: jsonl ({"node_id", "function", "text"} per line) or text (the raw texts); trajectories: messages (chat messages for SFT) or transitions (state, action, next state, reward)',
        })
        .option('limit', { type: 'number', describe: 'At most this many episodes' }),
    handler: async (a) => {
      if (a.config === 'trajectories') {
        if (!isTrajectoryFormat(a.format)) throw new UsageError('trajectories render as --format messages or --format transitions');
        return renderTrajectories(resolve(a.dir as string), { format: a.format, limit: a.limit }, writeStdout);
      }
      if (!isTraceFormat(a.format)) throw new UsageError(`--format ${a.format} is for trajectories; traces render as jsonl or text`);
      const mismatches = await renderTraces(resolve(a.dir as string), { config: a.config, format: a.format, limit: a.limit }, writeStdout, (m) => process.stderr.write(`worldline: ${m}\n`));
      process.exitCode = mismatches ? 1 : 0;
    },
  })
  .command({
    command: 'trace-script <file>',
    describe: 'Trace a standalone Python program on given stdin inputs in a sandbox (CWM-style episodes)',
    builder: (y) =>
      y
        .positional('file', { type: 'string', demandOption: true, describe: 'The Python program' })
        .option('stdin', { type: 'string', array: true, demandOption: true, describe: 'An input file fed to stdin; repeat for several inputs' })
        .option('python', { type: 'string', choices: PYTHON_VERSIONS, default: DEFAULT_PYTHON, describe: 'Base image Python' })
        .option('base-image', { type: 'string', describe: 'Run in this local image instead' })
        .option('step-in', { type: 'number', default: 1, describe: 'Probability that an episode steps into a callee' })
        .option('trace-seed', { type: 'number', default: 0 })
        .option('max-events', { type: 'number', default: DEFAULTS.traceMaxEvents })
        .option('timeout', { type: 'number', default: 60, describe: 'Seconds per input' })
        .option('format', { choices: ['jsonl', 'text'] as const, default: 'jsonl' as const, describe: 'jsonl: one result per input; text: the episodes\' token text' }),
    handler: async (a) => {
      const results = await traceScript(resolve(a.file as string), (a.stdin as string[]).map((f) => resolve(f)), {
        python: a.python as PythonVersion,
        baseImage: a['base-image'],
        stepIn: a['step-in'],
        seed: a['trace-seed'],
        maxEvents: a['max-events'],
        timeoutS: a.timeout,
      }, log);
      process.stdout.write(formatScriptTraces(results, a.format));
      process.exitCode = allTraced(results) ? 0 : 1;
    },
  })
  .demandCommand(1, 'name a command: worldline --help lists them')
  .strict()
  .help()
  .fail((msg, err) => {
    if (err && !(err instanceof UsageError)) {
      process.stderr.write(`worldline: ${err.message}\n`);
      process.exit(1);
    }
    process.stderr.write(`worldline: ${msg ?? err?.message}\nRun worldline --help for usage.\n`);
    process.exit(2);
  })
  .parseAsync()
  .catch((e: Error) => {
    process.stderr.write(`worldline: ${e.message}\n`);
    process.exit(e instanceof UsageError ? 2 : 1);
  });
