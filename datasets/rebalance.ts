/**
 * `worldline rebalance`: a new dataset whose task issue-fix share is within half a point of a
 * target. Which tasks go is datasets/mix.ts's plan (reach the target, drop as few as possible,
 * keep each repository's share); a dropped task takes its trajectories and its before/after
 * traces with it, and every other row is copied as it is, through the ordinary dataset writer,
 * so the result is a normal dataset that `verify` checks like any other.
 */
import { existsSync, lstatSync, readdirSync, realpathSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { table } from '../core/table.js';
import { SCHEMAS } from '../schemas/index.js';
import { type ConfigSource, type ContentSummary, versionsDir, writeDataset } from './dataset_writer.js';
import { query, sqlString } from './duckdb.js';
import { DEFAULT_MIX_SEED, type KindCounts, type MixPlan, mixSummary, planMix, type TaskRef } from './mix.js';
import { asDamaged, checkShards, readManifestJson, readRows } from './reader.js';
import { type VerifyReport, verifyDataset } from './verify.js';

/** An output folder rebalance will not write (the dataset it reads, or something that is not a dataset). */
export class RebalanceRefused extends Error {}

export interface RebalanceReport {
  dataset: string;
  out: string;
  seed: string;
  mix: {
    target: number;
    tolerance: number;
    before: KindCounts;
    after: KindCounts;
    dropped: number;
    dropped_by_kind: { issue_fix: number; mutation_fix: number };
  };
  /** Tasks per repository before and after, with each repository's share of all tasks. */
  repos: {
    repo: string;
    tasks_before: number;
    tasks_after: number;
    share_before: number;
    share_after: number | null;
    dropped_issue_fix: number;
    dropped_mutation_fix: number;
  }[];
  configs: Record<string, { before: number; after: number; dropped: number }>;
  verify: VerifyReport;
}

function checkOut(dataset: string, out: string): void {
  const st = lstatSync(out, { throwIfNoEntry: false });
  if (!st) return;
  const source = realpathSync(dataset);
  if (existsSync(out) && realpathSync(out) === source) throw new RebalanceRefused(`--out ${out} is the dataset being rebalanced; name a new folder`);
  // Publishing prunes the versions beside `out`: the source must not be one of them.
  if (source.startsWith(`${resolve(versionsDir(out))}/`))
    throw new RebalanceRefused(`--out ${out}: the dataset being rebalanced is one of its versions and would be pruned; name a new folder`);
  if (existsSync(join(out, 'manifest.json')) || (st.isDirectory() && !readdirSync(out).length)) return;
  throw new RebalanceRefused(`--out ${out} exists and is not a dataset; name a new folder (or an older rebalanced dataset to replace)`);
}

async function taskRefs(files: string[]): Promise<TaskRef[]> {
  if (!files.length) return [];
  return query<TaskRef>(`select instance_id as id, kind, repo from read_parquet([${files.map(sqlString).join(', ')}]) order by instance_id`);
}

async function licenseMix(files: string[]): Promise<Record<string, number>> {
  if (!files.length) return {};
  const rows = await query<{ license: string; n: bigint }>(
    `select license, count(*) as n from read_parquet([${files.map(sqlString).join(', ')}]) group by license`,
  );
  return Object.fromEntries(rows.map((r) => [r.license, Number(r.n)]));
}

async function* keepOnly(
  rows: AsyncIterable<Record<string, unknown>>,
  keep: (row: Record<string, unknown>) => boolean,
): AsyncGenerator<Record<string, unknown>> {
  for await (const r of rows) if (keep(r)) yield r;
}

/** One pass over the tasks: a corpus has thousands of repositories and millions of tasks. */
function repoShares(refs: TaskRef[], plan: MixPlan): RebalanceReport['repos'] {
  const counts = new Map<string, { before: number; after: number }>();
  for (const t of refs) {
    const c = counts.get(t.repo) ?? { before: 0, after: 0 };
    c.before += 1;
    if (plan.keep.has(t.id)) c.after += 1;
    counts.set(t.repo, c);
  }
  const kept = plan.keep.size;
  return [...counts.keys()].sort().map((repo) => {
    const { before, after } = counts.get(repo)!;
    const dropped = plan.droppedByRepo[repo] ?? { issue_fix: 0, mutation_fix: 0 };
    return {
      repo,
      tasks_before: before,
      tasks_after: after,
      share_before: before / refs.length,
      share_after: kept ? after / kept : null,
      dropped_issue_fix: dropped.issue_fix,
      dropped_mutation_fix: dropped.mutation_fix,
    };
  });
}

/**
 * Plans the mix first: an unreachable target throws MixUnreachable before anything is written.
 * Then writes `out` with the source's layout and provenance (plus the new mix), and verifies it.
 */
export async function rebalanceDataset(
  datasetArg: string,
  outArg: string,
  target: number,
  opts: { seed?: string; tolerance?: number } = {},
): Promise<RebalanceReport> {
  const dataset = resolve(datasetArg);
  const out = resolve(outArg);
  const seed = opts.seed ?? DEFAULT_MIX_SEED;
  const manifest = readManifestJson(dataset);
  checkOut(dataset, out);
  checkShards(dataset, manifest.shards);
  const shardFiles = (config: string) => manifest.shards.filter((s) => s.config === config).map((s) => join(dataset, s.path));
  const refs = await taskRefs(shardFiles('tasks')).catch((e: unknown) => {
    throw asDamaged(dataset, e);
  });
  const plan = planMix(refs, target, { strict: true, seed, tolerance: opts.tolerance });
  const dropped = new Set(plan.dropped.map((t) => t.id));
  const keeps: Record<string, (row: Record<string, unknown>) => boolean> = {
    tasks: (r) => !dropped.has(r.instance_id as string),
    trajectories: (r) => !dropped.has(r.task_id as string),
    traces: (r) => r.task_id === null || !dropped.has(r.task_id as string),
  };
  const sources: ConfigSource[] = Object.keys(manifest.configs).map((config) => {
    const schema = SCHEMAS[config];
    if (!schema) throw new Error(`${dataset}: config "${config}" is not one Worldline writes (configs: ${Object.keys(SCHEMAS).join(', ')})`);
    const rows = readRows(dataset, { config });
    return { schema, rows: keeps[config] ? keepOnly(rows, keeps[config]) : rows };
  });
  const l = manifest.layout;
  const written = await writeDataset(out, sources, {
    shardBytes: l.shard_bytes,
    numShards: l.num_shards ?? undefined,
    shardMultiple: l.shard_multiple ?? undefined,
    rowGroupRows: l.row_group_rows,
    rowGroupBytes: l.row_group_bytes,
    pageSize: l.page_size,
    shuffle: l.shuffle,
    shuffleSeed: l.shuffle_seed ?? undefined,
    maxRowBytes: l.max_row_bytes,
    // The same tokenizer recounts the same counts; without one, the rows lose theirs.
    tokenizer: manifest.tokenizer?.name,
    maxRowTokens: manifest.tokenizer?.max_row_tokens ?? undefined,
    licenses: await licenseMix(shardFiles('repos')),
    // Rows were redacted and units excluded when the source was sharded: its counts stay the record.
    content: manifest.content ? () => manifest.content as ContentSummary : undefined,
    provenance: {
      ...manifest.provenance,
      mix: mixSummary(plan),
      rebalanced_from: { dataset, target, seed, created_at: new Date().toISOString() },
    },
  });
  const configs: RebalanceReport['configs'] = {};
  for (const [config, info] of Object.entries(manifest.configs)) {
    const after = written.configs[config].rows;
    configs[config] = { before: info.rows, after, dropped: info.rows - after };
  }
  const mix = {
    target,
    tolerance: plan.tolerance,
    before: plan.before,
    after: plan.after,
    dropped: plan.dropped.length,
    dropped_by_kind: { issue_fix: plan.before.issue_fix - plan.after.issue_fix, mutation_fix: plan.before.mutation_fix - plan.after.mutation_fix },
  };
  return { dataset, out, seed, mix, repos: repoShares(refs, plan), configs, verify: await verifyDataset(out) };
}

export function formatRebalance(r: RebalanceReport): string {
  const pct = (s: number | null) => (s === null ? 'n/a' : `${(s * 100).toFixed(1)}%`);
  const m = r.mix;
  return [
    `${r.dataset} -> ${r.out}`,
    `tasks: ${m.before.issue_fix} issue-fix + ${m.before.mutation_fix} mutation-fix (${pct(m.before.share)}) -> ${m.after.issue_fix} + ${m.after.mutation_fix} (${pct(m.after.share)}; target ${pct(m.target)}); dropped ${m.dropped}`,
    '',
    table([
      ['repo', 'dropped issue_fix', 'dropped mutation_fix', 'tasks before', 'tasks after', 'share before', 'share after'],
      ...r.repos.map((x) => [x.repo, x.dropped_issue_fix, x.dropped_mutation_fix, x.tasks_before, x.tasks_after, pct(x.share_before), pct(x.share_after)]),
    ]),
    '',
    table([['config', 'rows before', 'rows after', 'dropped'], ...Object.entries(r.configs).map(([c, v]) => [c, v.before, v.after, v.dropped])]),
    '',
    ...r.verify.problems.map((p) => `FAIL ${p}`),
    `verify: ${r.verify.ok ? 'OK' : 'FAILED'}: ${r.verify.shards} shard(s), ${r.verify.rows} row(s), ${r.verify.problems.length} problem(s)`,
  ].join('\n');
}
