/**
 * Runs `fn` over `items` with at most `limit` in flight (`slot` says which); results keep the
 * input order. After a failure no further item starts, and the first failure is thrown once those
 * already in flight have settled: nothing keeps running (containers, files) behind a caller that
 * has moved on.
 */
export async function mapLimit<T, R>(items: T[], limit: number, fn: (item: T, slot: number) => Promise<R>): Promise<R[]> {
  // A missing limit (undefined, NaN) would make zero workers and return holes, silently.
  if (typeof limit !== 'number' || Number.isNaN(limit)) throw new Error(`mapLimit: no limit (${limit})`);
  const results = new Array<R>(items.length);
  let next = 0;
  let failed = false;
  const workers = Array.from({ length: Math.max(1, Math.min(limit, items.length)) }, async (_, slot) => {
    while (!failed && next < items.length) {
      const i = next++;
      try {
        results[i] = await fn(items[i], slot);
      } catch (e) {
        failed = true;
        throw e;
      }
    }
  });
  const settled = await Promise.allSettled(workers);
  const rejected = settled.find((s): s is PromiseRejectedResult => s.status === 'rejected');
  if (rejected) throw rejected.reason;
  return results;
}
