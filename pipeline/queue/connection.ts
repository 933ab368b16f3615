/**
 * The Redis a queue lives on, from `--redis redis://[user:password@]host[:port][/db]` (rediss:
 * for TLS). `maxRetriesPerRequest: null` is what BullMQ needs of a worker's connection: a command
 * waits for Redis to come back (a restart) instead of failing the job that sent it.
 */
import type { ConnectionOptions } from 'bullmq';

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
