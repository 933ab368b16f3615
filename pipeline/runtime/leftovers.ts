/**
 * Temporary files a killed writer left in an output folder: a ledger entry, a part file or a piece
 * of forage progress is written beside its name and renamed into place (core/atomic.ts), and a
 * process killed between the two leaves the temporary file, which names its writer. Those of dead
 * processes of this host are removed when a run or worker starts and by `gc`; a live writer's (a
 * worker beside this one on a shared folder) and another host's are left alone. Work folders,
 * dataset versions and containers have removers of their own (executor, dataset writer, engine).
 */
import { type Dirent, readdirSync, rmSync } from 'node:fs';
import { hostname } from 'node:os';
import { join } from 'node:path';
import { tempWriter } from '../../core/atomic.js';
import { alive } from '../../core/lock.js';
import { outLayout } from './layout.js';

/** Folders of an output folder that hold renamed-into-place files, and how deep. */
const WRITTEN = [
  [outLayout.ledger, 2],
  [outLayout.partsRoot, 2],
  [outLayout.progressRoot, 3],
] as const;

/** Removes the temporary files dead writers of this host left under `out`; returns how many. */
export function removeDeadTemps(out: string): number {
  const host = hostname();
  let removed = 0;
  const walk = (dir: string, depth: number) => {
    let entries: Dirent[];
    try {
      entries = readdirSync(dir, { withFileTypes: true });
    } catch {
      return;
    }
    for (const e of entries) {
      const path = join(dir, e.name);
      if (e.isDirectory()) {
        if (depth > 1) walk(path, depth - 1);
        continue;
      }
      const writer = tempWriter(e.name);
      if (writer && writer.host === host && !alive(writer.pid)) {
        rmSync(path, { force: true });
        removed += 1;
      }
    }
  };
  for (const [folder, depth] of WRITTEN) walk(folder(out), depth);
  return removed;
}
