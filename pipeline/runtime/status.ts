/** `worldline status`: what an output folder holds, per stage, with every failure's reason. */
import { existsSync, readFileSync } from 'node:fs';
import { basename, dirname } from 'node:path';
import { writeFileAtomic } from '../../core/atomic.js';
import { table } from '../../core/table.js';
import { outLayout } from './layout.js';
import { Ledger, STAGES, type StageName } from './ledger.js';
import type { ManifestError } from './manifest.js';
import type { ForageRecord } from './records.js';

export interface StatusReport {
  out: string;
  stages: Record<StageName, { ok: number; failed: number }>;
  failures: { stage: StageName; unit_id: string; repo: string; reason: string | null }[];
  manifest_errors: ManifestError[];
  dataset: { configs: Record<string, { rows: number; shards: number }> } | null;
  /** Forage's wall seconds by phase over every unit done, and the tasks they made. */
  forage_cost: { tasks: number; seconds_by_phase: Record<string, number> };
}

const errorsPath = outLayout.manifestErrors;

export function recordManifestErrors(out: string, errors: ManifestError[]): void {
  writeFileAtomic(errorsPath(out), JSON.stringify(errors, null, 1) + '\n');
}

export function readStatus(out: string): StatusReport {
  const ledger = new Ledger(out);
  const stages = {} as StatusReport['stages'];
  const failures: StatusReport['failures'] = [];
  for (const stage of STAGES) {
    const entries = ledger.all(stage);
    stages[stage] = { ok: entries.filter((e) => e.status === 'ok').length, failed: entries.filter((e) => e.status === 'failed').length };
    for (const e of entries) if (e.status === 'failed') failures.push({ stage, unit_id: e.unit_id, repo: e.unit.repo, reason: e.reason });
  }
  const manifest_errors = existsSync(errorsPath(out)) ? (JSON.parse(readFileSync(errorsPath(out), 'utf8')) as ManifestError[]) : [];
  const manifestFile = outLayout.datasetManifest(out);
  const dataset = existsSync(manifestFile) ? (JSON.parse(readFileSync(manifestFile, 'utf8')) as StatusReport['dataset']) : null;
  const forage_cost: StatusReport['forage_cost'] = { tasks: 0, seconds_by_phase: {} };
  for (const e of ledger.all<ForageRecord>('forage')) {
    if (e.status !== 'ok' || !e.record?.seconds_by_phase) continue;
    forage_cost.tasks += e.record.task_seconds?.length ?? 0;
    for (const [phase, s] of Object.entries(e.record.seconds_by_phase)) forage_cost.seconds_by_phase[phase] = (forage_cost.seconds_by_phase[phase] ?? 0) + s;
  }
  return { out, stages, failures, manifest_errors, dataset, forage_cost };
}

export function formatStatus(s: StatusReport): string {
  const parts = [table([['stage', 'ok', 'failed'], ...STAGES.map((st) => [st, s.stages[st].ok, s.stages[st].failed])])];
  if (s.dataset) {
    parts.push('', table([['config', 'rows', 'shards'], ...Object.entries(s.dataset.configs).map(([c, v]) => [c, v.rows, v.shards])]));
  }
  const phases = Object.entries(s.forage_cost.seconds_by_phase);
  if (phases.length) {
    const total = phases.reduce((t, [, v]) => t + v, 0);
    const perTask = (v: number) => (s.forage_cost.tasks ? (v / s.forage_cost.tasks).toFixed(2) : 'n/a');
    parts.push(
      '',
      `forage cost (${s.forage_cost.tasks} tasks):`,
      table([['phase', 'seconds', 'per task'], ...phases.map(([p, v]) => [p, v.toFixed(1), perTask(v)]), ['total', total.toFixed(1), perTask(total)]]),
    );
  }
  if (s.manifest_errors.length) {
    parts.push('', 'manifest errors:', ...s.manifest_errors.map((e) => `  ${e.file}:${e.line}: ${e.message}`));
  }
  if (s.failures.length) {
    parts.push('', 'failures:', ...s.failures.map((f) => `  ${f.stage}  ${f.unit_id}  ${f.reason}`));
  }
  return parts.join('\n');
}

/**
 * The status of the run whose output folder holds `datasetDir` (as its `dataset`, or one of the
 * dataset's versions), or null for a dataset copied elsewhere: what `audit` shows as run health.
 */
export function statusBeside(datasetDir: string): StatusReport | null {
  const parent = dirname(datasetDir);
  const candidates = [parent, ...(basename(parent).endsWith('-versions') ? [dirname(parent)] : [])];
  const out = candidates.find((d) => existsSync(outLayout.ledger(d)));
  return out ? readStatus(out) : null;
}
