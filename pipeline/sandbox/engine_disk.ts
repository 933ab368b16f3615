/**
 * Room on the Docker Engine's disk before a build writes layers there: a torch stack unpacks to
 * several GB, and an engine whose disk fills mid-layer fails the build with a message about a
 * layer (and can leave the engine itself short). So a build first compares what it will write
 * (about UNPACK times the bytes of the wheels it installs that no image on this host holds yet,
 * plus WORLDLINE_DISK_RESERVE kept free for everything else) with what the disk has free, and
 * stops before its first layer when it is short, saying so.
 */
import { existsSync, statfsSync } from 'node:fs';
import { docker } from './engine.js';

/** Installed bytes per byte of wheel: wheels are zip files, and torch's 0.2 GB unpack to 0.7-0.8 GB. */
const UNPACK = 4;
/** Kept free on the engine's disk beyond a build's own need, unless WORLDLINE_DISK_RESERVE says otherwise. */
const DEFAULT_RESERVE = 2e9;

const GB = (n: number) => `${(n / 1e9).toFixed(1)} GB`;

/** WORLDLINE_DISK_RESERVE in bytes (a number of bytes, or with K, M, G, T as powers of 1000). */
export function diskReserve(value = process.env.WORLDLINE_DISK_RESERVE): number {
  if (value === undefined || value === '') return DEFAULT_RESERVE;
  const m = /^(\d+(?:\.\d+)?)\s*([kmgt]?)b?$/i.exec(value.trim());
  if (!m) throw new Error(`WORLDLINE_DISK_RESERVE takes a size such as 2G or 500M (got ${JSON.stringify(value)})`);
  return Number(m[1]) * 1000 ** ('kmgt'.indexOf(m[2].toLowerCase()) + 1);
}

/** What a build that installs `wheelBytes` of new wheels needs free on the engine's disk. */
export const buildNeeds = (wheelBytes: number, reserve = diskReserve()): number => UNPACK * wheelBytes + reserve;

/** Why a build that needs `need` bytes must not start on a disk with `free` bytes at `path`, or null. */
export function diskShort(need: number, free: number, path: string): string | null {
  if (free >= need) return null;
  return (
    `disk short: this build needs about ${GB(need)} free on the Docker Engine's disk (${path}), which has ${GB(free)}; ` +
    'the build was not started. Free space (worldline gc, --image-budget, docker image prune, or a smaller WORLDLINE_DISK_RESERVE) and run again: the unit continues'
  );
}

/**
 * Free bytes on the engine's data root, or null when this process cannot see it (an engine on
 * another host, or a data root outside this file system view): then no check is made.
 */
export async function engineDiskFree(): Promise<{ path: string; free: number } | null> {
  const host = process.env.DOCKER_HOST;
  if (host && !host.startsWith('unix://')) return null;
  const info = (await docker().info()) as { DockerRootDir?: string };
  const path = info.DockerRootDir;
  if (!path || !existsSync(path)) return null;
  const fs = statfsSync(path);
  return { path, free: fs.bavail * fs.bsize };
}
