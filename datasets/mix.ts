/**
 * The task mix: which tasks to keep so that the issue-fix share meets a target (CWM: 55% issue
 * fixes, 45% mutation fixes). Shared by the run (`--issue-fix-share`, at shard time, where the
 * whole run's tasks are known) and by `worldline rebalance` on a finished dataset.
 *
 * Tasks are only ever dropped, never invented. Priorities, in order: reach the target; drop as
 * few tasks as possible (so only the over-represented kind shrinks when that suffices); keep each
 * repository's share of the tasks as close to what it was as possible (drops are spread over
 * repositories in proportion to their size, capped by what each has of the shrinking kind).
 */
import { createHash } from 'node:crypto';

export type TaskKind = 'issue_fix' | 'mutation_fix';

export interface TaskRef {
  id: string;
  kind: string;
  repo: string;
}

export interface KindCounts {
  issue_fix: number;
  mutation_fix: number;
  /** issue_fix / (issue_fix + mutation_fix), or null without tasks. */
  share: number | null;
}

export interface MixPlan {
  target: number;
  tolerance: number;
  before: KindCounts;
  after: KindCounts;
  /** Whether the share kept is within the tolerance of the target. */
  reached: boolean;
  keep: Set<string>;
  dropped: TaskRef[];
  /** Dropped tasks by repository and kind, for the report. */
  droppedByRepo: Record<string, { issue_fix: number; mutation_fix: number }>;
  /** Why the target was not reached, when it was not. */
  warning: string | null;
}

export class MixUnreachable extends Error {}

/** CWM's split: 55% of the agent tasks fix real issues, 45% injected mutations. */
export const DEFAULT_ISSUE_FIX_SHARE = 0.55;

/** The seed of which tasks of a kind are dropped, shared by the run's shard step and rebalance. */
export const DEFAULT_MIX_SEED = 'worldline-mix';

/** Half a percentage point: what `rebalance` promises. */
export const MIX_TOLERANCE = 0.005;

/** Shares are floating point (0.5 - 0.55 is 0.050000000000000044): "within the tolerance" allows for that. */
const within = (distance: number, tolerance: number) => distance <= tolerance + 1e-12;

const shareOf = (i: number, m: number): number | null => (i + m ? i / (i + m) : null);
const counts = (i: number, m: number): KindCounts => ({ issue_fix: i, mutation_fix: m, share: shareOf(i, m) });
const pct = (s: number | null) => (s === null ? 'n/a' : `${(s * 100).toFixed(1)}%`);

/** Issue-fix counts near the ideal for `m` mutation fixes, within [0, maxI]. */
function issueCandidates(m: number, target: number, maxI: number): number[] {
  if (target >= 1) return [maxI];
  const ideal = (target * m) / (1 - target);
  return [...new Set([Math.floor(ideal), Math.ceil(ideal)].map((i) => Math.min(maxI, Math.max(0, i))))];
}

/** Mutation-fix counts near the ideal for `i` issue fixes, within [0, maxM]. */
function mutationCandidates(i: number, target: number, maxM: number): number[] {
  if (target <= 0) return [maxM];
  const ideal = (i * (1 - target)) / target;
  return [...new Set([Math.floor(ideal), Math.ceil(ideal)].map((m) => Math.min(maxM, Math.max(0, m))))];
}

/** The (issue, mutation) counts to keep. */
function chooseCounts(I: number, M: number, target: number, tolerance: number, strict: boolean): [number, number] {
  const err = (i: number, m: number) => Math.abs((shareOf(i, m) ?? target) - target);
  const best = (pairs: [number, number][]) => pairs.filter(([i, m]) => i + m > 0).sort((a, b) => err(...a) - err(...b) || b[0] + b[1] - (a[0] + a[1]))[0];
  if (I === 0 || M === 0 || within(err(I, M), tolerance)) return [I, M];
  // Shrink only the over-represented kind: the fewest drops when it reaches the target.
  const over = (shareOf(I, M) ?? 0) > target;
  const oneKind = best(over ? issueCandidates(M, target, I).map((i) => [i, M]) : mutationCandidates(I, target, M).map((m) => [I, m]));
  if (!strict || within(err(...oneKind), tolerance)) return oneKind;
  // Small counts can miss the target by more than the tolerance; shrink the other kind too,
  // one task at a time, and take the first (largest) combination that lands within it.
  for (let n = over ? M - 1 : I - 1; n >= 1; n--) {
    const pair = best(over ? issueCandidates(n, target, I).map((i) => [i, n]) : mutationCandidates(n, target, M).map((m) => [n, m]));
    if (pair && within(err(...pair), tolerance)) return pair;
  }
  return oneKind;
}

/**
 * The share nearest `target` that dropping tasks from `i` issue-fix and `m` mutation-fix ones can
 * give (what `rebalance` would keep), and whether it lies within `tolerance`: a dataset already
 * there is as close as its tasks allow, and no rebalance improves it.
 */
export function closestMix(i: number, m: number, target: number, tolerance = MIX_TOLERANCE): KindCounts & { reached: boolean } {
  const kept = counts(...chooseCounts(i, m, target, tolerance, true));
  return { ...kept, reached: kept.share !== null && within(Math.abs(kept.share - target), tolerance) };
}

/** Drop counts per repository: in proportion to each repository's tasks, capped by what it has of `kind`. */
function apportion(drop: number, sizes: Map<string, number>, available: Map<string, number>): Map<string, number> {
  const repos = [...available.keys()].filter((r) => (available.get(r) ?? 0) > 0).sort();
  const at = (lambda: number) => repos.reduce((s, r) => s + Math.min(available.get(r)!, lambda * sizes.get(r)!), 0);
  let lo = 0;
  let hi = 1;
  while (at(hi) < drop && hi < 1e12) hi *= 2;
  for (let k = 0; k < 100; k++) {
    const mid = (lo + hi) / 2;
    if (at(mid) < drop) lo = mid;
    else hi = mid;
  }
  const exact = repos.map((r) => Math.min(available.get(r)!, hi * sizes.get(r)!));
  const whole = exact.map(Math.floor);
  let left = drop - whole.reduce((a, b) => a + b, 0);
  // Largest remainder first; ties go to the larger repository, then by name.
  const order = repos
    .map((_, i) => i)
    .sort((a, b) => exact[b] - whole[b] - (exact[a] - whole[a]) || sizes.get(repos[b])! - sizes.get(repos[a])! || (repos[a] < repos[b] ? -1 : 1));
  for (const i of order) {
    if (left <= 0) break;
    if (whole[i] < available.get(repos[i])!) {
      whole[i]++;
      left--;
    }
  }
  return new Map(repos.map((r, i) => [r, whole[i]]));
}

const rank = (seed: string, id: string) => createHash('sha256').update(`${seed}\0${id}`).digest('hex');

/**
 * Which tasks to keep for `target`. With `strict`, a target that cannot be met within the
 * tolerance throws MixUnreachable (rebalance); without it, the closest share is kept and the
 * plan carries a warning (a run that simply has too few tasks of one kind).
 */
export function planMix(tasks: TaskRef[], target: number, opts: { tolerance?: number; strict?: boolean; seed?: string } = {}): MixPlan {
  if (!(target >= 0 && target <= 1)) throw new RangeError(`the issue-fix share must be between 0 and 1 (got ${target})`);
  const tolerance = opts.tolerance ?? MIX_TOLERANCE;
  const seed = opts.seed ?? '';
  for (const t of tasks) if (t.kind !== 'issue_fix' && t.kind !== 'mutation_fix') throw new Error(`task ${t.id}: unknown kind "${t.kind}"`);
  const I = tasks.filter((t) => t.kind === 'issue_fix').length;
  const M = tasks.length - I;
  if (opts.strict) {
    if (target > 0 && I === 0)
      throw new MixUnreachable(`cannot reach an issue-fix share of ${pct(target)}: the dataset has no issue-fix tasks (${M} mutation-fix)`);
    if (target < 1 && M === 0)
      throw new MixUnreachable(`cannot reach an issue-fix share of ${pct(target)}: the dataset has no mutation-fix tasks (${I} issue-fix)`);
  }
  const [keepI, keepM] = chooseCounts(I, M, target, tolerance, opts.strict ?? false);
  const after = counts(keepI, keepM);
  const reached = after.share !== null && within(Math.abs(after.share - target), tolerance);
  if (opts.strict && !reached) {
    throw new MixUnreachable(
      `cannot reach an issue-fix share of ${pct(target)} within ${(tolerance * 100).toFixed(1)} points from ${I} issue-fix and ${M} mutation-fix tasks (closest: ${pct(after.share)} with ${keepI} + ${keepM})`,
    );
  }
  const sizes = new Map<string, number>();
  for (const t of tasks) sizes.set(t.repo, (sizes.get(t.repo) ?? 0) + 1);
  const dropped: TaskRef[] = [];
  for (const [kind, drop] of [
    ['issue_fix', I - keepI],
    ['mutation_fix', M - keepM],
  ] as const) {
    if (drop === 0) continue;
    const ofKind = tasks.filter((t) => t.kind === kind);
    const available = new Map<string, number>();
    for (const t of ofKind) available.set(t.repo, (available.get(t.repo) ?? 0) + 1);
    const perRepo = apportion(drop, sizes, available);
    const byRepo = new Map<string, { t: TaskRef; rank: string }[]>();
    for (const t of ofKind) {
      const list = byRepo.get(t.repo) ?? [];
      if (!list.length) byRepo.set(t.repo, list);
      list.push({ t, rank: rank(seed, t.id) });
    }
    for (const [repo, n] of perRepo) {
      if (!n) continue;
      const ranked = byRepo.get(repo)!.sort((a, b) => (a.rank < b.rank ? -1 : a.rank > b.rank ? 1 : 0));
      for (const { t } of ranked.slice(0, n)) dropped.push(t);
      sizes.set(repo, sizes.get(repo)! - n);
    }
  }
  const droppedIds = new Set(dropped.map((t) => t.id));
  const droppedByRepo: MixPlan['droppedByRepo'] = {};
  for (const t of dropped) {
    droppedByRepo[t.repo] ??= { issue_fix: 0, mutation_fix: 0 };
    droppedByRepo[t.repo][t.kind as TaskKind]++;
  }
  const warning =
    reached || tasks.length === 0
      ? null
      : `issue-fix share ${pct(after.share)} (target ${pct(target)}): ${I === 0 || M === 0 ? `only ${I} issue-fix and ${M} mutation-fix tasks, all kept` : `the closest reachable from ${I} issue-fix and ${M} mutation-fix tasks`}`;
  return {
    target,
    tolerance,
    before: counts(I, M),
    after,
    reached,
    keep: new Set(tasks.map((t) => t.id).filter((id) => !droppedIds.has(id))),
    dropped,
    droppedByRepo,
    warning,
  };
}

/** The plan as it goes into a dataset's provenance and a command's report (no id sets). */
export function mixSummary(plan: MixPlan): Record<string, unknown> {
  return {
    target: plan.target,
    before: plan.before,
    after: plan.after,
    reached: plan.reached,
    dropped: plan.dropped.length,
    dropped_by_repo: plan.droppedByRepo,
    warning: plan.warning,
  };
}
