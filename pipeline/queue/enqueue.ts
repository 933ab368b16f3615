/**
 * `worldline enqueue`: every unit of a manifest becomes one job on the queue (job id = unit id, so
 * a second enqueue of the same manifest adds nothing that is queued, running or done).
 */
import { Queue } from 'bullmq';
import { openManifest, unitStages } from '../run.js';
import type { StageName } from '../runtime/ledger.js';
import type { PipelineOptions } from '../runtime/options.js';
import { redisConnection } from './connection.js';
import { jobOptions, type RetryPolicy, type UnitJobData } from './unit_job.js';

export interface EnqueueReport {
  units: number;
  added: number;
  /** Units whose job already existed (queued, running, done or dead). */
  already: number;
  manifest_errors: number;
}

/** Redis round trips are the cost of a big manifest: jobs go in batches. */
const BATCH = 1000;

export async function enqueueManifest(
  manifestFile: string,
  stageNames: string[],
  options: PipelineOptions,
  queue: { redis: string; name: string; retry: RetryPolicy; timeoutS: number },
  log: (m: string) => void,
): Promise<EnqueueReport> {
  const manifest = openManifest(manifestFile, stageNames, options.out, log);
  const stages = unitStages(stageNames).map((s) => s.name as StageName);
  const { out: _out, ...jobOpts } = options;
  const q = new Queue<UnitJobData>(queue.name, { connection: redisConnection(queue.redis) });
  try {
    const total = async () => Object.values(await q.getJobCounts()).reduce((a, b) => a + b, 0);
    const before = await total();
    for (let i = 0; i < manifest.units.length; i += BATCH) {
      await q.addBulk(
        manifest.units.slice(i, i + BATCH).map((unit) => ({
          name: 'unit',
          data: { unit, stages, options: jobOpts, timeoutS: queue.timeoutS },
          opts: jobOptions(unit, queue.retry),
        })),
      );
    }
    const added = (await total()) - before;
    return { units: manifest.units.length, added, already: manifest.units.length - added, manifest_errors: manifest.errors.length };
  } finally {
    await q.close();
  }
}
