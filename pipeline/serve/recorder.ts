/**
 * Served episodes as world-model data: each finished episode's trajectory row (the forage stage's
 * `trajectories` schema, checked before it is written) goes to a file of its own under
 * `OUT/served/trajectories/`, written beside its name and renamed into place, so a server killed
 * mid-write leaves whole rows only.
 */
import { writeFileAtomic } from '../../core/atomic.js';
import { validateRecord } from '../../schemas/schema.js';
import { type TrajectoryRecord, trajectoriesSchema } from '../../schemas/trajectories.js';
import { outLayout } from '../runtime/layout.js';

/** Writes the row of episode `episodeId`; returns the file. */
export function recordEpisode(out: string, episodeId: string, row: TrajectoryRecord): string {
  validateRecord(trajectoriesSchema, row);
  const file = outLayout.served(out, episodeId.replace(/[^A-Za-z0-9._-]/g, '_'));
  writeFileAtomic(file, `${JSON.stringify(row)}\n`);
  return file;
}
