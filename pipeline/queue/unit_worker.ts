/**
 * `worldline worker`: takes unit jobs from the queue and runs each through the same executor as
 * `run` (runtime/executor.ts runUnit), against this host's Docker and the shared output folder.
 *
 * - Exactly once: the ledger is the completion record. A job that comes back (a retry, or a job
 *   whose worker died) skips every stage already in the ledger under the same key, and a stage's
 *   outputs are rewritten whole before its ledger entry, so a second run writes the same bytes.
 * - A dead worker: BullMQ renews each active job's lock every lockDuration/2; a SIGKILLed worker
 *   stops renewing, and any live worker's stalled check puts the job back in the queue.
 * - A failed unit: the attempt throws with the stage's reason; BullMQ retries it with exponential
 *   backoff (the retry runs the failed stage again) and after the last attempt keeps it in its
 *   failed set with the reason: the dead letters `status` lists.
 * - A timed-out attempt fails like any other. Its job is cancelled (runtime/job_scope.ts): its
 *   containers, labelled with the job, are removed; it can start no new ones; and the stage it
 *   was in records nothing in the ledger, so the retry runs that stage again.
 * - A stopped worker (SIGINT, SIGTERM: pipeline/stop.ts) takes no new job, its containers are
 *   removed and its jobs in flight go back on the queue as they were (no attempt spent), their
 *   stages in flight recorded nothing.
 */
import { hostname } from 'node:os';
import { Queue, WaitingError, Worker } from 'bullmq';
import { cleanUpAfterKilled, unitStages } from '../run.js';
import { removeWorkFolders, runUnit, type UnitSummary } from '../runtime/executor.js';
import { cancelJob, inJob, type JobScope, jobCancelled, stopSignal } from '../runtime/job_scope.js';
import { Ledger, type StageName } from '../runtime/ledger.js';
import type { Progress, StepsEvent } from '../runtime/progress.js';
import { removeJobContainers } from '../sandbox/engine.js';
import { ImageBudget } from '../sandbox/image_budget.js';
import { redisConnection } from './connection.js';
import { jobPipelineOptions, stageOfReason, type UnitJobData, type UnitJobProgress, type UnitJobResult } from './unit_job.js';

export interface WorkerOptions {
  redis: string;
  queue: string;
  out: string;
  concurrency: number;
  /** A job's lock; a dead worker's job goes back to the queue this long after its last renewal. */
  lockDurationMs: number;
  /** Exit once nothing is waiting, delayed or running (batch clusters); otherwise run until SIGTERM. */
  exitWhenDrained: boolean;
  /** Gigabytes of finished units' env images kept on this host (--image-budget); undefined: no limit. */
  imageBudgetGb?: number;
  /** What a job runs: the stages on this host's Docker, or (bench/queue.ts) a stand-in without Docker. */
  handler?: UnitHandler;
}

/** Runs one job's unit; `attempt` counts from 0. */
export type UnitHandler = (
  data: UnitJobData,
  out: string,
  attempt: number,
  log: (m: string) => void,
  onStage: (stage: StageName) => void,
  onSteps: (steps: StepsEvent) => void,
) => Promise<UnitSummary>;

/** The stages through the executor, against this host's Docker; then the unit's scratch and, over budget, images go. */
function stagesHandler(ledger: Ledger, budget: ImageBudget | null): UnitHandler {
  return async (data, out, attempt, log, onStage, onSteps) => {
    // A retry runs the failed stage again; a first attempt keeps the ledger's answer (its own --retry-failed).
    const enqueued = jobPipelineOptions(data);
    const options = { ...enqueued, out, retryFailed: enqueued.retryFailed || attempt > 0 };
    const summary = await runUnit(data.unit, unitStages(data.stages), options, ledger, log, onStage, onSteps);
    if (jobCancelled()) return summary; // timed out: the retry owns the unit's folders now
    removeWorkFolders(out, data.unit.id);
    await budget?.unitDone(ledger, data.unit.id);
    return summary;
  };
}

export interface WorkerTotals {
  done: number;
  retried: number;
  dead: number;
}

class JobTimedOut extends Error {}

/** `work` raced against `seconds` (0: none); at the timeout the race is lost first, then `onTimeout` runs. */
function withTimeout<T>(work: Promise<T>, seconds: number, reason: () => string, onTimeout: () => void): Promise<T> {
  if (!seconds) return work;
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => {
      reject(new JobTimedOut(reason()));
      onTimeout();
    }, seconds * 1000);
  });
  return Promise.race([work, timeout]).finally(() => clearTimeout(timer));
}

export async function runWorker(o: WorkerOptions, log: (m: string) => void, progress?: Progress): Promise<WorkerTotals> {
  if (!o.handler) await cleanUpAfterKilled(o.out, null, log);
  const connection = redisConnection(o.redis);
  const queue = new Queue(o.queue, { connection });
  queue.on('error', (e) => log(`queue: ${e.message}`));
  const unsettled = async () => {
    const c = await queue.getJobCounts('waiting', 'active', 'delayed', 'prioritized', 'paused', 'waiting-children', 'completed', 'failed');
    return { left: c.waiting + c.active + c.delayed + c.prioritized + c.paused + c['waiting-children'], settled: c.completed + c.failed };
  };
  const budget = o.imageBudgetGb === undefined ? null : new ImageBudget(o.imageBudgetGb * 1e9, log);
  const handler = o.handler ?? stagesHandler(new Ledger(o.out), budget);
  const me = `${hostname()}:${process.pid}`;
  const totals: WorkerTotals = { done: 0, retried: 0, dead: 0 };
  // Removals of timed-out jobs' containers: the worker does not exit before they are done.
  const removals = new Set<Promise<void>>();
  // Slots name what each concurrent job is doing on a progress display.
  const slots = new Array<string | null>(o.concurrency).fill(null);

  const worker = new Worker<UnitJobData, UnitJobResult>(
    o.queue,
    async (job, token) => {
      const { unit, stages, timeoutS } = job.data;
      const slot = slots.indexOf(null);
      slots[slot] = unit.id;
      const started = Date.now();
      let current: StageName = stages[0];
      const scope: JobScope = { id: `${unit.id}#${job.attemptsMade}`, cancelled: false };
      // Cancelled before its containers go: the stage they were running must not record their end.
      const cancel = () => {
        cancelJob(scope);
        if (o.handler) return; // a stand-in without Docker has no containers
        const removal = removeJobContainers(scope.id)
          .catch(() => 0)
          .then((removed) => log(`${unit.id}: timed out in ${current}; removed ${removed} container(s) of job ${scope.id}`));
        removals.add(removal);
        void removal.finally(() => removals.delete(removal));
      };
      try {
        const summary = await withTimeout(
          inJob(scope, () =>
            handler(
              job.data,
              o.out,
              job.attemptsMade,
              log,
              (stage) => {
                current = stage;
                job.updateProgress({ stage } satisfies UnitJobProgress).catch(() => undefined);
                progress?.event({ event: 'stage', unit_id: unit.id, stage, slot });
              },
              (steps) => progress?.event({ event: 'steps', unit_id: unit.id, slot, ...steps }),
            ),
          ),
          timeoutS,
          () => `${current}: job timed out after ${timeoutS} s`,
          cancel,
        );
        // Stopped (SIGINT, SIGTERM): the job goes back on the queue as it was, no attempt spent,
        // for this worker's next start or another worker; what it had in flight recorded nothing.
        if (stopSignal().aborted) {
          await job.moveToWait(token);
          log(`${unit.id}: put back on the queue (${String(stopSignal().reason)})`);
          throw new WaitingError();
        }
        if (summary.status === 'failed') throw new Error(`${summary.stage}: ${summary.reason}`);
        progress?.event({ event: 'unit', unit_id: unit.id, status: 'ok', stage: summary.stage, reason: null, seconds: (Date.now() - started) / 1000 });
        totals.done++;
        return { ran: summary.ran, worker: me };
      } finally {
        slots[slot] = null;
      }
    },
    {
      connection,
      concurrency: o.concurrency,
      lockDuration: o.lockDurationMs,
      stalledInterval: o.lockDurationMs,
      // A job whose workers keep dying is a dead letter, not an endless loop.
      maxStalledCount: 3,
    },
  );
  worker.on('failed', (job, err) => {
    if (!job) return;
    const reason = job.failedReason ?? err.message;
    if (job.attemptsMade >= (job.opts.attempts ?? 1)) {
      totals.dead++;
      log(`dead letter ${job.id} after ${job.attemptsMade} attempt(s): ${reason}`);
      progress?.event({ event: 'unit', unit_id: String(job.id), status: 'dead', stage: stageOfReason(reason) as StageName, reason, seconds: 0 });
    } else {
      totals.retried++;
      log(`retry ${job.id} (attempt ${job.attemptsMade} failed): ${reason}`);
      progress?.event({ event: 'unit', unit_id: String(job.id), status: 'retry', stage: stageOfReason(reason) as StageName, reason, seconds: 0 });
    }
  });
  // Redis going away (a restart) is logged, never fatal: ioredis reconnects and the worker resumes.
  worker.on('error', (e) => log(`queue: ${e.message}`));

  const closed = new Promise<void>((r) => worker.once('closed', () => r()));
  // A stop (pipeline/stop.ts) takes no new job; those in flight unwind and go back on the queue.
  const stop = () => void worker.close();
  if (stopSignal().aborted) stop();
  stopSignal().addEventListener('abort', stop);
  const first = await unsettled().catch(() => ({ left: 0, settled: 0 }));
  progress?.start(first.left + first.settled, [], o.concurrency);
  // Every second: the whole queue's bar, and (batch mode) whether the queue is drained.
  while (!worker.closing) {
    await new Promise((r) => setTimeout(r, 1000));
    const now = await unsettled().catch(() => null);
    if (!now) continue;
    progress?.queue(now.settled, now.left + now.settled);
    if (o.exitWhenDrained && now.left === 0 && slots.every((s) => s === null)) await worker.close();
  }
  await queue.close();
  await closed;
  await Promise.all(removals);
  stopSignal().removeEventListener('abort', stop);
  progress?.end();
  return totals;
}
