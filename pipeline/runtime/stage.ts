/**
 * The stage contract: what every per-unit stage looks like to the executor. A stage is keyed by
 * everything its result depends on (the ledger skips it when the key is unchanged), runs for one
 * unit, and returns its record for the ledger; it reads earlier stages' records through
 * `requireRecord`, typed by the map in records.ts.
 */
import type { Ledger, StageName } from './ledger.js';
import type { Unit } from './manifest.js';
import type { PipelineOptions } from './options.js';
import type { StageRecords } from './records.js';

export interface StageContext {
  unit: Unit;
  options: PipelineOptions;
  ledger: Ledger;
  log: (message: string) => void;
  /** When the unit's `--unit-budget` runs out (ms since the epoch), or null without one. */
  deadline: number | null;
  /** How far a long stage is inside: `done` of `total` tests or tasks (for progress displays). */
  steps?: (done: number, total: number, of: 'tests' | 'tasks') => void;
}

export interface StageResult<R> {
  status: 'ok' | 'failed';
  reason: string | null;
  record: R | null;
}

export interface Stage<S extends StageName = StageName> {
  name: S;
  /** Everything this unit's result depends on; its hash keys the ledger entry. */
  key(ctx: StageContext): Promise<unknown> | unknown;
  run(ctx: StageContext): Promise<StageResult<StageRecords[S]>>;
  /**
   * Whether a result the ledger holds is still usable on this host (build: its image was not
   * removed by --image-budget or gc, or built on another host); if not, the stage runs again.
   */
  present?(ctx: StageContext, record: StageRecords[S]): Promise<boolean>;
}

export const ok = <R>(record: R): StageResult<R> => ({ status: 'ok', reason: null, record });
export const failed = <R>(reason: string, record: R | null = null): StageResult<R> => ({ status: 'failed', reason, record });

/** A prerequisite stage's record, or a clear error when it has not succeeded. */
export function requireRecord<S extends StageName>(ctx: StageContext, stage: S): StageRecords[S] {
  const entry = ctx.ledger.get<StageRecords[S]>(stage, ctx.unit.id);
  if (!entry) throw new PrerequisiteMissing(`${stage} has not run for this unit; run \`worldline ${stage}\` first`);
  if (entry.status !== 'ok' || !entry.record) throw new PrerequisiteMissing(`${stage} failed for this unit: ${entry.reason}`);
  return entry.record;
}

export class PrerequisiteMissing extends Error {}

/**
 * Thrown from deep inside a stage when the unit cannot go on for a reason of its own (a refused
 * result file, say): the executor records it as the stage's failure reason, not as an internal error.
 */
export class UnitFailure extends Error {}
