/**
 * A cross-process lock on a folder name. A claim folder holding its owner (host:pid) is renamed to
 * the lock's name in one step: rename onto a folder that holds an owner fails, so the lock is never
 * seen without its owner (a lock made by mkdir and then written could be, by a process killed
 * between the two or a full disk, and would wedge every later run). A lock whose owner died is
 * taken over, so a killed run never wedges the next one. On a folder several hosts share only the
 * owner's host can tell that it died, so other hosts wait.
 */
import { mkdirSync, readdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { hostname } from 'node:os';
import { basename, dirname, join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';

/** Whether a process of this machine is alive (EPERM: alive, someone else's). */
export function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/** The owner a lock (or claim) folder names, when it is a process of this host; null otherwise. */
function localOwner(path: string): number | null {
  try {
    const [host, pid] = readFileSync(join(path, 'pid'), 'utf8').split(':');
    return host === hostname() && Number(pid) > 0 ? Number(pid) : null;
  } catch {
    return null;
  }
}

/** Claims beside `path` that processes of this host left when they died between making and renaming them. */
function removeDeadClaims(path: string): void {
  const prefix = `${basename(path)}.claim-${hostname()}-`;
  for (const name of readdirSync(dirname(path))) {
    if (!name.startsWith(prefix)) continue;
    const pid = Number(name.slice(prefix.length).split('-')[0]);
    if (pid > 0 && !alive(pid)) rmSync(join(dirname(path), name), { recursive: true, force: true });
  }
}

export async function withLock<T>(path: string, fn: () => Promise<T>): Promise<T> {
  mkdirSync(dirname(path), { recursive: true });
  removeDeadClaims(path);
  const claim = `${path}.claim-${hostname()}-${process.pid}-${Math.random().toString(36).slice(2, 10)}`;
  for (;;) {
    try {
      mkdirSync(claim);
      writeFileSync(join(claim, 'pid'), `${hostname()}:${process.pid}`);
      renameSync(claim, path);
      break;
    } catch (e) {
      rmSync(claim, { recursive: true, force: true });
      const code = (e as NodeJS.ErrnoException).code;
      if (code !== 'ENOTEMPTY' && code !== 'EEXIST') throw e;
      const owner = localOwner(path);
      if (owner !== null && !alive(owner)) rmSync(path, { recursive: true, force: true });
      else await sleep(200);
    }
  }
  try {
    return await fn();
  } finally {
    release(path, claim);
  }
}

/**
 * Renamed away first, whole, then removed: removed in place, the lock folder would stand empty for
 * a moment, and a waiter's claim renamed onto it then would be removed with it (or fail the
 * removal). A kill between the two leaves a claim of a dead process, which the next withLock removes.
 */
function release(path: string, claim: string): void {
  try {
    renameSync(path, claim);
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') return;
    throw e;
  }
  rmSync(claim, { recursive: true, force: true });
}
