/**
 * The queue job a piece of work runs for, carried through every await (AsyncLocalStorage) so the
 * sandbox can label each container with it and refuse new ones once the job is cancelled. A
 * worker abandons a job that ran past --job-timeout; without this its stage would carry on in
 * the background, starting containers nobody waits for.
 */
import { AsyncLocalStorage } from 'node:async_hooks';

export interface JobScope {
  /** The container label value naming this job's attempt (`unit id#attempt`). */
  readonly id: string;
  cancelled: boolean;
}

const current = new AsyncLocalStorage<JobScope>();

/** Runs `work` (and everything it awaits) inside `scope`. */
export function inJob<T>(scope: JobScope, work: () => Promise<T>): Promise<T> {
  return current.run(scope, work);
}

export class JobCancelled extends Error {}

/** The job label for a new container (none outside a job); throws once the job is cancelled. */
export function jobLabel(): Record<string, string> {
  const scope = current.getStore();
  if (!scope) return {};
  if (scope.cancelled) throw new JobCancelled(`job ${scope.id} was cancelled (timed out): no new containers`);
  return { [JOB_LABEL]: scope.id };
}

/** True when the running code belongs to a cancelled job (its results must not be recorded). */
export const jobCancelled = (): boolean => current.getStore()?.cancelled ?? false;

export const JOB_LABEL = 'worldline.job';
