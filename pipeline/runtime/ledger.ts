/**
 * Completion markers, one file per (stage, unit): written last, atomically, after the stage's
 * other outputs, so a unit whose marker exists with the current config hash is done and a
 * rerun skips it (datatrove's completion markers, keyed by content rather than by rank).
 */
import { readdirSync, readFileSync } from 'node:fs';
import { writeFileAtomic } from '../../core/atomic.js';
import { outLayout } from './layout.js';

export const STAGES = ['clone', 'resolve', 'build', 'validate', 'trace', 'describe', 'forage'] as const;
export type StageName = (typeof STAGES)[number];

/** Enough of the manifest line to describe a unit without the manifest. */
export interface UnitRef {
  repo: string;
  url: string;
  ref: string | null;
  python: string;
  history_of?: string | null;
}

export interface LedgerEntry<R = unknown> {
  stage: StageName;
  unit_id: string;
  unit: UnitRef;
  /** Hash of everything the result depends on. */
  key: string;
  status: 'ok' | 'failed';
  reason: string | null;
  /** A failed stage's log, relative to the output folder (where the whole story is), when it wrote one. */
  log?: string;
  /** The unit's --unit-budget ran out in or before this stage: a rerun continues it, --retry-failed or not. */
  budget_cut?: boolean;
  /** The stage's result for this unit (small; bulky outputs live in part files). */
  record: R | null;
  /** Timing, kept apart from content so it never enters a content hash. */
  seconds: number;
  finished_at: string;
}

export class Ledger {
  constructor(readonly out: string) {}

  private path(stage: StageName, unitId: string): string {
    return outLayout.ledgerEntry(this.out, stage, unitId);
  }

  get<R>(stage: StageName, unitId: string): LedgerEntry<R> | null {
    try {
      return JSON.parse(readFileSync(this.path(stage, unitId), 'utf8')) as LedgerEntry<R>;
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code === 'ENOENT') return null;
      throw new Error(`ledger entry ${this.path(stage, unitId)} is unreadable: ${(e as Error).message}`);
    }
  }

  put(entry: LedgerEntry): void {
    writeFileAtomic(this.path(entry.stage, entry.unit_id), JSON.stringify(entry, null, 1) + '\n');
  }

  /** Every entry of a stage, in unit-id order so outputs built from them are deterministic. */
  all<R>(stage: StageName): LedgerEntry<R>[] {
    let names: string[];
    try {
      names = readdirSync(outLayout.ledgerDir(this.out, stage));
    } catch {
      return [];
    }
    return names
      .filter((n) => n.endsWith('.json'))
      .sort()
      .map((n) => this.get<R>(stage, n.slice(0, -'.json'.length)))
      .filter((e): e is LedgerEntry<R> => e !== null);
  }
}
