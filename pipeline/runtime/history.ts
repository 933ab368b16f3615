/**
 * `--commits K`: besides the manifest's commit, trace up to K older commits of each repository,
 * sampled evenly from its first-parent history, as CWM did (it tried up to 40 commits and kept at
 * most 4 per repository). Candidates run through the same stages one at a time until K succeed;
 * a candidate that fails is recorded like any unit but does not count against the run.
 */
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { git } from '../../core/git.js';
import { hashOf } from '../../core/hashing.js';
import { runStages, type UnitSummary } from './executor.js';
import { stopSignal } from './job_scope.js';
import { mirrorPath } from './layout.js';
import { Ledger } from './ledger.js';
import type { Unit } from './manifest.js';
import type { PipelineOptions } from './options.js';
import type { CloneRecord } from './records.js';
import type { Stage } from './stage.js';

/** Evenly spaced picks from `items`, newest first, at most `n`. */
export function evenSample<T>(items: T[], n: number): T[] {
  if (items.length <= n) return items;
  return Array.from({ length: n }, (_, j) => items[Math.floor((j * items.length) / n)]);
}

export async function historyCandidates(unit: Unit, head: string, tries: number): Promise<Unit[]> {
  const mirror = mirrorPath(unit);
  if (!existsSync(join(mirror, 'HEAD'))) return [];
  const shas = (await git(['--git-dir', mirror, 'rev-list', '--first-parent', head])).trim().split('\n').filter(Boolean).slice(1);
  return evenSample(shas, tries).map((sha) => ({
    ...unit,
    id: `${unit.slug}-${hashOf({ location: unit.location, commit: sha, python: unit.python }, 8)}`,
    commit: sha,
    historyOf: unit.id,
  }));
}

export async function runHistory(heads: UnitSummary[], stages: Stage[], options: PipelineOptions, log: (m: string) => void): Promise<UnitSummary[]> {
  const ledger = new Ledger(options.out);
  const tries = options.historyTries > 0 ? options.historyTries : Math.min(40, 10 * options.historyCommits);
  const all: UnitSummary[] = [];
  for (const head of heads.filter((h) => h.status === 'ok')) {
    // A stopped run starts no more history (its caller says it was stopped).
    if (stopSignal().aborted) break;
    const clone = ledger.get<CloneRecord>('clone', head.unit.id);
    if (!clone?.record) continue;
    let kept = 0;
    for (const candidate of await historyCandidates(head.unit, clone.record.commit, tries)) {
      if (kept >= options.historyCommits) break;
      const [summary] = await runStages([candidate], stages, options, log);
      all.push(summary);
      if (summary.status === 'ok') kept += 1;
    }
    log(`history ${head.unit.id}: ${kept} older commit(s) kept of ${options.historyCommits} wanted`);
  }
  return all;
}
