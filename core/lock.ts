/**
 * A cross-process lock on a folder name: mkdir is atomic. A lock whose owner died is taken over,
 * so a killed run never wedges the next one. The owner is written as host:pid: on a folder that
 * several hosts share only the owner's host can tell that it died, so other hosts wait.
 */
import { mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { hostname } from 'node:os';
import { dirname, join } from 'node:path';
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

export async function withLock<T>(path: string, fn: () => Promise<T>): Promise<T> {
  mkdirSync(dirname(path), { recursive: true });
  for (;;) {
    try {
      mkdirSync(path);
      writeFileSync(join(path, 'pid'), `${hostname()}:${process.pid}`);
      break;
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== 'EEXIST') throw e;
      let owner = NaN;
      try {
        const [host, pid] = readFileSync(join(path, 'pid'), 'utf8').split(':');
        if (host === hostname()) owner = Number(pid);
      } catch {
        // The owner is between mkdir and writing its pid; wait for it.
      }
      if (Number.isFinite(owner) && owner > 0 && !alive(owner)) rmSync(path, { recursive: true, force: true });
      else await sleep(200);
    }
  }
  try {
    return await fn();
  } finally {
    rmSync(path, { recursive: true, force: true });
  }
}
