/**
 * The local executor: each unit goes through the requested stages in order, several units at
 * once (bounded), and a unit whose stage result is already in the ledger under the same key is
 * not run again. A unit's failure is recorded with its reason and never stops the others.
 * `rank`/`worldSize` pick this process's share of the units, for Slurm arrays and the like.
 */
import { existsSync, readdirSync } from 'node:fs';
import { dirname, join, relative } from 'node:path';
import { hashOf } from '../../core/hashing.js';
import { mapLimit } from '../../core/map_limit.js';
import { removeTree } from '../../core/mounts.js';
import { BudgetSpent, checkBudget } from './budgets.js';
import { forOutput, spoiled, stopSignal, workMark } from './job_scope.js';
import { outLayout, WORK_KINDS } from './layout.js';
import { Ledger, type StageName } from './ledger.js';
import type { PythonVersion, Unit, UnitEnv } from './manifest.js';
import type { PipelineOptions } from './options.js';
import type { ProgressEvent, StepsEvent } from './progress.js';
import { PrerequisiteMissing, type Stage, type StageContext, type StageResult, UnitFailure } from './stage.js';

export interface UnitSummary {
  unit: Unit;
  status: 'ok' | 'failed';
  /** The stage that failed, or the last one that ran. */
  stage: StageName | null;
  reason: string | null;
  /** Stages that did work now (not answered from the ledger). */
  ran: StageName[];
}

/**
 * The unit as its stages see it: with the environment its ledger says it has. A bare manifest line
 * has none of its own; `resolve` works one out and `build` may repair it, and each records the
 * result, which from then on is the unit's env and Python (for every stage, in this run or a later
 * one). A manifest's own env passes through both unchanged.
 */
export function withLedgerEnv(unit: Unit, ledger: Ledger): Unit {
  for (const stage of ['build', 'resolve'] as const) {
    const entry = ledger.get<{ env?: UnitEnv; python?: PythonVersion }>(stage, unit.id);
    if (entry?.status === 'ok' && entry.record?.env && entry.record.python) return { ...unit, env: entry.record.env, python: entry.record.python };
  }
  return unit;
}

/** Units of this rank: a static, order-preserving split that every rank computes alike. */
export function unitsForRank<T>(units: T[], rank: number, worldSize: number): T[] {
  if (!Number.isInteger(worldSize) || worldSize < 1) throw new Error(`--world-size must be a positive integer (got ${worldSize})`);
  if (!Number.isInteger(rank) || rank < 0 || rank >= worldSize) throw new Error(`--rank must be in 0..${worldSize - 1} (got ${rank})`);
  return units.filter((_, i) => i % worldSize === rank);
}

/**
 * One unit through `stages`: what the local executor runs per unit and what a queue worker runs per
 * job. `onStage` hears each stage as it starts (progress and queue status), `onSteps` how far a
 * long stage is inside (tests or tasks done of all).
 */
export async function runUnit(
  unit: Unit,
  stages: Stage[],
  options: PipelineOptions,
  ledger: Ledger,
  log: (m: string) => void,
  onStage: (stage: StageName) => void = () => undefined,
  onSteps: (steps: StepsEvent) => void = () => undefined,
): Promise<UnitSummary> {
  return forOutput(options.out, () => unitStagesOf(unit, stages, options, ledger, log, onStage, onSteps));
}

async function unitStagesOf(
  unit: Unit,
  stages: Stage[],
  options: PipelineOptions,
  ledger: Ledger,
  log: (m: string) => void,
  onStage: (stage: StageName) => void,
  onSteps: (steps: StepsEvent) => void,
): Promise<UnitSummary> {
  const summary: UnitSummary = { unit, status: 'ok', stage: null, reason: null, ran: [] };
  const deadline = options.unitBudgetS ? Date.now() + options.unitBudgetS * 1000 : null;
  const steps = (done: number, total: number, of: 'tests' | 'tasks') => {
    if (summary.stage) onSteps({ stage: summary.stage, done, total, of });
  };
  const ctx: StageContext = { unit: withLedgerEnv(unit, ledger), options, ledger, log, deadline, steps };
  const ref = { repo: unit.repo, url: unit.location, ref: unit.commit ?? null, python: unit.python, history_of: unit.historyOf ?? null };
  for (const stage of stages) {
    // A stopping process starts no stage: the next run starts it.
    if (stopSignal().aborted) return { ...summary, status: 'failed', reason: `not run: ${String(stopSignal().reason)}` };
    summary.stage = stage.name;
    onStage(stage.name);
    let key: string;
    try {
      key = hashOf(await stage.key(ctx));
    } catch (e) {
      if (e instanceof PrerequisiteMissing) return { ...summary, status: 'failed', reason: e.message };
      // The key could not be computed (e.g. the base image is unusable): record it, retry next time.
      const reason = `${stage.name}: ${(e as Error).message}`;
      ledger.put({
        stage: stage.name,
        unit_id: unit.id,
        unit: ref,
        key: '',
        status: 'failed',
        reason,
        record: null,
        seconds: 0,
        finished_at: new Date().toISOString(),
      });
      return { ...summary, status: 'failed', reason };
    }
    const done = ledger.get(stage.name, unit.id);
    if (done && done.key === key && (done.status === 'ok' || (!options.retryFailed && !done.budget_cut))) {
      if (done.status === 'failed') return { ...summary, status: 'failed', reason: done.reason };
      if (!stage.present || (await stage.present(ctx, done.record as never))) {
        ctx.unit = withLedgerEnv(unit, ledger);
        continue;
      }
      log(`${stage.name} ${unit.id}: its result is gone from this host; running it again`);
    }
    const started = Date.now();
    const mark = workMark();
    let result: StageResult<unknown>;
    let budgetCut = false;
    try {
      checkBudget(ctx, `${stage.name} and the stages after it`);
      result = await stage.run(ctx);
    } catch (e) {
      budgetCut = e instanceof BudgetSpent;
      if (e instanceof UnitFailure) result = { status: 'failed', reason: e.message, record: null };
      else
        result = { status: 'failed', reason: `internal error in ${stage.name}: ${(e as Error).stack?.split('\n').slice(0, 3).join(' ') ?? e}`, record: null };
    }
    // Work disturbed while it ran records nothing, so the ledger holds only what an undisturbed run
    // gives: a job abandoned at its timeout or a stopping process (their containers removed under
    // them), or a stage whose containers a Docker Engine restart killed. The next run (or the job's
    // retry) runs the stage again.
    const why = spoiled(mark);
    if (why) {
      log(`${stage.name} ${unit.id}: not recorded: ${why}`);
      return { ...summary, status: 'failed', reason: `${stage.name} not recorded: ${why}` };
    }
    summary.ran.push(stage.name);
    const logFile = outLayout.log(options.out, stage.name, unit.id);
    ledger.put({
      stage: stage.name,
      unit_id: unit.id,
      unit: ref,
      key,
      status: result.status,
      reason: result.reason,
      ...(result.status === 'failed' && existsSync(logFile) ? { log: relative(options.out, logFile) } : {}),
      ...(budgetCut ? { budget_cut: true } : {}),
      record: result.record,
      seconds: Math.round((Date.now() - started) / 10) / 100,
      finished_at: new Date().toISOString(),
    });
    if (result.status === 'failed') {
      log(`${stage.name} ${unit.id}: FAILED: ${result.reason}`);
      return { ...summary, status: 'failed', reason: result.reason };
    }
    ctx.unit = withLedgerEnv(unit, ledger);
  }
  return summary;
}

/**
 * A unit's scratch folders, once its stages are over (a stage that failed or was killed may leave
 * one): its folder of each kind and the fresh ones made beside it (`<unit>-XXXXXX`, with a work
 * disk's image and copy-back folder), any disk still mounted there (kill -9) detached first.
 */
export function removeWorkFolders(out: string, unitId: string): void {
  const fresh = new RegExp(`^${unitId.replace(/[^A-Za-z0-9]/g, '\\$&')}-[A-Za-z0-9]{6}(\\.disk|\\.out)?$`);
  for (const kind of WORK_KINDS) {
    const base = outLayout.work(out, kind, unitId);
    removeTree(base);
    const parent = dirname(base);
    for (const name of existsSync(parent) ? readdirSync(parent) : []) if (fresh.test(name)) removeTree(join(parent, name));
  }
}

/**
 * Runs the stages for `units` (already this rank's share), telling `onEvent` each stage and unit
 * as it goes; `afterUnit` (the image budget) hears each unit whose stages are over.
 */
export async function runStages(
  units: Unit[],
  stages: Stage[],
  options: PipelineOptions,
  log: (m: string) => void,
  onEvent: (e: ProgressEvent) => void = () => undefined,
  afterUnit: (unit: Unit) => Promise<void> = async () => undefined,
): Promise<UnitSummary[]> {
  const ledger = new Ledger(options.out);
  return mapLimit(units, options.concurrency, async (unit, slot) => {
    // A stopping process starts no unit.
    if (stopSignal().aborted) return { unit, status: 'failed', stage: null, reason: `not started: ${String(stopSignal().reason)}`, ran: [] };
    const started = Date.now();
    const s = await runUnit(
      unit,
      stages,
      options,
      ledger,
      log,
      (stage) => onEvent({ event: 'stage', unit_id: unit.id, stage, slot }),
      (steps) => onEvent({ event: 'steps', unit_id: unit.id, slot, ...steps }),
    );
    removeWorkFolders(options.out, unit.id);
    if (!stopSignal().aborted) await afterUnit(unit);
    onEvent({ event: 'unit', unit_id: unit.id, status: s.status, stage: s.stage, reason: s.reason, seconds: (Date.now() - started) / 1000 });
    return s;
  });
}
