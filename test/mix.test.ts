/** The task mix: which tasks a run or a rebalance keeps for a target issue-fix share. */
import { describe, expect, it } from 'vitest';
import { MixUnreachable, planMix, type TaskRef } from '../datasets/mix.js';

function tasks(spec: Record<string, [number, number]>): TaskRef[] {
  const out: TaskRef[] = [];
  for (const [repo, [issues, mutations]] of Object.entries(spec)) {
    for (let i = 0; i < issues; i++) out.push({ id: `${repo}.issue.${i}`, kind: 'issue_fix', repo });
    for (let i = 0; i < mutations; i++) out.push({ id: `${repo}.mut.${i}`, kind: 'mutation_fix', repo });
  }
  return out;
}

const count = (ts: TaskRef[], keep: Set<string>, pred: (t: TaskRef) => boolean) => ts.filter((t) => keep.has(t.id) && pred(t)).length;

describe('planMix', () => {
  it('drops only the over-represented kind, the fewest tasks that reach the target', () => {
    const ts = tasks({ a: [10, 50], b: [10, 30], c: [0, 20] }); // 20 issue, 100 mutation
    const plan = planMix(ts, 0.55);
    const issues = count(ts, plan.keep, (t) => t.kind === 'issue_fix');
    const mutations = count(ts, plan.keep, (t) => t.kind === 'mutation_fix');
    expect(issues).toBe(20);
    // 20 / (20 + m) closest to 0.55: m = 16 gives 55.6%, m = 17 gives 54.1%.
    expect(mutations).toBe(16);
    expect(plan.after).toEqual({ issue_fix: 20, mutation_fix: 16, share: 20 / 36 });
    expect(plan.reached).toBe(false); // 0.56 pt off: the counts cannot do better
    expect(plan.dropped).toHaveLength(84);
    expect(plan.dropped.every((t) => t.kind === 'mutation_fix')).toBe(true);
  });

  it('spreads drops over repositories so their shares move little', () => {
    const ts = tasks({ a: [100, 400], b: [100, 300], c: [0, 100] });
    const plan = planMix(ts, 0.55);
    expect(plan.reached).toBe(true);
    const kept = ts.filter((t) => plan.keep.has(t.id));
    for (const repo of ['a', 'b', 'c']) {
      const before = ts.filter((t) => t.repo === repo).length / ts.length;
      const after = kept.filter((t) => t.repo === repo).length / kept.length;
      expect(Math.abs(after - before), repo).toBeLessThan(0.06);
    }
    // Repository a cannot lose its issue fixes, so the mutation drops fall where the mutations are.
    expect(Object.values(plan.droppedByRepo).reduce((s, d) => s + d.mutation_fix, 0)).toBe(plan.dropped.length);
  });

  it('is deterministic for a seed and differs across seeds', () => {
    const ts = tasks({ a: [5, 40] });
    const ids = (seed: string) => [...planMix(ts, 0.5, { seed }).keep].sort();
    expect(ids('x')).toEqual(ids('x'));
    expect(ids('x')).not.toEqual(ids('y'));
  });

  it('keeps everything and warns when one kind is missing; never invents tasks', () => {
    const ts = tasks({ a: [0, 12] });
    const plan = planMix(ts, 0.55);
    expect(plan.keep.size).toBe(12);
    expect(plan.after.share).toBe(0);
    expect(plan.warning).toMatch(/only 0 issue-fix and 12 mutation-fix tasks/);
    expect(planMix([], 0.55).warning).toBeNull();
  });

  it('strict mode shrinks both kinds when the counts are too small, or says the target is unreachable', () => {
    const ts = tasks({ a: [3, 6], b: [17, 2] }); // 20 issue, 8 mutation
    // Keeping all 8 mutations, 9/17 = 52.9% and 10/18 = 55.6% both miss by more than half a point;
    // 6/11 = 54.5% is the largest combination within it.
    const plan = planMix(ts, 0.55, { strict: true });
    expect(plan.after).toMatchObject({ issue_fix: 6, mutation_fix: 5 });
    expect(Math.abs(plan.after.share! - 0.55)).toBeLessThanOrEqual(0.005);
    expect(planMix(ts, 0.55).after).toMatchObject({ issue_fix: 10, mutation_fix: 8 });
    expect(() => planMix(tasks({ a: [1, 1] }), 0.55, { strict: true })).toThrow(MixUnreachable);
    expect(() => planMix(tasks({ a: [0, 5] }), 0.55, { strict: true })).toThrow(/no issue-fix tasks/);
    expect(() => planMix(ts, 1.5)).toThrow(RangeError);
  });
});
