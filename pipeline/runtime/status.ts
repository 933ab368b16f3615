/** `worldline status`: what an output folder holds, per stage, with every failure's reason. */
import { existsSync, readFileSync } from 'node:fs';
import { basename, dirname, join } from 'node:path';
import { writeFileAtomic } from '../../core/atomic.js';
import { dirBytes, gb } from '../../core/disk.js';
import { table } from '../../core/table.js';
import type { CandidateSummary } from '../../datasets/audit.js';
import type { ExcludedUnit } from '../../datasets/content_policy.js';
import { countKinds } from '../../datasets/failure_kinds.js';
import { mirrorsDir, outLayout } from './layout.js';
import { Ledger, STAGES, type StageName } from './ledger.js';
import type { ManifestError } from './manifest.js';
import type { BuildRecord, CandidateFate, ForageRecord, PlainParity, ValidateRecord } from './records.js';

export interface StatusReport {
  out: string;
  stages: Record<StageName, { ok: number; failed: number }>;
  failures: { stage: StageName; unit_id: string; repo: string; reason: string | null; log: string | null }[];
  /** The failures by kind (datasets/failure_kinds.ts): why the units that fail do. */
  failure_kinds: { kind: string; count: number }[];
  /** Where the built units' environments came from: manifest, inferred, repaired. */
  env_sources: Record<string, number>;
  /** Where their Python packages came from: Debian alone, or the index's mode (auto, url, folder; lock: a line's own lock). */
  index_modes: Record<string, number>;
  /** Units whose tests had other outcomes under Worldline than under plain pytest, and the first of them. */
  plain_parity: { unit_id: string; compared: number; mismatches: number; mismatched: PlainParity['mismatched']; problem: string | null }[];
  manifest_errors: ManifestError[];
  dataset: { configs: Record<string, { rows: number; shards: number }>; content?: { exclusions: { units?: ExcludedUnit[] } } } | null;
  /** Units the published dataset's content policy left out (license, benchmark repository), with the reason. */
  excluded: ExcludedUnit[];
  /** The machine's mirrors cache (`status` only: measuring it walks the cache). */
  mirrors?: { path: string; bytes: number };
  /** Issue-fix candidates over every unit: counts, seconds, and the fates grouped by reason. */
  candidates: CandidateSummary;
  /** Every candidate's fate, by unit (the `candidates` view of `status --json`). */
  candidate_fates: (CandidateFate & { unit_id: string })[];
  /** Forage's wall seconds by phase over every unit done, and the tasks they made. */
  forage_cost: { tasks: number; seconds_by_phase: Record<string, number> };
}

/** A reason without its particulars (commit, names, byte counts): what groups candidates dropped alike. */
const reasonKind = (reason: string) => reason.split(/[(:]/)[0].trim();

function summarize(fates: CandidateFate[]): CandidateSummary {
  const tried = fates.filter((f) => f.fate !== 'skipped');
  const groups = new Map<string, { fate: string; reason: string; count: number }>();
  for (const f of fates.filter((f) => f.reason)) {
    const key = `${f.fate}\0${reasonKind(f.reason!)}`;
    const g = groups.get(key) ?? { fate: f.fate, reason: reasonKind(f.reason!), count: 0 };
    g.count++;
    groups.set(key, g);
  }
  return {
    tried: tried.length,
    kept: fates.filter((f) => f.fate === 'kept').length,
    dropped: fates.filter((f) => f.fate === 'dropped').length,
    skipped: fates.length - tried.length,
    seconds_per_candidate: tried.length ? Math.round((tried.reduce((s, f) => s + f.seconds, 0) / tried.length) * 100) / 100 : null,
    reasons: [...groups.values()].sort((a, b) => b.count - a.count || a.reason.localeCompare(b.reason)),
  };
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
    for (const e of entries) if (e.status === 'failed') failures.push({ stage, unit_id: e.unit_id, repo: e.unit.repo, reason: e.reason, log: e.log ?? null });
  }
  const env_sources: Record<string, number> = {};
  const index_modes: Record<string, number> = {};
  for (const e of ledger.all<BuildRecord>('build')) {
    const source = e.status === 'ok' ? (e.record?.env_source ?? 'manifest') : 'failed';
    env_sources[source] = (env_sources[source] ?? 0) + 1;
    if (e.status !== 'ok') continue;
    const mode = e.record?.index ? `index ${e.record.index.mode}` : 'Debian only';
    index_modes[mode] = (index_modes[mode] ?? 0) + 1;
  }
  const plain_parity = ledger
    .all<ValidateRecord>('validate')
    .map((e) => ({ unit_id: e.unit_id, plain: e.record?.plain }))
    .filter((p): p is { unit_id: string; plain: PlainParity } => !!p.plain && (p.plain.mismatches > 0 || p.plain.problem !== null))
    .map(({ unit_id, plain }) => ({ unit_id, compared: plain.compared, mismatches: plain.mismatches, mismatched: plain.mismatched, problem: plain.problem }));
  const candidate_fates = ledger.all('forage').flatMap((e) => ((e.record as ForageRecord | null)?.candidates ?? []).map((f) => ({ unit_id: e.unit_id, ...f })));
  const manifest_errors = existsSync(errorsPath(out)) ? (JSON.parse(readFileSync(errorsPath(out), 'utf8')) as ManifestError[]) : [];
  const manifestFile = outLayout.datasetManifest(out);
  const dataset = existsSync(manifestFile) ? (JSON.parse(readFileSync(manifestFile, 'utf8')) as StatusReport['dataset']) : null;
  const mirrors = opts.disk ? { path: mirrorsDir(), bytes: dirBytes(mirrorsDir()) } : undefined;
  const forage_cost: StatusReport['forage_cost'] = { tasks: 0, seconds_by_phase: {} };
  for (const e of ledger.all<ForageRecord>('forage')) {
    if (e.status !== 'ok' || !e.record?.seconds_by_phase) continue;
    forage_cost.tasks += e.record.task_seconds?.length ?? 0;
    for (const [phase, s] of Object.entries(e.record.seconds_by_phase)) forage_cost.seconds_by_phase[phase] = (forage_cost.seconds_by_phase[phase] ?? 0) + s;
  }
  const excluded = dataset?.content?.exclusions.units ?? [];
  return {
    out,
    stages,
    failures,
    failure_kinds: countKinds(failures),
    env_sources,
    index_modes,
    plain_parity,
    manifest_errors,
    dataset,
    excluded,
    mirrors,
    candidates: summarize(candidate_fates),
    candidate_fates,
    forage_cost,
  };
}

export function formatStatus(s: StatusReport): string {
  const parts = [table([['stage', 'ok', 'failed'], ...STAGES.map((st) => [st, s.stages[st].ok, s.stages[st].failed])])];
  if (s.dataset) {
    parts.push('', table([['config', 'rows', 'shards'], ...Object.entries(s.dataset.configs).map(([c, v]) => [c, v.rows, v.shards])]));
  }
  if (s.mirrors) parts.push('', `mirrors cache: ${gb(s.mirrors.bytes)} in ${s.mirrors.path}`);
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
  const sources = Object.entries(s.env_sources);
  if (sources.length) parts.push('', `environments built: ${sources.map(([k, v]) => `${v} ${k}`).join(', ')}`);
  const modes = Object.entries(s.index_modes);
  if (modes.length) parts.push(`python packages from: ${modes.map(([k, v]) => `${v} ${k}`).join(', ')}`);
  if (s.failure_kinds.length) parts.push('', 'failing because of:', ...s.failure_kinds.map((k) => `  ${k.count}  ${k.kind}`));
  if (s.failures.length) {
    parts.push(
      '',
      'failures:',
      ...s.failures.flatMap((f) => [`  ${f.stage}  ${f.unit_id}  ${f.reason}`, ...(f.log ? [`      log: ${join(s.out, f.log)}`] : [])]),
    );
  }
  if (s.plain_parity.length) {
    parts.push(
      '',
      'outcomes that differ from plain pytest (validate; the parity log of each unit is under logs/parity/):',
      ...s.plain_parity.flatMap((p) =>
        p.problem
          ? [`  ${p.unit_id}  not compared: ${p.problem}`]
          : [
              `  ${p.unit_id}  ${p.mismatches} of ${p.compared} tests`,
              ...p.mismatched.slice(0, 5).map((m) => `      ${m.node_id}: worldline ${m.ours}, plain ${m.plain}`),
            ],
      ),
    );
  }
  if (s.excluded.length) parts.push('', 'excluded from the dataset (content policy):', ...s.excluded.map((e) => `  ${e.unit_id}  ${e.reason}`));
  const c = s.candidates;
  if (c.tried || c.skipped) {
    parts.push(
      '',
      `issue candidates: ${c.tried} tried, ${c.kept} kept, ${c.dropped} dropped, ${c.skipped} commits skipped; ${c.seconds_per_candidate ?? 0} s per candidate`,
      ...c.reasons.map((r) => `  ${r.fate}  ${r.count}  ${r.reason}`),
    );
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
