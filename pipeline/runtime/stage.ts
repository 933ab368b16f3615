/** What every per-unit stage looks like to the executor. */
import type { Ledger, StageName } from './ledger.js';
import type { Unit } from './manifest.js';
import type { PipelineOptions } from './options.js';

export interface StageContext {
  unit: Unit;
  options: PipelineOptions;
  ledger: Ledger;
  log: (message: string) => void;
}

export interface StageResult<R> {
  status: 'ok' | 'failed';
  reason: string | null;
  record: R | null;
}

export interface Stage<R = unknown> {
  name: StageName;
  /** Everything this unit's result depends on; its hash keys the ledger entry. */
  key(ctx: StageContext): Promise<unknown> | unknown;
  run(ctx: StageContext): Promise<StageResult<R>>;
}

export const ok = <R>(record: R): StageResult<R> => ({ status: 'ok', reason: null, record });
export const failed = <R>(reason: string, record: R | null = null): StageResult<R> => ({ status: 'failed', reason, record });

/** A prerequisite stage's record, or a clear error when it has not succeeded. */
export function requireRecord<R>(ctx: StageContext, stage: StageName): R {
  const entry = ctx.ledger.get<R>(stage, ctx.unit.id);
  if (!entry) throw new PrerequisiteMissing(`${stage} has not run for this unit; run \`worldline ${stage}\` first`);
  if (entry.status !== 'ok' || !entry.record) throw new PrerequisiteMissing(`${stage} failed for this unit: ${entry.reason}`);
  return entry.record;
}

export class PrerequisiteMissing extends Error {}
