/**
 * The Redis a queue lives on, from `--redis redis://[user:password@]host[:port][/db]` (rediss:
 * for TLS). `maxRetriesPerRequest: null` is what BullMQ needs of a worker's connection: a command
 * waits for Redis to come back (a restart) instead of failing the job that sent it.
 */
import { connect } from 'node:net';
import type { ConnectionOptions } from 'bullmq';
import { EnvironmentUnavailable } from '../run.js';

export class RedisUrlInvalid extends Error {}

/** The queue every command uses unless `--queue` names another (several runs on one Redis). */
export const DEFAULT_QUEUE = 'worldline';

export function redisConnection(url: string): ConnectionOptions {
  let u: URL;
  try {
    u = new URL(url);
  } catch {
    throw new RedisUrlInvalid(`--redis ${url} is not a URL (redis://host:port[/db])`);
  }
  if (u.protocol !== 'redis:' && u.protocol !== 'rediss:') throw new RedisUrlInvalid(`--redis ${url}: the scheme must be redis:// or rediss://`);
  const db = u.pathname.length > 1 ? Number(u.pathname.slice(1)) : 0;
  if (!Number.isInteger(db) || db < 0) throw new RedisUrlInvalid(`--redis ${url}: the database must be a number (got ${u.pathname.slice(1)})`);
  return {
    host: u.hostname,
    port: u.port ? Number(u.port) : 6379,
    db,
    username: u.username ? decodeURIComponent(u.username) : undefined,
    password: u.password ? decodeURIComponent(u.password) : undefined,
    tls: u.protocol === 'rediss:' ? {} : undefined,
    maxRetriesPerRequest: null,
  };
}

/**
 * Redis answers at `url` (a TCP connection within `timeoutMs`), or EnvironmentUnavailable says so.
 * Checked before a command uses the queue: a queue connection waits for Redis without end (what a
 * worker needs through a restart), so an unreachable one would hang a command instead of failing it.
 */
export function requireRedis(url: string, timeoutMs = 5000): Promise<void> {
  const { host, port } = redisConnection(url) as { host: string; port: number };
  return new Promise((resolve, reject) => {
    const socket = connect({ host, port });
    const fail = (why: string) => {
      socket.destroy();
      reject(new EnvironmentUnavailable(`Redis does not answer at ${host}:${port} (${why}); start it (scripts/setup-redis.sh) or name another with --redis`));
    };
    socket.setTimeout(timeoutMs, () => fail(`no answer in ${timeoutMs / 1000} s`));
    socket.once('error', (e: NodeJS.ErrnoException) => fail(e.code ?? e.message));
    socket.once('connect', () => {
      socket.destroy();
      resolve();
    });
  });
}
