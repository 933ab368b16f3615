/** `worldline status`: what an output folder holds, per stage, with every failure's reason. */
import { existsSync, readFileSync } from 'node:fs';
import { basename, dirname } from 'node:path';
import { writeFileAtomic } from '../../core/atomic.js';
import { dirBytes, gb } from '../../core/disk.js';
import { table } from '../../core/table.js';
import { mirrorsDir, outLayout } from './layout.js';
import { Ledger, STAGES, type StageName } from './ledger.js';
import type { ManifestError } from './manifest.js';

export interface StatusReport {
  out: string;
  stages: Record<StageName, { ok: number; failed: number }>;
  failures: { stage: StageName; unit_id: string; repo: string; reason: string | null }[];
  manifest_errors: ManifestError[];
  dataset: { configs: Record<string, { rows: number; shards: number }> } | null;
  /** The machine's mirrors cache (`status` only: measuring it walks the cache). */
  mirrors?: { path: string; bytes: number };
}

const errorsPath = outLayout.manifestErrors;

export function recordManifestErrors(out: string, errors: ManifestError[]): void {
  writeFileAtomic(errorsPath(out), JSON.stringify(errors, null, 1) + '\n');
}

export function readStatus(out: string, opts: { disk?: boolean } = {}): StatusReport {
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
  const mirrors = opts.disk ? { path: mirrorsDir(), bytes: dirBytes(mirrorsDir()) } : undefined;
  return { out, stages, failures, manifest_errors, dataset, mirrors };
}

export function formatStatus(s: StatusReport): string {
  const parts = [table([['stage', 'ok', 'failed'], ...STAGES.map((st) => [st, s.stages[st].ok, s.stages[st].failed])])];
  if (s.dataset) {
    parts.push('', table([['config', 'rows', 'shards'], ...Object.entries(s.dataset.configs).map(([c, v]) => [c, v.rows, v.shards])]));
  }
  if (s.mirrors) parts.push('', `mirrors cache: ${gb(s.mirrors.bytes)} in ${s.mirrors.path}`);
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
