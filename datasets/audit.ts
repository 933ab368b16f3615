/**
 * `worldline audit`: is a dataset fit for mid-training? The task mix against its target,
 * outcomes, trace health, how much a few repositories dominate, and (when the run's working
 * state is beside the dataset) the run's failures. Answered from the shards alone with DuckDB
 * SQL over the manifest's Parquet files, so it works on a copied dataset and never holds rows in
 * Node: every figure is an aggregate computed inside DuckDB under its memory limit.
 */

import { join, resolve } from 'node:path';
import type { DuckDBConnection } from '@duckdb/node-api';
import { SCHEMAS } from '../schemas/index.js';
import type { Field } from '../schemas/schema.js';
import { type TokenAudit, tokenAudit } from './audit_tokens.js';
import type { ContentSummary } from './dataset_writer.js';
import { sqlString, withDuckDB } from './duckdb.js';
import { countKinds } from './failure_kinds.js';
import { closestMix, DEFAULT_ISSUE_FIX_SHARE, MIX_TOLERANCE } from './mix.js';
import { asDamaged, checkShards, plain, readManifestJson } from './reader.js';

export const DEFAULT_TOP_K = 5;
/** Histograms have at most this many bins. */
const MAX_BINS = 20;

export interface AuditOptions {
  /** Issue-fix share the task mix is judged against (default 0.55, CWM's). */
  target?: number;
  /** How far from the target still counts as OK (default half a point, what rebalance promises). */
  tolerance?: number;
  /** How many of the largest repositories the dominance table shows. */
  topK?: number;
  /**
   * The run's ledger status when the dataset sits in its output folder (the caller finds it:
   * datasets/ knows nothing of the pipeline's folders); its failures are grouped by reason.
   */
  runStatus?: RunStatus | null;
}

/** What `worldline status` reports of a run, as far as the audit needs it. */
export interface RunStatus {
  out: string;
  stages: Record<string, { ok: number; failed: number }>;
  failures: { stage: string; unit_id: string; reason: string | null }[];
  manifest_errors: unknown[];
  /** Issue-fix candidates tried, kept, dropped and skipped, with the reasons (absent in older ledgers' callers). */
  candidates?: CandidateSummary;
}

/** What became of a run's issue-fix candidates: counts, seconds, and the fates grouped by reason. */
export interface CandidateSummary {
  tried: number;
  kept: number;
  dropped: number;
  skipped: number;
  /** Mean seconds per tried candidate, or null when none was tried. */
  seconds_per_candidate: number | null;
  reasons: { fate: string; reason: string; count: number }[];
}

/** A distribution of non-negative integers: nearest-rank percentiles and equal-width bins [lo, hi]. */
export interface Distribution {
  count: number;
  min: number | null;
  median: number | null;
  p90: number | null;
  max: number | null;
  mean: number | null;
  histogram: { lo: number; hi: number; count: number }[];
}

export interface KindSplit {
  issue_fix: number;
  mutation_fix: number;
  total: number;
  /** issue_fix / (issue_fix + mutation_fix); null without tasks. */
  share: number | null;
}

export interface ResolvedRate {
  trajectories: number;
  resolved: number;
  rate: number | null;
}

export interface AuditReport {
  dataset: string;
  /** Rows per config, counted by DuckDB over the shards. */
  configs: Record<string, number>;
  mix: {
    target: number;
    tolerance: number;
    /** The issue-fix share the run that wrote the dataset aimed for (manifest provenance), if any. */
    run_target: number | null;
    tasks: KindSplit & { distance_points: number | null };
    trajectories: KindSplit;
    /** OK: within the tolerance; CLOSEST: off it, but as near as dropping tasks can come; DRIFT: a rebalance would come nearer. */
    status: 'OK' | 'CLOSEST' | 'DRIFT' | 'NO_TASKS';
    verdict: string;
    by_repo: (KindSplit & { repo: string; share_of_tasks: number })[];
    by_operator: { operator: string; tasks: number; share_of_mutations: number }[];
    by_policy: (KindSplit & { policy: string; model: string | null })[];
  };
  outcomes: ResolvedRate & {
    by_kind: (ResolvedRate & { kind: string })[];
    by_operator: (ResolvedRate & { operator: string })[];
    by_repo: (ResolvedRate & { repo: string })[];
    by_policy: (ResolvedRate & { policy: string; model: string | null })[];
    exit_status: { exit_status: string; count: number }[];
    turns: Distribution;
    /** prompt + completion tokens per trajectory. */
    tokens: Distribution;
    /** Replays (policy replay): how many reproduced their recording exactly (observations, image, tools, seed). */
    replay: { trajectories: number; exact: number; share: number | null };
  };
  traces: {
    episodes: number;
    /** Distinct (unit, pytest node id) pairs. */
    tests: number;
    truncated: number;
    truncation_rate: number | null;
    truncated_tests: number;
    by_repo: { repo: string; episodes: number; tests: number; truncated: number; truncation_rate: number | null; fix_episodes: number }[];
    frame_count: Distribution;
    python_versions: { python_version: string; episodes: number }[];
    /** Output per suite test (traces outside agent tasks): episode JSON bytes and episodes kept, and the output caps. */
    output: {
      bytes: number;
      sampled_tests: number;
      bytes_per_test: Distribution;
      episodes_per_test: Distribution;
      by_repo: { repo: string; bytes: number; episodes: number; tests: number; sampled_tests: number }[];
      /** Tests whose episodes are a seeded sample past a cap (at most SAMPLED_LISTED). */
      sampled: { repo: string; node_id: string; sampled: string; episodes: number; built: number; bytes: number }[];
      /** The caps the repos were traced with: test episodes, test bytes, unit episodes, unit bytes (0: none). */
      caps: { caps: number[]; units: number }[];
      /** Units traced twice (--determinism-sample): the share of their episodes that differed. */
      determinism: { repo: string; unit_id: string; share_differing: number }[];
    };
    /** Traces around agent tasks: FAIL_TO_PASS tests traced on the task state (before) and with the fix (after). */
    fix_pairs: {
      tasks_traced: number;
      pairs: number;
      before_only: number;
      after_only: number;
      before_episodes: number;
      after_episodes: number;
      tasks_without_traces: number;
    };
  };
  /** Trace descriptions (the describe stage): described, kept, and not kept by the kind of reason, per describer and model. */
  descriptions: {
    described: number;
    kept: number;
    by_describer: { describer: string; model: string | null; described: number; kept: number }[];
    rejected: { reason: string; count: number }[];
  };
  tests: {
    tests: number;
    flaky: number;
    flaky_rate: number | null;
    by_repo: { repo: string; tests: number; flaky: number; flaky_rate: number | null }[];
    outcomes: { outcome: string; count: number }[];
    /** The flaky tests themselves (at most FLAKY_LISTED). */
    flaky_tests: { repo: string; node_id: string; run_outcomes: string[] }[];
    /** Test ids not there in every validate run (they embed the time, say): neither flaky nor traced. */
    unstable_ids: number;
    /** Our outcomes against plain `python3 -m pytest` in the same image (validate): tests compared, how many differed, and where. */
    plain: { compared: number; mismatches: number; by_repo: { repo: string; compared: number; mismatches: number }[] };
  };
  dominance: {
    top_k: number;
    configs: {
      config: string;
      rows: number;
      repos: number;
      top_k_share: number | null;
      gini: number | null;
      top: { repo: string; rows: number; share: number }[];
    }[];
    licenses: { license: string; units: number; repos: number }[];
  };
  /** Unit outcomes as the repos config records them (clone, build, validate, trace). */
  units: {
    units: number;
    status: { status: string; count: number }[];
    failures: { stage: string; reason: string; units: number }[];
    /** The failures by kind (failure_kinds.ts): why units that still fail do. */
    failure_kinds: { kind: string; count: number }[];
    /** Where the units' environments came from: the manifest, inferred, repaired by the build. */
    env_sources: { source: string; count: number }[];
  };
  /**
   * Content safety as the shard recorded it (manifest.json; null for a dataset written before it
   * was recorded), with the excluded units counted from the repos config.
   */
  content: (ContentSummary & { excluded_units: { reason: string; units: number }[] }) | null;
  /** Rows the writer removed as near duplicates (MinHash-LSH, manifest.json), per config; null when it did not look. */
  near_duplicates: { threshold: number; shingle_size: number; removed: Record<string, number> } | null;
  /** Tokens per config, repository and kind, from the `<column>_tokens` columns. */
  tokens: TokenAudit;
  /** The run's ledger, when the dataset sits in its output folder; null otherwise. */
  run: {
    out: string;
    stages: Record<string, { ok: number; failed: number }>;
    failures: { stage: string; reason: string; units: number; unit_ids: string[] }[];
    manifest_errors: number;
    candidates: RunStatus['candidates'] | null;
  } | null;
}

const FLAKY_LISTED = 100;

const ratio = (a: number, b: number): number | null => (b ? a / b : null);
const pct = (s: number | null) => (s === null ? 'n/a' : `${(s * 100).toFixed(1)}%`);

function duckType(f: Field): string {
  const t = f.type;
  switch (t.kind) {
    case 'string':
      return 'VARCHAR';
    case 'int64':
      return 'BIGINT';
    case 'int32':
      return 'INTEGER';
    case 'float64':
      return 'DOUBLE';
    case 'bool':
      return 'BOOLEAN';
    case 'list':
      return `${duckType(t.of)}[]`;
    case 'struct':
      return `STRUCT(${Object.entries(t.fields)
        .map(([n, sub]) => `"${n}" ${duckType(sub)}`)
        .join(', ')})`;
  }
}

/**
 * One view per config over the manifest's shards; a config the dataset lacks becomes an empty
 * table of its schema, so every query runs and reports zeros instead of failing.
 */
async function registerConfigs(conn: DuckDBConnection, datasetDir: string): Promise<void> {
  const manifest = readManifestJson(datasetDir);
  for (const [name, schema] of Object.entries(SCHEMAS)) {
    const files = manifest.shards.filter((s) => s.config === name).map((s) => sqlString(join(datasetDir, s.path)));
    if (files.length) await conn.run(`create view ${name} as select * from read_parquet([${files.join(', ')}])`);
    else
      await conn.run(
        `create table ${name} (${Object.entries(schema.fields)
          .map(([n, f]) => `"${n}" ${duckType(f)}`)
          .join(', ')})`,
      );
  }
}

type Rows = <T>(sql: string) => Promise<T[]>;

/** Sampled tests the audit names. */
const SAMPLED_LISTED = 20;

async function distribution(rows: Rows, table: string, expr: string): Promise<Distribution> {
  const [s] = await rows<Omit<Distribution, 'histogram'>>(
    `select count(${expr})::bigint as count, min(${expr})::bigint as min, quantile_disc(${expr}, 0.5)::bigint as median, quantile_disc(${expr}, 0.9)::bigint as p90, max(${expr})::bigint as max, avg(${expr})::double as mean from ${table}`,
  );
  if (!s.count || s.min === null || s.max === null) return { ...s, histogram: [] };
  const { min, max } = s;
  // Bin widths of 1, 2 or 5 times a power of ten, edges on multiples of the width: readable ranges.
  const nice = (k: number) => [1, 2, 5][k % 3] * 10 ** Math.floor(k / 3);
  let k = 0;
  while (Math.floor(max / nice(k)) - Math.floor(min / nice(k)) + 1 > MAX_BINS) k++;
  const width = nice(k);
  const first = Math.floor(min / width);
  const counts = await rows<{ bin: number; count: number }>(
    `select (${expr} // ${width} - ${first})::bigint as bin, count(*)::bigint as count from ${table} where ${expr} is not null group by bin`,
  );
  const byBin = new Map(counts.map((c) => [c.bin, c.count]));
  const bins = Math.floor(max / width) - first + 1;
  const histogram = Array.from({ length: bins }, (_, i) => ({ lo: (first + i) * width, hi: (first + i + 1) * width - 1, count: byBin.get(i) ?? 0 }));
  return { ...s, histogram };
}

const split = (issue: number, mutation: number, total: number): KindSplit => ({
  issue_fix: issue,
  mutation_fix: mutation,
  total,
  share: ratio(issue, issue + mutation),
});
const KIND_COUNTS = `count(*) filter (where kind = 'issue_fix')::bigint as issue_fix, count(*) filter (where kind = 'mutation_fix')::bigint as mutation_fix, count(*)::bigint as total`;
const RESOLVED = `count(*)::bigint as trajectories, count(*) filter (where resolved)::bigint as resolved`;
const withRate = <T extends { trajectories: number; resolved: number }>(r: T) => ({ ...r, rate: ratio(r.resolved, r.trajectories) });

/**
 * OK within the tolerance; CLOSEST when off it but as near as the tasks allow (dropping tasks,
 * which is all rebalance does, cannot come nearer); DRIFT when a rebalance would come nearer,
 * with the command that does (a tolerance it can meet when the target itself is out of reach).
 */
function verdict(
  tasks: KindSplit,
  target: number,
  tolerance: number,
  runTarget: number | null,
  datasetDir: string,
): { status: AuditReport['mix']['status']; verdict: string } {
  const share = tasks.share;
  const run = runTarget !== null && runTarget !== target ? `; the run aimed for ${pct(runTarget)}` : '';
  if (share === null) return { status: 'NO_TASKS', verdict: `NO TASKS: the dataset has no issue-fix or mutation-fix tasks (target ${pct(target)})${run}` };
  const points = (share - target) * 100;
  const signed = `${points >= 0 ? '+' : '-'}${Math.abs(points).toFixed(1)} points`;
  if (Math.abs(share - target) <= tolerance + 1e-12) return { status: 'OK', verdict: `OK: ${pct(share)} issue-fix, target ${pct(target)} (${signed})${run}` };
  const head = `${pct(share)} issue-fix, target ${pct(target)} (${signed}, tolerance ${(tolerance * 100).toFixed(1)})${run}`;
  const closest = closestMix(tasks.issue_fix, tasks.mutation_fix, target, tolerance);
  const distance = Math.abs((closest.share ?? share) - target);
  if (distance >= Math.abs(share - target) - 1e-12) {
    return {
      status: 'CLOSEST',
      verdict: `CLOSEST: ${head}; as near as ${tasks.issue_fix} issue-fix and ${tasks.mutation_fix} mutation-fix tasks allow (only more tasks would bring it nearer)`,
    };
  }
  // Rounded up to a tenth of a point, so the tolerance named is one the closest mix meets.
  const needed = closest.reached ? '' : ` --tolerance ${Math.ceil(distance * 1000 - 1e-9) / 1000}`;
  const rebalance = `worldline rebalance ${datasetDir} --out ${datasetDir}-rebalanced --issue-fix-share ${target}${needed}`;
  return {
    status: 'DRIFT',
    verdict: `DRIFT: ${head}; \`${rebalance}\` writes a dataset at ${pct(closest.share)} (${closest.issue_fix} + ${closest.mutation_fix} tasks)`,
  };
}

function runHealth(status: RunStatus): AuditReport['run'] {
  const groups = new Map<string, { stage: string; reason: string; units: number; unit_ids: string[] }>();
  for (const f of status.failures) {
    const reason = f.reason ?? '(no reason recorded)';
    const g = groups.get(`${f.stage}\0${reason}`) ?? { stage: f.stage, reason, units: 0, unit_ids: [] };
    g.units++;
    g.unit_ids.push(f.unit_id);
    groups.set(`${f.stage}\0${reason}`, g);
  }
  return {
    out: status.out,
    stages: status.stages,
    failures: [...groups.values()].sort((a, b) => b.units - a.units || a.stage.localeCompare(b.stage) || a.reason.localeCompare(b.reason)),
    manifest_errors: status.manifest_errors.length,
    candidates: status.candidates ?? null,
  };
}

export async function auditDataset(datasetDirArg: string, opts: AuditOptions = {}): Promise<AuditReport> {
  const datasetDir = resolve(datasetDirArg);
  const target = opts.target ?? DEFAULT_ISSUE_FIX_SHARE;
  const tolerance = opts.tolerance ?? MIX_TOLERANCE;
  const topK = opts.topK ?? DEFAULT_TOP_K;
  if (!(target >= 0 && target <= 1)) throw new RangeError(`the target issue-fix share must be between 0 and 1 (got ${target})`);
  const manifest = readManifestJson(datasetDir);
  const provenanceMix = manifest.provenance?.mix as { target?: unknown } | undefined;
  const runTarget = typeof provenanceMix?.target === 'number' ? provenanceMix.target : null;
  checkShards(datasetDir, manifest.shards);
  return withDuckDB(async (conn) => {
    await registerConfigs(conn, datasetDir);
    const rows: Rows = async <T>(sql: string) => plain((await conn.runAndReadAll(sql)).getRowObjectsJS()) as T[];

    const configs: Record<string, number> = {};
    for (const name of Object.keys(SCHEMAS)) configs[name] = (await rows<{ n: number }>(`select count(*)::bigint as n from ${name}`))[0].n;

    // ---- the mix ----
    const [taskKinds] = await rows<{ issue_fix: number; mutation_fix: number; total: number }>(`select ${KIND_COUNTS} from tasks`);
    const [trajKinds] = await rows<{ issue_fix: number; mutation_fix: number; total: number }>(`select ${KIND_COUNTS} from trajectories`);
    const tasks = split(taskKinds.issue_fix, taskKinds.mutation_fix, taskKinds.total);
    const byRepo = await rows<{ repo: string; issue_fix: number; mutation_fix: number; total: number }>(
      `select repo, ${KIND_COUNTS} from tasks group by repo order by total desc, repo`,
    );
    const byOperator = await rows<{ operator: string; tasks: number }>(
      `select coalesce(operator, '(none)') as operator, count(*)::bigint as tasks from tasks where kind = 'mutation_fix' group by all order by tasks desc, operator`,
    );
    const byPolicy = await rows<{ policy: string; model: string | null; issue_fix: number; mutation_fix: number; total: number }>(
      `select policy, model, ${KIND_COUNTS} from trajectories group by policy, model order by total desc, policy, model nulls first`,
    );

    // ---- outcomes ----
    const [overall] = await rows<{ trajectories: number; resolved: number }>(`select ${RESOLVED} from trajectories`);
    const outcomes: AuditReport['outcomes'] = {
      ...withRate(overall),
      by_kind: (
        await rows<{ kind: string; trajectories: number; resolved: number }>(`select kind, ${RESOLVED} from trajectories group by kind order by kind`)
      ).map(withRate),
      by_operator: (
        await rows<{ operator: string; trajectories: number; resolved: number }>(
          `select coalesce(t.operator, '(unknown task)') as operator, ${RESOLVED} from trajectories j left join tasks t on t.instance_id = j.task_id where j.kind = 'mutation_fix' group by all order by trajectories desc, operator`,
        )
      ).map(withRate),
      by_repo: (
        await rows<{ repo: string; trajectories: number; resolved: number }>(
          `select repo, ${RESOLVED} from trajectories group by repo order by trajectories desc, repo`,
        )
      ).map(withRate),
      by_policy: (
        await rows<{ policy: string; model: string | null; trajectories: number; resolved: number }>(
          `select policy, model, ${RESOLVED} from trajectories group by policy, model order by trajectories desc, policy, model nulls first`,
        )
      ).map(withRate),
      exit_status: await rows(`select exit_status, count(*)::bigint as count from trajectories group by exit_status order by count desc, exit_status`),
      turns: await distribution(rows, 'trajectories', 'turns'),
      tokens: await distribution(rows, 'trajectories', '(prompt_tokens + completion_tokens)'),
      replay: await rows<{ trajectories: number; exact: number }>(
        `select count(*)::bigint as trajectories, count(*) filter (where replay_exact)::bigint as exact from trajectories where replay_of is not null`,
      ).then(([r]) => ({ ...r, share: ratio(r.exact, r.trajectories) })),
    };

    // ---- traces ----
    const TRACE_COUNTS = `count(*)::bigint as episodes, count(distinct (unit_id, node_id))::bigint as tests, count(*) filter (where truncated)::bigint as truncated`;
    const [traceTotals] = await rows<{ episodes: number; tests: number; truncated: number; truncated_tests: number }>(
      `select ${TRACE_COUNTS}, count(distinct (unit_id, node_id)) filter (where truncated)::bigint as truncated_tests from traces`,
    );
    const [pairs] = await rows<AuditReport['traces']['fix_pairs']>(`
      with p as (select task_id, count(*) filter (where phase = 'before') as b, count(*) filter (where phase = 'after') as a from traces where task_id is not null group by task_id)
      select count(*)::bigint as tasks_traced, count(*) filter (where b > 0 and a > 0)::bigint as pairs, count(*) filter (where b > 0 and a = 0)::bigint as before_only,
             count(*) filter (where a > 0 and b = 0)::bigint as after_only, coalesce(sum(b), 0)::bigint as before_episodes, coalesce(sum(a), 0)::bigint as after_episodes,
             (select count(*) from tasks where instance_id not in (select task_id from p))::bigint as tasks_without_traces
      from p`);
    // one row per suite test, with what the tracer says of its output
    const PER_TEST = `(select repo, unit_id, node_id, count(*)::bigint as episodes, max(test_episode_bytes)::bigint as bytes, max(test_episodes_built)::bigint as built,
      max(test_sampled) as sampled from traces where task_id is null group by repo, unit_id, node_id)`;
    const [outputTotals] = await rows<{ bytes: number; sampled_tests: number }>(
      `select coalesce(sum(bytes), 0)::bigint as bytes, count(*) filter (where sampled is not null)::bigint as sampled_tests from ${PER_TEST}`,
    );
    const output: AuditReport['traces']['output'] = {
      ...outputTotals,
      bytes_per_test: await distribution(rows, PER_TEST, 'bytes'),
      episodes_per_test: await distribution(rows, PER_TEST, 'episodes'),
      by_repo: await rows(
        `select repo, sum(bytes)::bigint as bytes, sum(episodes)::bigint as episodes, count(*)::bigint as tests, count(*) filter (where sampled is not null)::bigint as sampled_tests
         from ${PER_TEST} group by repo order by bytes desc, repo`,
      ),
      sampled: await rows(
        `select repo, node_id, sampled, episodes, built, bytes from ${PER_TEST} where sampled is not null order by repo, node_id limit ${SAMPLED_LISTED}`,
      ),
      determinism: await rows(
        `select repo, unit_id, trace_determinism_diff as share_differing from repos where trace_determinism_diff is not null order by share_differing desc, repo, unit_id`,
      ),
      caps: await rows(`select trace_caps as caps, count(*)::bigint as units from repos where len(trace_caps) > 0 group by trace_caps order by units desc`),
    };
    const traces: AuditReport['traces'] = {
      ...traceTotals,
      truncation_rate: ratio(traceTotals.truncated, traceTotals.episodes),
      by_repo: (
        await rows<{ repo: string; episodes: number; tests: number; truncated: number; fix_episodes: number }>(
          `select repo, ${TRACE_COUNTS}, count(*) filter (where task_id is not null)::bigint as fix_episodes from traces group by repo order by episodes desc, repo`,
        )
      ).map((r) => ({ ...r, truncation_rate: ratio(r.truncated, r.episodes) })),
      frame_count: await distribution(rows, 'traces', 'frame_count'),
      python_versions: await rows(
        `select python_version, count(*)::bigint as episodes from traces group by python_version order by episodes desc, python_version`,
      ),
      fix_pairs: pairs,
      output,
    };

    // ---- tests ----
    const [testTotals] = await rows<{ tests: number; flaky: number }>(
      `select count(*)::bigint as tests, count(*) filter (where flaky)::bigint as flaky from tests`,
    );
    const testsReport: AuditReport['tests'] = {
      ...testTotals,
      flaky_rate: ratio(testTotals.flaky, testTotals.tests),
      by_repo: (
        await rows<{ repo: string; tests: number; flaky: number }>(
          `select repo, count(*)::bigint as tests, count(*) filter (where flaky)::bigint as flaky from tests group by repo order by tests desc, repo`,
        )
      ).map((r) => ({ ...r, flaky_rate: ratio(r.flaky, r.tests) })),
      outcomes: await rows(`select outcome, count(*)::bigint as count from tests group by outcome order by count desc, outcome`),
      flaky_tests: await rows(`select repo, node_id, run_outcomes from tests where flaky order by repo, node_id limit ${FLAKY_LISTED}`),
      unstable_ids: (await rows<{ n: number }>(`select count(*)::bigint as n from tests where unstable_id`))[0].n,
      plain: {
        ...(
          await rows<{ compared: number; mismatches: number }>(
            `select coalesce(sum(plain_compared), 0)::bigint as compared, coalesce(sum(plain_mismatches), 0)::bigint as mismatches from repos`,
          )
        )[0],
        by_repo: await rows(
          `select repo, sum(plain_compared)::bigint as compared, sum(plain_mismatches)::bigint as mismatches from repos group by repo having sum(plain_mismatches) > 0 order by mismatches desc, repo`,
        ),
      },
    };

    // ---- dominance: every repository of the dataset counts, with 0 rows where it has none ----
    const dominance: AuditReport['dominance'] = { top_k: topK, configs: [], licenses: [] };
    for (const name of Object.keys(SCHEMAS)) {
      const perRepo = `(select u.repo, coalesce(c.n, 0) as n from (select repo from repos union select repo from ${name}) u left join (select repo, count(*) as n from ${name} group by repo) c using (repo))`;
      // Gini over repositories sorted ascending: 2 * sum(i * x_i) / (n * sum x) - (n + 1) / n.
      const [g] = await rows<{ rows: number; repos: number; gini: number | null }>(`
        select coalesce(max(s), 0)::bigint as rows, count(*)::bigint as repos,
               case when coalesce(max(s), 0) = 0 then null else 2 * sum(i * n) / (max(k) * max(s)) - (max(k) + 1) / max(k) end::double as gini
        from (select n, row_number() over (order by n) as i, count(*) over () as k, sum(n) over () as s from ${perRepo})`);
      const top = (
        await rows<{ repo: string; rows: number }>(`select repo, n::bigint as rows from ${perRepo} where n > 0 order by n desc, repo limit ${topK}`)
      ).map((t) => ({ ...t, share: t.rows / g.rows }));
      dominance.configs.push({
        config: name,
        rows: g.rows,
        repos: g.repos,
        top_k_share: ratio(
          top.reduce((s, t) => s + t.rows, 0),
          g.rows,
        ),
        gini: g.gini,
        top,
      });
    }
    dominance.licenses = await rows(
      `select license, count(*)::bigint as units, count(distinct repo)::bigint as repos from repos group by license order by units desc, license`,
    );

    const units: AuditReport['units'] = {
      units: configs.repos,
      status: await rows(`select status, count(*)::bigint as count from repos group by status order by count desc, status`),
      failures: await rows(
        `select failed_stage as stage, coalesce(reason, '(no reason recorded)') as reason, count(*)::bigint as units from repos where status = 'failed' group by all order by units desc, stage, reason`,
      ),
      failure_kinds: countKinds(
        await rows<{ stage: string | null; reason: string | null }>(`select failed_stage as stage, reason from repos where status = 'failed'`),
      ),
      env_sources: await rows(
        `select coalesce(env_source, 'none (not built)') as source, count(*)::bigint as count from repos group by all order by count desc, source`,
      ),
    };

    const content: AuditReport['content'] = manifest.content
      ? {
          ...manifest.content,
          excluded_units: await rows(
            `select coalesce(reason, '(no reason recorded)') as reason, count(*)::bigint as units from repos where status = 'excluded' group by all order by units desc, reason`,
          ),
        }
      : null;

    const [described] = await rows<{ described: number; kept: number }>(
      `select count(*)::bigint as described, count(*) filter (where kept)::bigint as kept from trace_descriptions`,
    );
    const descriptions: AuditReport['descriptions'] = {
      ...described,
      by_describer: await rows(
        `select describer, model, count(*)::bigint as described, count(*) filter (where kept)::bigint as kept from trace_descriptions group by all order by described desc, describer, model nulls first`,
      ),
      // the kind of reason: a wrong outcome's values differ row to row
      rejected: await rows(
        `select split_part(reject_reason, ':', 1) as reason, count(*)::bigint as count from trace_descriptions where not kept group by all order by count desc, reason`,
      ),
    };

    const share = tasks.share;
    return {
      dataset: datasetDir,
      configs,
      mix: {
        target,
        tolerance,
        run_target: runTarget,
        tasks: { ...tasks, distance_points: share === null ? null : (share - target) * 100 },
        trajectories: split(trajKinds.issue_fix, trajKinds.mutation_fix, trajKinds.total),
        ...verdict(tasks, target, tolerance, runTarget, datasetDir),
        by_repo: byRepo.map((r) => ({ repo: r.repo, ...split(r.issue_fix, r.mutation_fix, r.total), share_of_tasks: r.total / tasks.total })),
        by_operator: byOperator.map((o) => ({ ...o, share_of_mutations: o.tasks / tasks.mutation_fix })),
        by_policy: byPolicy.map((p) => ({ policy: p.policy, model: p.model, ...split(p.issue_fix, p.mutation_fix, p.total) })),
      },
      outcomes,
      traces,
      descriptions,
      tests: testsReport,
      dominance,
      units,
      content,
      near_duplicates: manifest.near_dedup
        ? {
            threshold: manifest.near_dedup.threshold,
            shingle_size: manifest.near_dedup.shingleSize,
            removed: Object.fromEntries(manifest.near_dedup.configs.map((c) => [c, manifest.configs[c]?.near_duplicates_removed ?? 0])),
          }
        : null,
      tokens: await tokenAudit(rows, manifest, topK),
      run: opts.runStatus ? runHealth(opts.runStatus) : null,
    };
  }).catch((e: unknown) => {
    throw asDamaged(datasetDir, e);
  });
}
