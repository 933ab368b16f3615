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
  /** Work of the job that is no container (an image build the engine runs for us): stopped by `cancelJob`. */
  aborts?: Set<AbortController>;
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

/** Marks `scope` cancelled and aborts what it registered with `abortOnCancel`. */
export function cancelJob(scope: JobScope): void {
  scope.cancelled = true;
  for (const c of scope.aborts ?? []) c.abort();
}

/**
 * Aborts `controller` if the running job is cancelled (none outside a job): a package build has
 * no container of ours to remove, but dropping its request stops it. Returns the unregistration.
 */
export function abortOnCancel(controller: AbortController): () => void {
  const scope = current.getStore();
  if (!scope) return () => undefined;
  if (scope.cancelled) controller.abort();
  scope.aborts ??= new Set();
  scope.aborts.add(controller);
  return () => scope.aborts?.delete(controller);
}

/** True when the running code belongs to a cancelled job (its results must not be recorded). */
export const jobCancelled = (): boolean => current.getStore()?.cancelled ?? false;

export const JOB_LABEL = 'worldline.job';
