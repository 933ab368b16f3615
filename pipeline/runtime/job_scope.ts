/**
 * What a piece of work runs for, carried through every await (AsyncLocalStorage): the output folder
 * (every container is labelled with it, so `gc --out` and a run's start touch only that folder's)
 * and, in a worker, the queue job (labelled too; a job past --job-timeout is cancelled: the sandbox
 * refuses new containers and nothing it finishes is recorded). Beside them, two things that spoil
 * work in flight for the whole process: a stop (SIGINT/SIGTERM, `pipeline/stop.ts`), and the Docker
 * Engine going away (a restart kills every container it ran). Work they spoil records nothing: the
 * ledger keeps only what ran to its end undisturbed, and the next run does the rest.
 */
import { AsyncLocalStorage } from 'node:async_hooks';
import { realpathSync } from 'node:fs';
import { resolve } from 'node:path';
import { hashOf } from '../../core/hashing.js';

export interface JobScope {
  /** The container label value naming this job's attempt (`unit id#attempt`). */
  readonly id: string;
  cancelled: boolean;
  /** Work of the job that is no container (an image build the engine runs for us): stopped by `cancelJob`. */
  aborts?: Set<AbortController>;
}

const current = new AsyncLocalStorage<JobScope>();
const live = new Set<JobScope>();

/** Runs `work` (and everything it awaits) inside `scope`. */
export async function inJob<T>(scope: JobScope, work: () => Promise<T>): Promise<T> {
  live.add(scope);
  try {
    return await current.run(scope, work);
  } finally {
    live.delete(scope);
  }
}

export class JobCancelled extends Error {}

/** The process-wide stop: aborted once, with the reason (`stopped by SIGTERM`). */
const stopper = new AbortController();
/** Builds of work outside any job: aborted by a stop. */
const unscoped = new Set<AbortController>();

/** Aborted when the process is stopping: no new work starts and what is in flight records nothing. */
export const stopSignal = (): AbortSignal => stopper.signal;

/** Stops the whole process's work: every job cancelled, every build aborted, no new container. */
export function stopAll(reason: string): void {
  if (stopper.signal.aborted) return;
  stopper.abort(reason);
  for (const scope of live) cancelJob(scope);
  for (const c of unscoped) c.abort();
}

/** The job label for a new container (none outside a job); throws once the job is cancelled or the process stops. */
export function jobLabel(): Record<string, string> {
  if (stopper.signal.aborted) throw new JobCancelled(`${String(stopper.signal.reason)}: no new containers`);
  const scope = current.getStore();
  if (!scope) return {};
  if (scope.cancelled) throw new JobCancelled(`job ${scope.id} was cancelled (timed out): no new containers`);
  return { [JOB_LABEL]: scope.id };
}

/** Marks `scope` cancelled and aborts what it registered with `abortOnCancel`. */
export function cancelJob(scope: JobScope): void {
  scope.cancelled = true;
  for (const c of scope.aborts ?? []) c.abort();
}

/**
 * Aborts `controller` if the running job is cancelled or the process stops: a package build has no
 * container of ours to remove, but dropping its request stops it. Returns the unregistration.
 */
export function abortOnCancel(controller: AbortController): () => void {
  const scope = current.getStore();
  if (stopper.signal.aborted || scope?.cancelled) controller.abort();
  if (scope) scope.aborts ??= new Set();
  const set = scope?.aborts ?? unscoped;
  set.add(controller);
  return () => set.delete(controller);
}

/** True when the running code belongs to a cancelled job, or the process is stopping (its results must not be recorded). */
export const jobCancelled = (): boolean => stopper.signal.aborted || (current.getStore()?.cancelled ?? false);

export const JOB_LABEL = 'worldline.job';

let engineLosses = 0;
let lastLoss = '';
const lossListeners = new Set<(why: string) => void>();

/** The Docker Engine went away (a restart, a crash): every container it ran is gone, whatever their runs said. */
export function engineWentAway(why: string): void {
  engineLosses += 1;
  lastLoss = why;
  for (const l of lossListeners) l(why);
}

/** Calls `listener` at the next loss of the engine (until the returned function takes it off). */
export function onEngineLoss(listener: (why: string) => void): () => void {
  lossListeners.add(listener);
  return () => lossListeners.delete(listener);
}

/** A mark taken when a piece of work starts, for `spoiled`. */
export const workMark = (): number => engineLosses;

/**
 * Why the work started at `mark` must not be recorded (its job cancelled, the process stopping, the
 * Docker Engine lost while it ran), or null: its result is the one an undisturbed run gives.
 */
export function spoiled(mark: number): string | null {
  if (stopper.signal.aborted) return String(stopper.signal.reason);
  if (current.getStore()?.cancelled) return 'job cancelled';
  if (engineLosses !== mark) return `the Docker Engine went away while it ran (${lastLoss})`;
  return null;
}

/** The label every container of an output folder's runs carries: `gc --out` and a run's start remove only those. */
export const OUT_LABEL = 'worldline.out';

/** An output folder's identity on this host: a hash of its real path (the same folder by any name). */
export function outIdentity(out: string): string {
  let path = resolve(out);
  try {
    path = realpathSync(path);
  } catch {
    // Not made yet: its absolute path is what it will be found by.
  }
  return hashOf(path, 16);
}

const folder = new AsyncLocalStorage<string>();

/** Runs `work` (and everything it awaits) for the output folder `out`: its containers carry OUT_LABEL. */
export const forOutput = <T>(out: string, work: () => Promise<T>): Promise<T> => folder.run(outIdentity(out), work);

/** The output-folder label for a new container (none outside `forOutput`). */
export function outLabel(): Record<string, string> {
  const id = folder.getStore();
  return id ? { [OUT_LABEL]: id } : {};
}
