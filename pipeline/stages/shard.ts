/**
 * Stage `shard`: gathers every unit's records from the ledger and part files of an output
 * folder and writes the dataset. Units are read in unit-id order and the writer's shuffle is
 * seeded, so the same ledger always
 * gives byte-identical shards.
 */
import { existsSync } from 'node:fs';
import { sha256 } from '../../core/hashing.js';
import { readLines } from '../../core/jsonl.js';
import { toolVersion } from '../../core/package.js';
import { type ContentPolicy, DEFAULT_CONTENT_POLICY, UnitFilter } from '../../datasets/content_policy.js';
import { type DatasetLayout, type DatasetManifest, writeDataset } from '../../datasets/dataset_writer.js';
import { DEFAULT_ISSUE_FIX_SHARE, DEFAULT_MIX_SEED, type MixPlan, mixSummary, planMix, type TaskRef } from '../../datasets/mix.js';
import { Redactor } from '../../datasets/redact.js';
import {
  type RepoRecord,
  reposSchema,
  type TaskRecord,
  type TestRecord,
  type TraceDescriptionRecord,
  type TraceRecord,
  type TrajectoryRecord,
  tasksSchema,
  testsSchema,
  traceDescriptionsSchema,
  tracesSchema,
  trajectoriesSchema,
} from '../../schemas/index.js';
import { stopSignal } from '../runtime/job_scope.js';
import { outLayout } from '../runtime/layout.js';
import { Ledger, type LedgerEntry } from '../runtime/ledger.js';
import type { BuildRecord, CloneRecord, ResolveRecord, TraceStageRecord, ValidateRecord } from '../runtime/records.js';

function repoRow(clone: LedgerEntry<CloneRecord>, ledger: Ledger, filter: UnitFilter): RepoRecord {
  const build = ledger.get<BuildRecord>('build', clone.unit_id);
  const validate = ledger.get<ValidateRecord>('validate', clone.unit_id);
  const trace = ledger.get<TraceStageRecord>('trace', clone.unit_id);
  const resolved = ledger.get<ResolveRecord>('resolve', clone.unit_id);
  const t = trace?.status === 'ok' ? trace.record : null;
  const c = clone.record;
  const b = build?.status === 'ok' ? build.record : null;
  const v = validate?.record ?? null;
  const failedEntry = [clone, resolved, build, validate, trace].find((e) => e && e.status === 'failed') ?? null;
  const complete = clone.status === 'ok' && build?.status === 'ok' && validate?.status === 'ok' && (!trace || trace.status === 'ok');
  const excluded = c ? filter.reason({ unit_id: clone.unit_id, repo: clone.unit.repo, url: clone.unit.url, license: c.license }) : null;
  return {
    unit_id: clone.unit_id,
    repo: clone.unit.repo,
    url: clone.unit.url,
    ref: clone.unit.ref,
    commit: c?.commit ?? null,
    python: clone.unit.python,
    history_of: clone.unit.history_of ?? null,
    license: c?.license ?? 'unknown',
    license_file: c?.license_file ?? null,
    size_bytes: c?.size_bytes ?? 0,
    file_count: c?.file_count ?? 0,
    py_file_count: c?.py_file_count ?? 0,
    src_layout: c?.src_layout ?? false,
    env_source: b?.env_source ?? null,
    env_apt: b?.apt ?? [],
    env_packages: (resolved?.record?.packages ?? []).map((p) => `${p.package} ${p.version} <- ${p.asked.join('; ')}`),
    env_attempts: b ? Math.max(1, b.attempts?.length ?? 1) : 0,
    env_install: b?.install?.method ?? null,
    env_index: b?.index?.mode ?? null,
    env_lock: (b?.env?.lock ?? []).map((d) => `${d.name}==${d.version} sha256:${d.sha256} ${d.url}${d.build_only ? ' build-only' : ''}`),
    image: b?.image ?? null,
    image_id: b?.image_id ?? null,
    python_version: b?.python_version ?? null,
    pytest_version: b?.pytest_version ?? null,
    status: excluded ? 'excluded' : complete ? 'ok' : failedEntry ? 'failed' : 'incomplete',
    failed_stage: excluded ? null : (failedEntry?.stage ?? null),
    reason: excluded ?? failedEntry?.reason ?? null,
    log: excluded ? null : (failedEntry?.log ?? null),
    validate_runs: v?.runs ?? 0,
    exit_codes: v?.exit_codes ?? [],
    collected: v?.collected ?? 0,
    passed: v?.passed ?? 0,
    failed: v?.failed ?? 0,
    error: v?.error ?? 0,
    skipped: v?.skipped ?? 0,
    xfailed: v?.xfailed ?? 0,
    xpassed: v?.xpassed ?? 0,
    flaky: v?.flaky ?? 0,
    unstable_ids: v?.unstable_ids ?? 0,
    stable_passed: v?.stable_passed ?? 0,
    traceable: v?.traceable ?? false,
    traced_tests: t?.tests_traced ?? 0,
    trace_episodes: t?.episodes ?? 0,
    trace_line_events: t?.line_events ?? 0,
    truncated_tests: t?.truncated_tests ?? 0,
    trace_episode_bytes: t?.episode_bytes ?? 0,
    trace_sampled_tests: t?.sampled_tests ?? 0,
    trace_caps: t?.caps ?? [],
    trace_determinism_diff: t?.determinism_diff ?? null,
    plain_compared: v?.plain?.compared ?? 0,
    plain_mismatches: v?.plain?.mismatches ?? 0,
    parity_mismatches: t?.parity_mismatches ?? 0,
    tracer_version: t?.tracer_version ?? null,
    build_seconds: build?.seconds ?? null,
    validate_seconds: validate?.seconds ?? null,
  };
}

/** Rows of every unit's part file, unit by unit, one line in memory at a time. */
function* partRows<T>(entries: LedgerEntry<unknown>[], partPath: (unitId: string) => string): Generator<T> {
  for (const entry of entries) {
    const part = partPath(entry.unit_id);
    if (!existsSync(part)) continue;
    for (const line of readLines(part)) yield JSON.parse(line) as T;
  }
}

function* concat<T>(...parts: Iterable<T>[]): Generator<T> {
  for (const p of parts) yield* p;
}

function* keepOnly<T>(rows: Iterable<T>, keep: (row: T) => boolean): Generator<T> {
  for (const r of rows) if (keep(r)) yield r;
}

/**
 * The run's task mix is settled here, the one place that sees every unit's tasks: tasks beyond the
 * issue-fix share are dropped with their trajectories and before/after traces (see datasets/mix.ts).
 * The content policy applies here too: units of excluded licenses or benchmark repositories keep
 * only their repos row (status `excluded`, with the reason), and every row is redacted.
 */
export async function shardOutput(
  out: string,
  provenance: Record<string, unknown> = {},
  layout: DatasetLayout = {},
  issueFixShare = DEFAULT_ISSUE_FIX_SHARE,
  policy: ContentPolicy = DEFAULT_CONTENT_POLICY,
): Promise<DatasetManifest & { mix: MixPlan }> {
  const ledger = new Ledger(out);
  const clones = ledger.all<CloneRecord>('clone');
  const filter = new UnitFilter(policy);
  const repos = clones.map((c) => repoRow(c, ledger, filter));
  const excluded = new Set(repos.filter((r) => r.status === 'excluded').map((r) => r.unit_id));
  const done = (stage: 'validate' | 'trace' | 'describe' | 'forage') => ledger.all(stage).filter((e) => e.status === 'ok' && !excluded.has(e.unit_id));
  const redactor = policy.redact ? new Redactor({ literals: policy.secretValues }) : null;
  const clean = <T extends Record<string, unknown>>(config: string, rows: Iterable<T>): Iterable<T> => (redactor ? redactor.rows(config, rows) : rows);
  const licenses: Record<string, number> = {};
  for (const r of repos) if (r.status !== 'excluded') licenses[r.license] = (licenses[r.license] ?? 0) + 1;
  const tasks = () => partRows<TaskRecord>(done('forage'), (id) => outLayout.part(out, 'tasks', id));
  const refs: TaskRef[] = [];
  for (const t of tasks()) refs.push({ id: t.instance_id, kind: t.kind, repo: t.repo });
  const mix = planMix(refs, issueFixShare, { seed: DEFAULT_MIX_SEED });
  const kept = (id: string | null) => id === null || mix.keep.has(id);
  const manifest = await writeDataset(
    outLayout.dataset(out),
    [
      { schema: reposSchema, rows: clean('repos', repos) },
      {
        schema: testsSchema,
        rows: clean(
          'tests',
          partRows<TestRecord>(done('validate'), (id) => outLayout.part(out, 'tests', id)),
        ),
      },
      {
        schema: tracesSchema,
        rows: clean(
          'traces',
          concat(
            partRows<TraceRecord>(done('trace'), (id) => outLayout.part(out, 'traces', id)),
            keepOnly(
              partRows<TraceRecord>(done('forage'), (id) => outLayout.part(out, 'task_traces', id)),
              (r) => kept(r.task_id),
            ),
          ),
        ),
      },
      {
        schema: tasksSchema,
        rows: clean(
          'tasks',
          keepOnly(tasks(), (t) => kept(t.instance_id)),
        ),
      },
      {
        schema: trajectoriesSchema,
        rows: clean(
          'trajectories',
          keepOnly(
            partRows<TrajectoryRecord>(done('forage'), (id) => outLayout.part(out, 'trajectories', id)),
            (t) => kept(t.task_id),
          ),
        ),
      },
      {
        schema: traceDescriptionsSchema,
        rows: clean(
          'trace_descriptions',
          partRows<TraceDescriptionRecord>(done('describe'), (id) => outLayout.part(out, 'trace_descriptions', id)),
        ),
      },
    ],
    {
      ...layout,
      // A stopping process (SIGINT, SIGTERM) leaves the published version as it was.
      signal: stopSignal(),
      licenses,
      content: () => ({ redaction: redactor?.summary() ?? null, exclusions: filter.result() }),
      provenance: {
        tool: 'worldline',
        tool_version: toolVersion(),
        units: repos.length,
        units_hash: sha256(repos.map((r) => `${r.unit_id}:${r.commit}`).join('\n')).slice(0, 16),
        created_at: new Date().toISOString(),
        mix: mixSummary(mix),
        ...provenance,
      },
    },
  );
  return { ...manifest, mix };
}
