/**
 * mapLimit: at most `limit` jobs in flight, results in input order, and after a failure nothing new
 * starts and the failure surfaces only once the jobs in flight have finished (forage's tasks hold
 * containers and files: none may outlive the stage that started them).
 */
import { describe, expect, it } from 'vitest';
import { mapLimit } from '../core/map_limit.js';

const tick = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe('mapLimit', () => {
  it('keeps at most limit in flight and the results in input order', async () => {
    let inFlight = 0;
    let most = 0;
    const out = await mapLimit([30, 5, 20, 1, 10], 2, async (ms) => {
      most = Math.max(most, ++inFlight);
      await tick(ms);
      inFlight -= 1;
      return ms * 2;
    });
    expect(out).toEqual([60, 10, 40, 2, 20]);
    expect(most).toBe(2);
  });

  it('starts nothing after a failure and throws it once the jobs in flight have settled', async () => {
    const started: number[] = [];
    const finished: number[] = [];
    const run = mapLimit([0, 1, 2, 3, 4], 2, async (i) => {
      started.push(i);
      // Job 0 fails at once; job 1, in flight beside it, takes longer.
      if (i === 0) throw new Error('job 0 failed');
      await tick(50);
      finished.push(i);
      return i;
    });
    await expect(run).rejects.toThrow('job 0 failed');
    expect(started).toEqual([0, 1]);
    expect(finished).toEqual([1]);
  });

  it('refuses a missing limit rather than starting no worker (a job enqueued before the option existed)', async () => {
    const started: number[] = [];
    const run = mapLimit([1, 2], undefined as unknown as number, async (n) => started.push(n));
    await expect(run).rejects.toThrow('mapLimit: no limit (undefined)');
    expect(started).toEqual([]);
  });
});
