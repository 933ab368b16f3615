/**
 * One queue job: one unit through the stages the enqueue named, with the pipeline options it was
 * enqueued with (every worker runs a unit alike, whatever its own command line). The output folder
 * is the worker's: the hosts mount the shared folder wherever they like.
 *
 * Jobs are per unit, not per (unit, stage): a unit's stages need its checkout and its env image,
 * both on the host that made them, and the stage times of a unit are dominated by one stage
 * (validate or trace) so splitting would move work between hosts without balancing it.
 */
import type { JobsOptions } from 'bullmq';
import type { StageName } from '../runtime/ledger.js';
import type { Unit } from '../runtime/manifest.js';
import { DEFAULTS, type PipelineOptions } from '../runtime/options.js';

export interface UnitJobData {
  unit: Unit;
  stages: StageName[];
  options: Omit<PipelineOptions, 'out'>;
  /** Seconds one attempt may take before it fails as timed out (0: no limit). */
  timeoutS: number;
}

/**
 * A job's options, with today's default for any option its enqueuing build did not know: a job
 * from before --task-concurrency has no `taskConcurrency`, and forage would work none of its tasks.
 */
export const jobPipelineOptions = (data: UnitJobData): Omit<PipelineOptions, 'out'> => ({ ...DEFAULTS, ...data.options });

/** What a completed job returns: which stages did work in this attempt, and where. */
export interface UnitJobResult {
  ran: StageName[];
  worker: string;
}

/** What a job reports while it runs (BullMQ progress): the stage it is in. */
export interface UnitJobProgress {
  stage: StageName;
}

export interface RetryPolicy {
  /** Attempts before the job is a dead letter. */
  attempts: number;
  /** First retry delay; doubled each attempt. */
  backoffMs: number;
}

export const DEFAULT_RETRY: RetryPolicy = { attempts: 3, backoffMs: 10_000 };

/**
 * The job id is the unit id: adding a unit that is already queued, running or done is a no-op,
 * so enqueueing the same manifest twice never runs a unit twice. Completed and dead jobs are kept:
 * they are the record `status` reads (dead letters keep their reason).
 */
export function jobOptions(unit: Unit, retry: RetryPolicy): JobsOptions {
  return {
    jobId: unit.id,
    attempts: retry.attempts,
    backoff: { type: 'exponential', delay: retry.backoffMs },
    removeOnComplete: false,
    removeOnFail: false,
  };
}

/** A dead letter's or retry's reason names its stage first (`trace: ...`): status groups by it. */
export const stageOfReason = (reason: string | undefined): string => /^([a-z]+): /.exec(reason ?? '')?.[1] ?? 'queue';
