#!/usr/bin/env node
/** The `worldline` command line: command definitions only; options live in options.ts, the work in pipeline/ and datasets/. */
import { existsSync, writeFileSync } from 'node:fs';
import { resolve } from 'node:path';
import yargs from 'yargs';
import { hideBin } from 'yargs/helpers';
import { gb } from '../core/disk.js';
import { writeStdout } from '../core/stdout.js';
import { forTerminal, machineJson, terminalSafe } from '../core/terminal.js';
import { auditDataset, DEFAULT_TOP_K } from '../datasets/audit.js';
import { auditHtml } from '../datasets/audit_html.js';
import { formatAudit } from '../datasets/audit_text.js';
import { DEFAULT_ISSUE_FIX_SHARE, DEFAULT_MIX_SEED, MIX_TOLERANCE, MixUnreachable } from '../datasets/mix.js';
import { DEFAULT_OVERLAP_THRESHOLD } from '../datasets/ngram_overlap.js';
import { readManifestJson, readRows } from '../datasets/reader.js';
import { formatRebalance, RebalanceRefused, rebalanceDataset } from '../datasets/rebalance.js';
import {
  isTraceFormat,
  isTrajectoryFormat,
  renderTraces,
  renderTrajectories,
  TRACE_FORMATS,
  TRAJECTORY_FORMATS,
  type TraceFormat,
  type TrajectoryFormat,
} from '../datasets/render.js';
import { exportSwebench, readDatasetTasks } from '../datasets/swebench.js';
import { formatVerify, verifyDataset } from '../datasets/verify.js';
import { collectGarbage } from '../pipeline/gc.js';
import { pushDataset } from '../pipeline/push.js';
import { requireRedis } from '../pipeline/queue/connection.js';
import { DEFAULT_RETRY } from '../pipeline/queue/unit_job.js';
import {
  ALL_STAGES,
  EnvironmentUnavailable,
  formatRun,
  formatShard,
  policyExclusions,
  requireDocker,
  resolveManifest,
  runJson,
  runPipeline,
  UsageError,
} from '../pipeline/run.js';
import { outLayout } from '../pipeline/runtime/layout.js';
import { DEFAULT_PYTHON, PYTHON_VERSIONS, type PythonVersion } from '../pipeline/runtime/manifest.js';
import { DEFAULTS } from '../pipeline/runtime/options.js';
import { Progress, progressMode } from '../pipeline/runtime/progress.js';
import { formatStatus, readStatus, statusBeside } from '../pipeline/runtime/status.js';
import { pullMissingImages } from '../pipeline/serve/images.js';
import { serve } from '../pipeline/serve/server.js';
import { TaskCatalog } from '../pipeline/serve/task_picker.js';
import { shardOutput } from '../pipeline/stages/shard.js';
import { Stopped, stopOnSignals, throwIfStopped } from '../pipeline/stop.js';
import { allTraced, formatScriptTraces, scriptContamination, traceScript } from '../pipeline/trace_script.js';
import {
  commaList,
  datasetDir,
  existingOut,
  imageBudgetGb,
  imageBudgetOption,
  layoutOptions,
  numbersAreNumbers,
  outputOptions,
  type PipelineArgs,
  pipelineOptions,
  positiveInt,
  progressOption,
  pushOptions,
  queueOptions,
  serveOptions,
  share,
  toContentPolicy,
  toLayout,
  toPipelineOptions,
  wholeAtLeast,
} from './options.js';

// Human output escapes what came from a repository (core/terminal.ts); JSON output is JSON's to escape.
const log = (m: string) => process.stderr.write(`${terminalSafe(m)}\n`);
/** Content (a rendered trace's text) escaped for a terminal, as is into a pipe or file. */
const writeText = (chunk: string) => writeStdout(process.stdout.isTTY ? terminalSafe(chunk, true) : chunk);

/** --config names one of the dataset's configs (a usage error that lists them, not a failure). */
function knownConfig(dir: string, config: string): void {
  const configs = Object.keys(readManifestJson(resolve(dir)).configs);
  if (!configs.includes(config)) throw new UsageError(`--config ${config}: ${dir} has ${configs.join(', ')}`);
}

/**
 * The documented exit codes: 0 done, 1 some units (or a check) failed, 2 usage error, 3 Docker or
 * Redis unreachable, 128 + the signal's number when stopped by one (130 SIGINT, 143 SIGTERM).
 */
const exitCodeOf = (e: unknown) => (e instanceof UsageError ? 2 : e instanceof EnvironmentUnavailable ? 3 : e instanceof Stopped ? e.exitCode : 1);

/** Runs a command that works on an output folder with the graceful stop (pipeline/stop.ts) installed. */
async function stoppable<T>(work: () => Promise<T>): Promise<T> {
  const stop = stopOnSignals(log);
  try {
    return await work();
  } finally {
    await stop.dispose();
  }
}

// The queue's modules load BullMQ and ioredis (about a second on a busy machine): only enqueue,
// worker and status --redis import them, when they run.

// A reader that stops early (`| head`) closes the pipe; that ends our output, not in an error.
process.stdout.on('error', (e: NodeJS.ErrnoException) => {
  if (e.code === 'EPIPE') process.exit(0);
  throw e;
});

async function pipelineCommand(a: PipelineArgs, stages: string[]): Promise<void> {
  const progress = new Progress(progressMode(a.progress));
  const run = await stoppable(() => runPipeline(a.manifest, stages, toPipelineOptions(a), progress.log, progress));
  process.stdout.write((a.json ? machineJson(runJson(run), 2) : formatRun(forTerminal(run))) + '\n');
  process.exitCode = run.exitCode;
}

const stageCommand = (name: string, describe: string) => ({
  command: name,
  describe,
  builder: pipelineOptions,
  handler: (a: PipelineArgs) => pipelineCommand(a, [name]),
});

await yargs(hideBin(process.argv))
  .scriptName('worldline')
  .command({
    command: 'run',
    describe: `Run the stages in order (${ALL_STAGES.join(', ')}) for every unit of the manifest`,
    builder: (y) =>
      pipelineOptions(y)
        .option('stages', { type: 'string', default: ALL_STAGES.join(','), describe: 'Comma-separated stages to run', coerce: commaList })
        .group(['stages'], 'Units:'),
    handler: (a) => pipelineCommand(a, a.stages),
  })
  .command(stageCommand('clone', 'Mirror each repository, check out its commit, record provenance and license'))
  .command({
    command: 'resolve',
    describe:
      "Print each manifest line with the environment found for it (a bare line's inferred from the repository's files, or as a build repaired it; a manifest env as written), provenance as # comments: a manifest to review, pin and run",
    builder: pipelineOptions,
    handler: async (a: PipelineArgs) => {
      const progress = new Progress(progressMode(a.progress));
      const { text, exitCode } = await stoppable(() => resolveManifest(a.manifest, toPipelineOptions(a), progress.log, progress));
      process.stdout.write(text);
      process.exitCode = exitCode;
    },
  })
  .command(stageCommand('build', 'Build one environment image per unit (its resolved environment, the project installed, repaired until it collects)'))
  .command(stageCommand('validate', 'Run each suite in a sandbox, N times, and record per-test outcomes'))
  .command(stageCommand('trace', 'Trace each validated suite line by line and cut CWM function-level episodes'))
  .command(
    stageCommand(
      'describe',
      "Describe a seeded share of each unit's trace episodes in plain language (a template, or a model server) and check the outcome each states",
    ),
  )
  .command(stageCommand('forage', 'Create mutation-fix and issue-fix tasks, roll a policy out on each in the repository container, verify, and trace each fix'))
  .command({
    command: 'shard',
    describe: 'Write the dataset (Parquet shards, manifest.json, card) from what the output folder holds',
    builder: (y) =>
      layoutOptions(existingOut(outputOptions(y))).check((a) => {
        if (!existsSync(outLayout.ledger(a.out))) throw new UsageError(`--out ${a.out} holds no run (no ledger/): nothing to shard; worldline run writes one`);
        return true;
      }),
    handler: async (a) => {
      const policy = toContentPolicy(a);
      const { mix, ...manifest } = await stoppable(() => shardOutput(resolve(a.out), {}, toLayout(a), a['issue-fix-share'], policy)).catch((e: unknown) => {
        throwIfStopped('the dataset was not written; the published version is as it was');
        throw e;
      });
      if (mix.warning) log(`warning: ${mix.warning}`);
      const { excluded, warning } = policyExclusions(manifest, policy);
      if (warning) log(`warning: ${warning}`);
      process.stdout.write((a.json ? machineJson(manifest, 2) : formatShard(manifest.configs, mix, excluded)) + '\n');
    },
  })
  .command({
    command: 'enqueue',
    describe: 'Put every unit of the manifest on the queue (one job a unit) for workers to take; the stage options travel with the jobs',
    builder: (y) =>
      queueOptions(pipelineOptions(y))
        .option('stages', {
          type: 'string',
          default: 'clone,build,validate,trace,describe,forage',
          describe: 'Comma-separated unit stages each job runs',
          coerce: commaList,
        })
        .option('attempts', { type: 'number', default: DEFAULT_RETRY.attempts, describe: 'Attempts per unit before it is a dead letter' })
        .option('backoff', { type: 'number', default: DEFAULT_RETRY.backoffMs / 1000, describe: 'Seconds before the first retry; doubled each retry' })
        .option('job-timeout', { type: 'number', default: 0, describe: 'Seconds one attempt of a unit may take (0: no limit)' })
        .group(['stages', 'attempts', 'backoff', 'job-timeout'], 'Queue:')
        .check((a) => {
          if (!a.redis) throw new UsageError('enqueue needs --redis URL (or WORLDLINE_REDIS)');
          if (a.stages.includes('shard')) throw new UsageError('shard is not a queued stage: run worldline shard once after the workers are done');
          positiveInt('--attempts', a.attempts);
          if (!(a.backoff >= 0) || !(a['job-timeout'] >= 0)) throw new UsageError('--backoff and --job-timeout are seconds >= 0');
          return true;
        }),
    handler: async (a) => {
      await requireRedis(a.redis!);
      const { enqueueManifest } = await import('../pipeline/queue/enqueue.js');
      const report = await enqueueManifest(
        a.manifest,
        a.stages,
        toPipelineOptions(a),
        { redis: a.redis!, name: a.queue, retry: { attempts: a.attempts, backoffMs: a.backoff * 1000 }, timeoutS: a['job-timeout'] },
        log,
      );
      process.stdout.write((a.json ? machineJson(report, 2) : `${report.added} unit(s) queued, ${report.already} already on the queue`) + '\n');
      process.exitCode = report.manifest_errors ? 1 : 0;
    },
  })
  .command({
    command: 'worker',
    describe: 'Take unit jobs from the queue and run them on this host (one worker a Docker host); outputs go to --out, a folder every host shares',
    builder: (y) =>
      progressOption(queueOptions(outputOptions(y)))
        .option('concurrency', { type: 'number', default: DEFAULTS.concurrency, describe: 'Units in flight at once' })
        .option('lock-duration', { type: 'number', default: 30, describe: "Seconds after a dead worker's last lock renewal before its job is taken over" })
        .option('exit-when-drained', { type: 'boolean', default: false, describe: 'Exit once nothing is waiting, retrying or running (batch jobs)' })
        .option('image-budget', imageBudgetOption)
        .group(['concurrency', 'lock-duration', 'exit-when-drained', 'image-budget'], 'Worker:')
        .check((a) => {
          if (!a.redis) throw new UsageError('worker needs --redis URL (or WORLDLINE_REDIS)');
          positiveInt('--concurrency', a.concurrency);
          positiveInt('--lock-duration', a['lock-duration']);
          imageBudgetGb(a['image-budget']);
          return true;
        }),
    handler: async (a) => {
      await requireRedis(a.redis!);
      await requireDocker();
      const progress = new Progress(progressMode(a.progress));
      const { runWorker } = await import('../pipeline/queue/unit_worker.js');
      const totals = await stoppable(() =>
        runWorker(
          {
            redis: a.redis!,
            queue: a.queue,
            out: resolve(a.out),
            concurrency: a.concurrency,
            lockDurationMs: a['lock-duration'] * 1000,
            exitWhenDrained: a['exit-when-drained'],
            imageBudgetGb: imageBudgetGb(a['image-budget']),
          },
          progress.log,
          progress,
        ),
      );
      throwIfStopped(`${totals.done} unit(s) done; the jobs in flight went back on the queue`);
      process.stdout.write((a.json ? machineJson(totals) : `${totals.done} unit(s) done, ${totals.retried} retried, ${totals.dead} dead`) + '\n');
    },
  })
  .command({
    command: 'status',
    describe: 'Per-stage counts and every failure with its reason; with --redis, the queue: waiting/active/done/failed/dead per stage, throughput, ETA',
    builder: (y) => queueOptions(existingOut(outputOptions(y))),
    handler: async (a) => {
      if (a.redis) await requireRedis(a.redis);
      const s = readStatus(resolve(a.out), { disk: true });
      const queue = a.redis ? await import('../pipeline/queue/queue_status.js') : null;
      const q = queue && a.redis ? await queue.readQueueStatus(a.redis, a.queue, s) : null;
      if (a.json) process.stdout.write(machineJson(q ? { ...s, queue: q } : s, 2) + '\n');
      else process.stdout.write((q && queue ? queue.formatQueueStatus(forTerminal(q), forTerminal(s)) : formatStatus(forTerminal(s))) + '\n');
    },
  })
  .command({
    command: 'gc',
    describe:
      "Free what an output folder's runs left on this host: work folders and their mounts, temporary files, unpublished dataset versions, dead runs' containers; --images: its env images",
    builder: (y) =>
      existingOut(outputOptions(y))
        .option('images', {
          type: 'boolean',
          default: false,
          describe: "Also remove the env images of the output folder's units (rebuilt when needed)",
        })
        .option('host-wide', {
          type: 'boolean',
          default: false,
          describe:
            "Remove the containers of every dead Worldline run on this host, whatever its output folder (by default only this folder's runs'), and the build network when no build uses it; with --images, the base images too",
        }),
    handler: async (a) => {
      await requireDocker();
      const r = await collectGarbage(resolve(a.out), { images: a.images, hostWide: a['host-wide'] });
      process.stdout.write(
        (a.json
          ? machineJson(r, 2)
          : `work folders: ${gb(r.work_bytes)}; temporary files removed: ${r.temps_removed}; dataset versions removed: ${r.versions_removed.length}; containers removed: ${r.containers_removed}${a['host-wide'] ? ` (host-wide); build networks removed: ${r.networks_removed}` : ''}; images removed: ${r.images_removed.length} (${gb(r.image_bytes)})`) +
          '\n',
      );
    },
  })
  .command({
    command: 'push',
    describe:
      "Push the env images a dataset's tasks name (and their base images) that this host holds to an OCI registry, by digest, and record where each went in DIR/images.json: a rollout host then pulls them instead of building",
    builder: pushOptions,
    handler: async (a) => {
      await requireDocker();
      const r = await pushDataset(resolve(a.dataset), a.registry, log);
      const t = forTerminal(r);
      process.stdout.write(
        (a.json
          ? machineJson(r, 2)
          : `${t.pushed.length} image(s) pushed to ${t.registry}, ${t.failed.length} failed${t.failed.map((f) => `\n  ${f.error}`).join('')}\nimages: ${t.images_file}`) +
          '\n',
      );
      process.exitCode = r.failed.length ? 1 : 0;
    },
  })
  .command({
    command: 'verify <dir>',
    describe: 'Check a dataset against its manifest: checksums, row counts, schemas, every shard and nested column readable by DuckDB',
    builder: (y) => datasetDir(y).option('json', { type: 'boolean', default: false }),
    handler: async (a) => {
      const report = await verifyDataset(resolve(a.dir));
      process.stdout.write((a.json ? machineJson(report, 2) : formatVerify(forTerminal(report))) + '\n');
      process.exitCode = report.ok ? 0 : 1;
    },
  })
  .command({
    command: 'audit <dir>',
    describe: 'Is the dataset fit for training? Task mix against its target, outcomes, traces, repository dominance, run health (DuckDB over the shards)',
    builder: (y) =>
      datasetDir(y)
        .option('issue-fix-share', {
          alias: 'target',
          type: 'number',
          default: DEFAULT_ISSUE_FIX_SHARE,
          describe: 'Issue-fix share the task mix is judged against (as run and shard take it)',
        })
        .option('tolerance', { type: 'number', default: MIX_TOLERANCE, describe: 'Distance from the target (a share: 0.005 is half a point) still judged OK' })
        .option('top', { type: 'number', default: DEFAULT_TOP_K, describe: 'How many of the largest repositories the dominance figures count' })
        .option('json', { type: 'boolean', default: false, describe: 'Print every figure as one JSON object' })
        .option('html', { type: 'string', describe: 'Also write a self-contained HTML report with charts to this file' })
        .option('fail-on-drift', {
          type: 'boolean',
          default: false,
          describe: 'Exit 1 when the task mix is off its target, DRIFT or CLOSEST (for CI gates)',
        })
        .check((a) => {
          share('--issue-fix-share', a['issue-fix-share']);
          share('--tolerance', a.tolerance);
          positiveInt('--top', a.top);
          return true;
        }),
    handler: async (a) => {
      const report = await auditDataset(resolve(a.dir), {
        target: a['issue-fix-share'],
        tolerance: a.tolerance,
        topK: a.top,
        runStatus: statusBeside(resolve(a.dir)),
      });
      if (a.html) writeFileSync(resolve(a.html), auditHtml(report));
      process.stdout.write((a.json ? machineJson(report, 2) : formatAudit(forTerminal(report))) + '\n');
      if (a.html && !a.json) process.stdout.write(`report: ${resolve(a.html)}\n`);
      if (a['fail-on-drift'] && (report.mix.status === 'DRIFT' || report.mix.status === 'CLOSEST')) process.exitCode = 1;
    },
  })
  .command({
    command: 'rebalance <dir>',
    describe:
      'Write a new, verified dataset whose task issue-fix share is within --tolerance (half a point) of --issue-fix-share; dropped tasks take their trajectories and before/after traces',
    builder: (y) =>
      datasetDir(y)
        .option('issue-fix-share', { alias: 'target', type: 'number', default: DEFAULT_ISSUE_FIX_SHARE, describe: 'Issue-fix share of the tasks to reach' })
        .option('tolerance', {
          type: 'number',
          default: MIX_TOLERANCE,
          describe: 'How near the share must come (a share: 0.005 is half a point); farther is an error (exit 2)',
        })
        .option('out', { type: 'string', demandOption: true, describe: 'The new dataset folder (a symlink to its version, like OUT/dataset)' })
        .option('seed', { type: 'string', default: DEFAULT_MIX_SEED, describe: 'Seed of which tasks of a kind are dropped' })
        .option('json', { type: 'boolean', default: false, describe: 'Print the report as JSON' })
        .check((a) => {
          share('--issue-fix-share', a['issue-fix-share']);
          share('--tolerance', a.tolerance);
          return true;
        }),
    handler: async (a) => {
      const report = await rebalanceDataset(resolve(a.dir), resolve(a.out), a['issue-fix-share'], { seed: a.seed, tolerance: a.tolerance }).catch(
        (e: unknown) => {
          throw e instanceof MixUnreachable || e instanceof RebalanceRefused ? new UsageError(e.message) : e;
        },
      );
      process.stdout.write((a.json ? machineJson(report, 2) : formatRebalance(forTerminal(report))) + '\n');
      process.exitCode = report.verify.ok ? 0 : 1;
    },
  })
  .command({
    command: 'cat <dir>',
    describe: 'Stream rows of one config as JSON Lines (bounded memory)',
    builder: (y) =>
      datasetDir(y)
        .option('config', { type: 'string', demandOption: true, describe: 'repos, tests, ...' })
        .option('limit', { type: 'number', describe: 'At most this many rows' })
        .option('columns', { type: 'string', describe: 'Comma-separated columns (default: all)', coerce: commaList })
        .option('rank', { type: 'number', default: 0, describe: 'Read only the shards of this rank' })
        .option('world-size', { type: 'number', default: 1, describe: 'Ranks sharing the shards' })
        .check((a) => {
          knownConfig(a.dir as string, a.config);
          wholeAtLeast('--limit', a.limit);
          positiveInt('--world-size', a['world-size']);
          if (!(Number.isInteger(a.rank) && a.rank >= 0 && a.rank < a['world-size']))
            throw new UsageError(`--rank must be in 0..${a['world-size'] - 1} (got ${a.rank})`);
          return true;
        }),
    handler: async (a) => {
      const rows = readRows(resolve(a.dir), {
        config: a.config,
        limit: a.limit,
        columns: a.columns,
        rank: a.rank,
        worldSize: a['world-size'],
      });
      try {
        for await (const row of rows) await writeStdout(machineJson(row) + '\n');
      } catch (e) {
        // A column the config does not have is the caller's to fix, as DuckDB's binder says.
        if ((e as Error).message.startsWith('Binder Error')) throw new UsageError(`--columns: ${(e as Error).message.split('\n')[0]}`);
        throw e;
      }
    },
  })
  .command({
    command: 'export <dir>',
    describe: "Write a dataset's tasks as SWE-bench JSON Lines (FAIL_TO_PASS/PASS_TO_PASS as JSON strings) for its harness",
    builder: (y) =>
      datasetDir(y).option('swebench-only', {
        type: 'boolean',
        default: false,
        describe: "Only SWE-bench's own fields (issue-fix tasks only: a mutation's state needs bug_patch)",
      }),
    handler: async (a) => {
      const tasks = await readDatasetTasks(resolve(a.dir));
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
      datasetDir(y)
        .option('config', { type: 'string', default: 'traces', describe: 'traces or trajectories' })
        .option('format', {
          choices: [...TRACE_FORMATS, ...TRAJECTORY_FORMATS],
          default: 'jsonl' as const,
          describe:
            'traces: jsonl ({"node_id", "function", "text"} per line) or text (each raw text under a "==> node id function <==" line); trajectories: messages (chat messages for SFT) or transitions (state, action, next state, reward)',
        })
        .option('limit', { type: 'number', describe: 'At most this many episodes' })
        .check((a) => {
          knownConfig(a.dir as string, a.config);
          wholeAtLeast('--limit', a.limit);
          if (a.config === 'trajectories' && !isTrajectoryFormat(a.format))
            throw new UsageError('trajectories render as --format messages or --format transitions');
          if (a.config !== 'trajectories' && !isTraceFormat(a.format))
            throw new UsageError(`--format ${a.format} is for trajectories; traces render as jsonl or text`);
          return true;
        }),
    handler: async (a) => {
      // The check above matched the format to the config.
      if (a.config === 'trajectories') return renderTrajectories(resolve(a.dir), { format: a.format as TrajectoryFormat, limit: a.limit }, writeStdout);
      const format = a.format as TraceFormat;
      const mismatches = await renderTraces(resolve(a.dir), { config: a.config, format, limit: a.limit }, format === 'text' ? writeText : writeStdout, (m) =>
        process.stderr.write(`worldline: ${terminalSafe(m)}\n`),
      );
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
        .option('format', {
          choices: ['jsonl', 'text'] as const,
          default: 'jsonl' as const,
          describe: "jsonl: one result per input; text: the episodes' token text",
        })
        .option('decontaminate-against', {
          type: 'string',
          describe: "A benchmark's solutions (JSON Lines or text): a program sharing most of its token 13-grams with them is refused, not traced",
        })
        .option('overlap-threshold', {
          type: 'number',
          default: DEFAULT_OVERLAP_THRESHOLD,
          describe: 'Share of 13-grams in the benchmark that refuses a program',
        })
        .check((a) => {
          share('--step-in', a['step-in']);
          positiveInt('--max-events', a['max-events']);
          if (!(a.timeout > 0)) throw new UsageError(`--timeout must be seconds > 0 (got ${a.timeout})`);
          share('--overlap-threshold', a['overlap-threshold']);
          return true;
        }),
    handler: async (a) => {
      if (a['decontaminate-against']) {
        const c = scriptContamination(resolve(a.file as string), resolve(a['decontaminate-against']), a['overlap-threshold']);
        if (c.contaminated) {
          process.stderr.write(`worldline: ${c.summary}: contaminated, not traced (--overlap-threshold ${a['overlap-threshold']})\n`);
          process.exitCode = 1;
          return;
        }
        log(`decontamination: ${c.summary}`);
      }
      const results = await traceScript(
        resolve(a.file as string),
        (a.stdin as string[]).map((f) => resolve(f)),
        {
          python: a.python as PythonVersion,
          baseImage: a['base-image'],
          stepIn: a['step-in'],
          seed: a['trace-seed'],
          maxEvents: a['max-events'],
          timeoutS: a.timeout,
        },
        log,
      );
      await (a.format === 'text' ? writeText : writeStdout)(formatScriptTraces(results, a.format));
      process.exitCode = allTraced(results) ? 0 : 1;
    },
  })
  .command({
    command: 'serve',
    describe: "Serve the dataset's tasks as reinforcement-learning environments over OpenEnv's protocol (WebSocket /ws; /health, /schema, /metadata)",
    builder: serveOptions,
    handler: async (a) => {
      await requireDocker();
      const log = (m: string) => process.stderr.write(`worldline: ${terminalSafe(m)}\n`);
      const catalog = await TaskCatalog.load(resolve(a.dataset), a.manifest && resolve(a.manifest));
      if (a.registry) await pullMissingImages(catalog, resolve(a.dataset), a.registry, log);
      const server = await serve(catalog, {
        host: a.host,
        port: a.port,
        token: a.token ?? process.env.WORLDLINE_SERVE_TOKEN,
        maxSessions: a['max-sessions'],
        idleS: a['idle-timeout'],
        record: a.record,
        budgets: { maxTurns: a['max-turns'], maxTokens: DEFAULTS.maxTokens, maxWallS: a['max-wall'] },
        limits: { memoryMb: a.memory, cpus: a.cpus, pids: a.pids, bashTimeoutS: a['bash-timeout'], outputCap: 20_000 },
        options: { ...DEFAULTS, out: catalog.out, memoryMb: a.memory, cpus: a.cpus, pids: a.pids, workDiskMb: a['work-disk'] },
        log,
      });
      log(`serving ${catalog.size} task(s) at ${server.url} (WebSocket ${server.url.replace(/^http/, 'ws')}/ws), at most ${a['max-sessions']} sessions`);
      // A stop removes every session's container before the process goes (a kill leaves them to the next start's sweep).
      const signal = await new Promise<NodeJS.Signals>((done) => {
        process.once('SIGINT', () => done('SIGINT'));
        process.once('SIGTERM', () => done('SIGTERM'));
      });
      log(`${signal}: closing every session`);
      await server.close();
      process.exit(signal === 'SIGINT' ? 130 : 143);
    },
  })
  .demandCommand(1, 'name a command: worldline --help lists them')
  .check(numbersAreNumbers)
  .strict()
  .help()
  .wrap(Math.min(100, process.stdout.isTTY ? process.stdout.columns : 100))
  .epilogue(
    'Exit codes: 0 done; 1 some units failed (each with its reason) or a check failed; 2 usage error; 3 Docker Engine or Redis unreachable; 130 or 143 stopped by SIGINT or SIGTERM (128 + the signal).',
  )
  .fail((msg, err) => {
    if (err && !(err instanceof UsageError)) {
      process.stderr.write(`worldline: ${terminalSafe(err.message, true)}\n`);
      process.exit(exitCodeOf(err));
    }
    process.stderr.write(`worldline: ${terminalSafe(msg ?? err?.message ?? '', true)}\nRun worldline --help for usage.\n`);
    process.exit(2);
  })
  .parseAsync()
  .catch((e: Error) => {
    process.stderr.write(`worldline: ${terminalSafe(e.message, true)}\n`);
    process.exit(exitCodeOf(e));
  });
