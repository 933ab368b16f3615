/**
 * The host's one download cache for the index, by content: each locked file lies once at
 * `wheels/sha256/<hash>/<filename>` under the index cache, fetched on the host (with this host's
 * certificate bundle and proxy, proxy.ts) by whichever process first needs it while others wait on
 * its lock, checked against the lock's sha256 as it streams, bounded in bytes and time, retried,
 * and renamed into place only when whole. Builds take the files from here (a folder of hard links mounted read-only:
 * nothing is copied into a build context), so a wheel is downloaded once per host.
 */
import { createHash } from 'node:crypto';
import { createReadStream, createWriteStream, existsSync, mkdirSync, readFileSync, renameSync, rmSync, statSync } from 'node:fs';
import { get as httpGet, type IncomingMessage } from 'node:http';
import { get as httpsGet } from 'node:https';
import { dirname, join } from 'node:path';
import type { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { tempPath } from '../../../core/atomic.js';
import { withLock } from '../../../core/lock.js';
import { mapLimit } from '../../../core/map_limit.js';
import { indexCacheDir } from '../../runtime/layout.js';
import type { LockedDist } from '../../runtime/manifest.js';
import { throughProxy } from './proxy.js';

/** No one file may be larger, or take longer, or stall longer; then it is tried again, at most TRIES times. */
const MAX_BYTES = 8 * 2 ** 30;
const FILE_TIMEOUT_MS = 30 * 60_000;
const STALL_MS = 60_000;
const TRIES = 3;
const REDIRECTS = 5;
/** Files fetched at once: a torch lock is some twenty files of 0.1-1 GB, and one stream seldom fills the link. */
const PARALLEL = 4;

/** Where a locked file lies in the cache. */
export function cachedPath(dist: LockedDist): string {
  return join(indexCacheDir(), 'wheels', 'sha256', dist.sha256, dist.filename);
}

/** How a download reaches and trusts its server: the host's certificate bundle and proxy. */
interface Route {
  ca: Buffer | undefined;
  proxy: string | null;
}

/** A stream of `url`'s bytes: a file URL or path read, an HTTP(S) one fetched along `route`, redirects followed. */
async function open(url: string, route: Route, signal: AbortSignal, accept?: string, redirects = REDIRECTS): Promise<Readable> {
  if (url.startsWith('file:')) return createReadStream(fileURLToPath(url));
  if (!/^https?:/i.test(url)) return createReadStream(url);
  const https = url.startsWith('https:');
  const via = route.proxy ? await throughProxy(route.proxy, url, route.ca, signal, STALL_MS) : null;
  const res = await new Promise<IncomingMessage>((resolvePromise, reject) => {
    const options = { ca: route.ca, signal, timeout: STALL_MS, ...via, headers: { ...via?.headers, ...(accept ? { accept } : {}) } };
    const req = via?.path ? httpGet(options, resolvePromise) : https ? httpsGet(url, options, resolvePromise) : httpGet(url, options, resolvePromise);
    req.on('timeout', () => req.destroy(new Error(`no answer from ${new URL(url).host} for ${STALL_MS / 1000} s`)));
    req.on('error', reject);
  });
  const status = res.statusCode ?? 0;
  if (status >= 300 && status < 400 && res.headers.location && redirects > 0) {
    res.resume();
    return open(new URL(res.headers.location, url).href, route, signal, accept, redirects - 1);
  }
  if (status !== 200) {
    res.resume();
    throw new Error(`HTTP ${status} for ${url}`);
  }
  return res;
}

/** How large an index page may be: a project's page lists every file of every release. */
const MAX_PAGE_BYTES = 64 << 20;

/**
 * An index's page (`accept`: the representation asked for, as PEP 691 negotiates it), fetched with
 * this host's trust, bounded in bytes and time, tried TRIES times.
 */
export async function fetchPage(url: string, accept: string, trust: { cert: string | null; proxy: string | null }): Promise<string> {
  const route = { ca: trust.cert ? readFileSync(trust.cert) : undefined, proxy: trust.proxy };
  for (let attempt = 1; ; attempt++) {
    try {
      const chunks: Buffer[] = [];
      let bytes = 0;
      for await (const chunk of await open(url, route, AbortSignal.timeout(STALL_MS * 2), accept)) {
        bytes += (chunk as Buffer).length;
        if (bytes > MAX_PAGE_BYTES) throw new Error(`${url} is larger than ${MAX_PAGE_BYTES} bytes`);
        chunks.push(chunk as Buffer);
      }
      return Buffer.concat(chunks).toString('utf8');
    } catch (e) {
      if (attempt >= TRIES || /^HTTP 4\d\d /.test((e as Error).message)) throw new Error(causeOf(e));
      await sleep(1000 * 2 ** attempt);
    }
  }
}

/** One try: `url` into `to`, hashed and bounded as it streams. */
async function fetchOnce(dist: LockedDist, to: string, route: Route): Promise<void> {
  const signal = AbortSignal.timeout(FILE_TIMEOUT_MS);
  const source = await open(dist.url, route, signal);
  const hash = createHash('sha256');
  let bytes = 0;
  source.on('data', (chunk: Buffer) => {
    hash.update(chunk);
    bytes += chunk.length;
    if (bytes > MAX_BYTES) source.destroy(new Error(`${dist.filename} is larger than ${MAX_BYTES} bytes`));
  });
  await pipeline(source, createWriteStream(to), { signal });
  const got = hash.digest('hex');
  if (got !== dist.sha256) throw new Error(`${dist.filename}: sha256 ${got}, the lock says ${dist.sha256}`);
}

/** The innermost cause of a fetch error (a certificate, a refused connection), as Node names it. */
function causeOf(e: unknown): string {
  const err = e as Error & { code?: string; cause?: unknown };
  if (err.cause) return causeOf(err.cause);
  return err.code && !err.message.includes(err.code) ? `${err.code}: ${err.message}` : err.message;
}

/**
 * Every file of `lock` in the cache: the paths, how many files (and bytes) were downloaded now and
 * how many were there already. Throws, naming the file and the first cause, once a file fails all
 * its tries.
 */
export async function fetchLocked(
  lock: LockedDist[],
  trust: { cert: string | null; proxy: string | null },
): Promise<{ paths: string[]; downloaded: number; downloadedBytes: number; cached: number }> {
  const route = { ca: trust.cert ? readFileSync(trust.cert) : undefined, proxy: trust.proxy };
  for (const dist of lock) {
    if (!/^[0-9a-f]{64}$/.test(dist.sha256) || dist.filename.includes('/')) throw new Error(`not a lockable file: ${JSON.stringify(dist)}`);
  }
  // Bytes of each file this call downloaded (0: the cache had it, or another process fetched it meanwhile).
  const fetched = await mapLimit(lock, PARALLEL, async (dist) => {
    const path = cachedPath(dist);
    if (existsSync(path)) return 0;
    return withLock(`${dirname(path)}.lock`, async () => {
      if (existsSync(path)) return 0;
      mkdirSync(dirname(path), { recursive: true });
      for (let attempt = 1; ; attempt++) {
        const tmp = tempPath(path);
        try {
          await fetchOnce(dist, tmp, route);
          renameSync(tmp, path);
          return statSync(path).size;
        } catch (e) {
          rmSync(tmp, { force: true });
          // A full disk stays full: no second try, and the reason says where.
          if ((e as NodeJS.ErrnoException).code === 'ENOSPC')
            throw new Error(`could not download ${dist.filename}: the index cache's disk (${indexCacheDir()}) is full; free space there and run again`);
          if (attempt >= TRIES) throw new Error(`could not download ${dist.filename} (${TRIES} tries): ${causeOf(e)}`);
          await sleep(1000 * 2 ** attempt);
        }
      }
    });
  });
  const downloaded = fetched.filter((b) => b > 0).length;
  return { paths: lock.map(cachedPath), downloaded, downloadedBytes: fetched.reduce((a, b) => a + b, 0), cached: lock.length - downloaded };
}
