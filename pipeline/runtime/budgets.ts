/**
 * Wall budgets earned from measurements, not from products of options: what a test did when it
 * last ran (validate timed it on the unit's state, the mutant check on a task's state, or saw it
 * time out) bounds how long the next run of it may take, times a stated multiplier; and the
 * unit's own `--unit-budget`, after which its remaining work is skipped with the reason recorded.
 * The unit's budget is checked between pieces of work (a stage, the mutant check, a task): a
 * piece started runs to its end inside its own earned budget, so nothing half-done is kept.
 */
import { existsSync } from 'node:fs';
import { readLines } from '../../core/jsonl.js';
import type { TestRecord } from '../../schemas/tests.js';
import { outLayout } from './layout.js';
import type { ValidateRecord } from './records.js';
import { type StageContext, UnitFailure } from './stage.js';

/** A measured run may take this many times its measured seconds before it is stopped. */
export const BUDGET_MULTIPLIER = 3;
/** Seconds every budget has on top (an interpreter start, a slow shared machine). */
const BUDGET_FLOOR_S = 5;

/** The seconds a run measured at `measuredS` (under `slowdown`, e.g. the tracer's) may take. */
export function earnedS(measuredS: number, slowdown = 1): number {
  return Math.ceil(BUDGET_FLOOR_S + measuredS * slowdown * BUDGET_MULTIPLIER);
}

/** What one test did when it was last run on a state: its seconds, or that it hit its timeout. */
export interface Measured {
  seconds: number;
  timedOut: boolean;
}

/**
 * What a test that failed on a task's state did there (its result in that run, absent when the
 * killed run never reached it): pytest-timeout's failure says "Timeout". A task's traces give it
 * this budget on that state (fix_traces.ts): a test that hung there is traced up to that timeout,
 * not for the budget a never-measured test earns.
 */
export function measuredFailing(t: { outcome: string; message: string | null; duration: number } | undefined, testTimeoutS: number): Measured {
  const timedOut = !t || t.outcome === 'missing' || /Timeout/.test(t.message ?? '') || t.duration >= testTimeoutS;
  return { seconds: t?.duration ?? testTimeoutS, timedOut };
}

/** Validate's first-run seconds of each of the unit's tests, by node id. */
export function validatedDurations(out: string, unitId: string): Map<string, Measured> {
  const byId = new Map<string, Measured>();
  const part = outLayout.part(out, 'tests', unitId);
  if (!existsSync(part)) return byId;
  for (const line of readLines(part)) {
    const t = JSON.parse(line) as TestRecord;
    byId.set(t.node_id, { seconds: t.duration_seconds, timedOut: false });
  }
  return byId;
}

/**
 * pytest's start-up and collection in one container run, as validate measured it: a run's wall
 * (its stage seconds over its runs) minus its tests' durations. Every pytest run pays it first.
 */
export function measuredStartupS(ctx: StageContext): number {
  const v = ctx.ledger.get<ValidateRecord>('validate', ctx.unit.id);
  if (v?.status !== 'ok' || !v.record) return BUDGET_FLOOR_S;
  const tests = [...validatedDurations(ctx.options.out, ctx.unit.id).values()].reduce((s, m) => s + m.seconds, 0);
  return Math.max(0, v.seconds / Math.max(1, v.record.runs) - tests);
}

/** Raised where a unit's `--unit-budget` is spent: the executor records it as a cut, not a failure to keep. */
export class BudgetSpent extends UnitFailure {}

/** Throws BudgetSpent, naming `next` (the work not started), when the unit's budget is spent. */
export function checkBudget(ctx: StageContext, next: string): void {
  if (ctx.deadline !== null && Date.now() >= ctx.deadline)
    throw new BudgetSpent(`unit budget of ${ctx.options.unitBudgetS} s spent; skipped ${next} (rerun with a larger --unit-budget to continue)`);
}
