/**
 * Stage `forage`: ForagerAgent's tasks for a unit: mutation-fix tasks (tasks/mutation_tasks.ts) and
 * issue-fix tasks mined from its history (tasks/issue_verification.ts), each worked by the chosen
 * policy in its own container and graded (agent/), and traced before and after its fix
 * (tasks/fix_traces.ts). Tasks and trajectories go to the unit's part files.
 */
import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { concatFiles, writeFileAtomic } from '../../core/atomic.js';
import { hashOf, sha256 } from '../../core/hashing.js';
import { readRows } from '../../datasets/reader.js';
import type { TaskRecord } from '../../schemas/tasks.js';
import type { TrajectoryRecord } from '../../schemas/trajectories.js';
import { openaiPolicy } from '../agent/policies/openai.js';
import { oraclePolicy } from '../agent/policies/oracle.js';
import { type ReplayPolicy, replayBudgets, replayPolicy } from '../agent/policies/replay.js';
import type { Policy } from '../agent/policy.js';
import { type Budgets, rollout } from '../agent/rollout.js';
import { checkBudget, earnedS, measuredStartupS, validatedDurations } from '../runtime/budgets.js';
import { outLayout } from '../runtime/layout.js';
import type { BuildRecord, CloneRecord, TaskCost, TraceCut } from '../runtime/records.js';
import { ok, requireRecord, type Stage, type StageContext } from '../runtime/stage.js';
import { TRACER_CODE, tracerCodeHash } from '../sandbox/tracers.js';
import { traceAroundFix } from '../tasks/fix_traces.js';
import { type IssueText, readIssueExport } from '../tasks/issue_export.js';
import { type IssueMiningOutcome, mineIssueTasks } from '../tasks/issue_verification.js';
import { mutationTasks } from '../tasks/mutation_tasks.js';

const issueExports = new Map<string, Map<number, IssueText>>();
function issueExport(file: string | undefined): Map<number, IssueText> | undefined {
  if (!file) return undefined;
  if (!issueExports.has(file)) issueExports.set(file, readIssueExport(file));
  return issueExports.get(file);
}

const jsonl = (rows: object[]) => rows.map((r) => JSON.stringify(r)).join('\n') + (rows.length ? '\n' : '');

const FORAGE_REVISION = 4;

/** Recordings for the replay policy, by task id, read once per process. */
const recordings = new Map<string, Promise<Map<string, TrajectoryRecord>>>();
function recordingsFrom(dir: string): Promise<Map<string, TrajectoryRecord>> {
  let p = recordings.get(dir);
  if (!p) {
    p = (async () => {
      const byTask = new Map<string, TrajectoryRecord>();
      for await (const row of readRows(dir, { config: 'trajectories' })) byTask.set(row.task_id as string, row as unknown as TrajectoryRecord);
      return byTask;
    })();
    recordings.set(dir, p);
  }
  return p;
}

async function policyFor(
  ctx: StageContext,
  task: TaskRecord,
  budgets: Budgets,
  testTimeoutS: number,
): Promise<{ policy: Policy; budgets: Budgets; replay?: ReplayPolicy } | null> {
  const o = ctx.options;
  if (o.policy === 'oracle') return { policy: oraclePolicy(task, testTimeoutS), budgets };
  if (o.policy === 'openai')
    return {
      policy: openaiPolicy({
        ...o.openai!,
        onRetry: (r) => ctx.log(`openai ${task.instance_id}: retry ${r.attempt} after HTTP ${r.status ?? 'error'} and ${r.delayMs} ms`),
      }),
      budgets,
    };
  const recorded = (await recordingsFrom(o.replayFrom!)).get(task.instance_id);
  if (!recorded) {
    ctx.log(`replay ${task.instance_id}: no recording in ${o.replayFrom}; skipped`);
    return null;
  }
  const replay = replayPolicy(recorded);
  return { policy: replay, budgets: replayBudgets(recorded), replay };
}

/** One task worked by the policy and graded; null when the policy has nothing for it (replay). */
async function rolloutOne(
  ctx: StageContext,
  clone: CloneRecord,
  build: BuildRecord,
  task: TaskRecord,
  i: number,
  timing: { gradingS: number },
  testTimeoutS: number,
) {
  const o = ctx.options;
  if (o.policy === 'none') return null;
  const runEnv = { ...ctx.unit.env.vars, PYTHONPATH: clone.src_layout ? '/repo/src' : '', PYTHONDONTWRITEBYTECODE: '1', TZ: 'UTC' };
  const chosen = await policyFor(ctx, task, { maxTurns: o.maxTurns, maxTokens: o.maxTokens, maxWallS: o.maxWallS }, testTimeoutS);
  if (!chosen) return null;
  // Grading runs the fixed state's tests: validate timed them there (new tests of an issue fix were not).
  const validated = validatedDurations(o.out, ctx.unit.id);
  const graded = [...task.FAIL_TO_PASS, ...task.PASS_TO_PASS];
  const suiteBudgetS = graded.every((t) => validated.has(t))
    ? earnedS(measuredStartupS(ctx) + graded.reduce((s, t) => s + validated.get(t)!.seconds, 0))
    : undefined;
  const traj = await rollout(
    task,
    chosen.policy,
    chosen.budgets,
    { memoryMb: o.memoryMb, cpus: o.cpus, pids: o.pids, bashTimeoutS: o.bashTimeoutS, outputCap: 20_000 },
    runEnv,
    {
      options: o,
      srcLayout: clone.src_layout,
      vars: ctx.unit.env.vars,
      pytestArgs: ctx.unit.env.pytest_args,
      hasTimeoutPlugin: build.pytest_timeout,
      work: outLayout.work(o.out, 'grade', ctx.unit.id, String(i)),
      suiteBudgetS,
      timing,
    },
  );
  if (chosen.replay) {
    const diffs = chosen.replay.differences(traj);
    ctx.log(
      `replay ${task.instance_id}: ${diffs.length ? `observations differ at steps ${diffs.map((d) => d.step).join(', ')}` : 'every observation as recorded'}`,
    );
  }
  return traj;
}

/** A task done: kept in the unit's progress folder until the whole stage is. */
interface TaskDone {
  trajectory: TrajectoryRecord | null;
  cuts: TraceCut[];
  cost: TaskCost;
}

/** The unit's finished pieces of this forage (same key): a cut run continues from them. */
function progressFolder(ctx: StageContext, key: string): string {
  const dir = outLayout.progress(ctx.options.out, 'forage', ctx.unit.id);
  const keyFile = join(dir, 'key');
  if (!existsSync(keyFile) || readFileSync(keyFile, 'utf8') !== key) {
    rmSync(dir, { recursive: true, force: true });
    mkdirSync(dir, { recursive: true });
    writeFileSync(keyFile, key);
  }
  return dir;
}

/** A piece of work kept in the progress folder, or done now (once the budget allows) and kept. */
async function piece<T>(ctx: StageContext, file: string, what: string, work: () => Promise<T>): Promise<T> {
  if (existsSync(file)) {
    ctx.log(`forage ${ctx.unit.id}: ${what} done in an earlier run; kept`);
    return JSON.parse(readFileSync(file, 'utf8')) as T;
  }
  const result = await work();
  writeFileAtomic(file, JSON.stringify(result));
  return result;
}

async function findTasks(ctx: StageContext, clone: CloneRecord, build: BuildRecord, progress: string) {
  const m = await piece(ctx, join(progress, 'mutants.json'), 'the mutant check', () => {
    checkBudget(ctx, 'the mutant check, issue mining and every task');
    ctx.log(`forage ${ctx.unit.id}: trying up to ${ctx.options.mutationTries} mutations`);
    return mutationTasks(ctx, clone, build);
  });
  // Older commits (--commits) share the head's history: only the head mines it.
  if (ctx.unit.historyOf || ctx.options.issueCandidates === 0) return { m, mined: null as IssueMiningOutcome | null, miningS: 0 };
  const issues = await piece(ctx, join(progress, 'issues.json'), 'issue mining', async () => {
    checkBudget(ctx, 'issue mining and every task');
    const started = Date.now();
    const mined = await mineIssueTasks(ctx, clone, build, { issues: issueExport(ctx.options.issuesFile), maxCandidates: ctx.options.issueCandidates });
    return { mined, miningS: (Date.now() - started) / 1000 };
  });
  return { m, ...issues };
}

const sum = (xs: number[]) => Math.round(xs.reduce((s, x) => s + x, 0) * 1000) / 1000;

export const forageStage: Stage<'forage'> = {
  name: 'forage',
  key(ctx) {
    const build = requireRecord(ctx, 'build');
    const trace = requireRecord(ctx, 'trace');
    const o = ctx.options;
    return {
      image: build.image_id,
      trace: [trace.episodes, trace.line_events, trace.tracer_version],
      // Forage runs mutants, the agent's tools, grading and the tracer around each fix.
      code: tracerCodeHash([...TRACER_CODE.mutants, ...TRACER_CODE.agent, ...TRACER_CODE.tracer]),
      seed: o.forageSeed,
      tries: o.mutationTries,
      perUnit: o.mutationsPerUnit,
      testTimeout: o.mutantTestTimeoutS,
      policy: [o.policy, o.openai?.model ?? null, o.openai?.temperature ?? null, o.openai?.topP ?? null, o.openai?.seed ?? null, o.replayFrom ?? null],
      issues: [o.issueCandidates, o.issuesFile ? sha256(readFileSync(o.issuesFile)) : null],
      budgets: [o.maxTurns, o.maxTokens, o.maxWallS, o.bashTimeoutS],
      revision: FORAGE_REVISION,
    };
  },
  async run(ctx: StageContext) {
    const clone = requireRecord(ctx, 'clone');
    const build = requireRecord(ctx, 'build');
    const o = ctx.options;
    const progress = progressFolder(ctx, hashOf(await forageStage.key(ctx)));
    const { m, mined, miningS } = await findTasks(ctx, clone, build, progress);
    for (const d of mined?.dropped ?? []) ctx.log(`forage ${ctx.unit.id}: issue candidate ${d.fix_commit.slice(0, 12)} dropped: ${d.reason}`);
    const tasks = [...m.tasks, ...(mined?.tasks ?? [])];
    const validated = validatedDurations(o.out, ctx.unit.id);
    const done: TaskDone[] = [];
    for (const [i, task] of tasks.entries()) {
      const entry = await piece(ctx, join(progress, `task-${i}.json`), `task ${i + 1} of ${tasks.length}`, async (): Promise<TaskDone> => {
        checkBudget(ctx, `tasks ${i + 1}..${tasks.length} of ${tasks.length} (from ${task.instance_id})`);
        const timing = { gradingS: 0 };
        const started = Date.now();
        // The oracle's test runs on the task state get the mutant check's earned per-test timeout.
        const testTimeoutS = task.kind === 'mutation_fix' ? m.testTimeoutS : o.mutantTestTimeoutS;
        const trajectory = await rolloutOne(ctx, clone, build, task, i, timing, testTimeoutS);
        const rolloutS = (Date.now() - started) / 1000 - timing.gradingS;
        const measured = { before: new Map(Object.entries(m.measured[task.instance_id] ?? {})), after: validated };
        const traced = await traceAroundFix(
          ctx,
          task,
          clone,
          build,
          measured,
          outLayout.work(o.out, 'task-traces', ctx.unit.id, String(i)),
          join(progress, `traces-${i}.jsonl`),
        );
        return {
          trajectory,
          cuts: traced.cuts,
          cost: { task_id: task.instance_id, kind: task.kind, rollout: sum([rolloutS]), grading: sum([timing.gradingS]), ...traced.seconds },
        };
      });
      done.push(entry);
    }
    const trajectories = done.flatMap((d) => (d.trajectory ? [d.trajectory] : []));
    const traceParts = tasks.map((_, i) => join(progress, `traces-${i}.jsonl`)).filter((f) => existsSync(f));
    const taskTraceRows = concatFiles(traceParts, outLayout.part(o.out, 'task_traces', ctx.unit.id));
    writeFileAtomic(outLayout.part(o.out, 'trajectories', ctx.unit.id), jsonl(trajectories));
    writeFileAtomic(outLayout.part(o.out, 'tasks', ctx.unit.id), jsonl(tasks));
    rmSync(progress, { recursive: true, force: true });
    const cuts = done.flatMap((d) => d.cuts);
    for (const c of cuts) ctx.log(`forage ${ctx.unit.id}: ${c.task_id} ${c.phase} ${c.node_id}: ${c.reason}`);
    const costs = done.map((d) => d.cost);
    const phases = ['rollout', 'grading', 'container', 'patch_apply', 'pytest_startup', 'traced_tests'] as const;
    ctx.log(`forage ${ctx.unit.id}: ${m.tasks.length} mutation tasks kept (${m.applied} applied, ${m.survived} survived, ${m.noSite} without a site)`);
    const resolved = trajectories.filter((t) => t.resolved).length;
    if (trajectories.length) ctx.log(`forage ${ctx.unit.id}: ${ctx.options.policy} resolved ${resolved} of ${trajectories.length} tasks`);
    return ok({
      issue_candidates: mined?.candidates ?? 0,
      issue_tasks: mined?.tasks.length ?? 0,
      issues_dropped: mined?.dropped.length ?? 0,
      task_trace_rows: taskTraceRows,
      policy: ctx.options.policy,
      rollouts: trajectories.length,
      resolved,
      mutation_tries: m.tried,
      mutations_applied: m.applied,
      mutations_without_site: m.noSite,
      mutations_survived: m.survived,
      mutation_tasks: m.tasks.length,
      tasks_by_operator: m.byOperator,
      trace_cuts: cuts,
      mutant_test_timeout_s: m.testTimeoutS,
      seconds_by_phase: {
        mutant_check: sum([m.seconds]),
        issue_mining: sum([miningS]),
        ...Object.fromEntries(phases.map((p) => [p, sum(costs.map((c) => c[p]))])),
      },
      task_seconds: costs,
    });
  },
};
