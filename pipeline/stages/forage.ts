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
import { mapLimit } from '../../core/map_limit.js';
import { readRows } from '../../datasets/reader.js';
import type { TaskRecord } from '../../schemas/tasks.js';
import type { TrajectoryRecord } from '../../schemas/trajectories.js';
import type { AfterGrading, GradeEnv } from '../agent/grading.js';
import { openaiPolicy } from '../agent/policies/openai.js';
import { oraclePolicy, oracleTurns } from '../agent/policies/oracle.js';
import { type ReplayPolicy, replayBudgets, replayOutcome, replayPolicy } from '../agent/policies/replay.js';
import type { Policy } from '../agent/policy.js';
import { agentRunEnv, type Budgets, rollout } from '../agent/rollout.js';
import { checkBudget, earnedS, measuredStartupS, validatedDurations } from '../runtime/budgets.js';
import { spoiled, workMark } from '../runtime/job_scope.js';
import { outLayout } from '../runtime/layout.js';
import { redactRows, unitRedactor } from '../runtime/part_redaction.js';
import type { BuildRecord, CandidateFate, CloneRecord, TaskCost, TraceCut } from '../runtime/records.js';
import { ok, requireRecord, type Stage, type StageContext } from '../runtime/stage.js';
import { TRACER_CODE, tracerCodeHash } from '../sandbox/tracers.js';
import { type TaskTraceOutcome, traceAroundFix, traceSteps } from '../tasks/fix_traces.js';
import { type IssueText, readIssueExport } from '../tasks/issue_export.js';
import { type IssueMiningOutcome, mineIssueTasks } from '../tasks/issue_verification.js';
import { mutationTasks } from '../tasks/mutation_tasks.js';
import { modelStatementWriter } from '../tasks/statement_model.js';

const issueExports = new Map<string, Map<number, IssueText>>();
function issueExport(file: string | undefined): Map<number, IssueText> | undefined {
  if (!file) return undefined;
  if (!issueExports.has(file)) issueExports.set(file, readIssueExport(file));
  return issueExports.get(file);
}

const jsonl = (rows: object[]) => rows.map((r) => JSON.stringify(r)).join('\n') + (rows.length ? '\n' : '');

/** Bump when forage's output changes for the same inputs: 5, an issue task's hung test traced to its measured timeout. */
const FORAGE_REVISION = 5;

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
): Promise<{ policy: Policy; budgets: Budgets; replay?: ReplayPolicy; recorded?: TrajectoryRecord } | null> {
  const o = ctx.options;
  // The oracle's plan grows with the gold patch (a view per file, an edit per hunk): its budget does too.
  if (o.policy === 'oracle')
    return { policy: oraclePolicy(task, testTimeoutS), budgets: { ...budgets, maxTurns: Math.max(budgets.maxTurns, oracleTurns(task)) } };
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
  return { policy: replay, budgets: replayBudgets(recorded), replay, recorded };
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
  afterGold: GradeEnv['afterGold'],
) {
  const o = ctx.options;
  if (o.policy === 'none') return null;
  const runEnv = agentRunEnv(ctx.unit.env.vars, clone.src_layout);
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
      afterGold,
    },
  );
  if (chosen.replay) {
    Object.assign(traj, replayOutcome(chosen.recorded!, traj, chosen.replay));
    const diffs = traj.replay_diffs;
    ctx.log(
      `replay ${task.instance_id}: ${diffs.length ? `differs at ${diffs.map((d) => (d.step === null ? d.what : `step ${d.step}`)).join(', ')}` : 'replayed exactly'}`,
    );
  }
  return traj;
}

/** A task done: kept in the unit's progress folder until the whole stage is. */
interface TaskDone {
  trajectory: TrajectoryRecord | null;
  cuts: TraceCut[];
  cost: TaskCost;
  /** Why the oracle could not resolve the task: it is dropped (only solvable tasks are kept). */
  unsolved?: string;
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
  const mark = workMark();
  const result = await work();
  // A piece its containers were taken from under (a stop, a cancelled job, an engine restart) is
  // not the undisturbed run's result: not kept, so the next run does it again.
  if (!spoiled(mark)) writeFileAtomic(file, JSON.stringify(result));
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
    const mined = await mineIssueTasks(ctx, clone, build, {
      issues: issueExport(ctx.options.issuesFile),
      maxCandidates: ctx.options.issueCandidates,
      writeStatement: ctx.options.statementModel && ctx.options.openai ? modelStatementWriter(ctx.options.openai) : undefined,
    });
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
      code: tracerCodeHash([...TRACER_CODE.mutants, ...TRACER_CODE.agent, ...TRACER_CODE.toolServer, ...TRACER_CODE.tracer]),
      seed: o.forageSeed,
      tries: o.mutationTries,
      perUnit: o.mutationsPerUnit,
      testTimeout: o.mutantTestTimeoutS,
      traceCaps: o.traceCaps,
      policy: [o.policy, o.openai?.model ?? null, o.openai?.temperature ?? null, o.openai?.topP ?? null, o.openai?.seed ?? null, o.replayFrom ?? null],
      issues: [o.issueCandidates, o.issuesFile ? sha256(readFileSync(o.issuesFile)) : null, o.statementModel ? [o.openai?.baseURL, o.openai?.model] : null],
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
    const found = [...m.tasks, ...(mined?.tasks ?? [])];
    const validated = validatedDurations(o.out, ctx.unit.id);
    /** One task: rolled out, graded and traced around its fix. */
    const workTask = async (i: number, task: TaskRecord): Promise<TaskDone> => {
      const timing = { gradingS: 0 };
      const started = Date.now();
      // The oracle's test runs on the task state get the mutant check's earned per-test timeout.
      const testTimeoutS = task.kind === 'mutation_fix' ? m.testTimeoutS : o.mutantTestTimeoutS;
      const measured = { before: new Map(Object.entries(m.measured[task.instance_id] ?? mined?.measured[task.instance_id] ?? {})), after: validated };
      const rowsFile = join(progress, `traces-${i}.jsonl`);
      // A gold submission (the oracle's) is traced in its grading container: one container less.
      let folded: TaskTraceOutcome | null = null;
      let foldedS = 0;
      const afterGold = (work: string): AfterGrading => {
        const t = traceSteps(ctx, task, clone, build, measured, work, rowsFile, 'graded');
        return {
          steps: t.steps,
          limitS: t.limitS,
          read: async (done, key, containerS) => {
            folded = await t.read(done, key, containerS);
            const spent = sum(Object.values(folded.seconds));
            foldedS += spent;
            return spent;
          },
        };
      };
      const trajectory = await rolloutOne(ctx, clone, build, task, i, timing, testTimeoutS, afterGold);
      // The traces' seconds in a grading container are theirs (below), neither grading's nor the rollout's.
      const rolloutS = (Date.now() - started) / 1000 - timing.gradingS - foldedS;
      const cost = { task_id: task.instance_id, kind: task.kind, rollout: sum([rolloutS]), grading: sum([timing.gradingS]) };
      // Only solvable tasks: one the oracle (the gold patch, through the real tools) cannot resolve is dropped, with why, untraced.
      if (o.policy === 'oracle' && trajectory && !trajectory.resolved) {
        const last = trajectory.steps.at(-1)?.observation.replace(/\s+/g, ' ').slice(0, 200) ?? '';
        const unsolved = `the oracle did not resolve it (${trajectory.exit_status} after ${trajectory.turns} of ${trajectory.max_turns} turns; last observation: ${last})`;
        rmSync(rowsFile, { force: true });
        return {
          trajectory: null,
          cuts: [],
          cost: { ...cost, container: 0, patch_apply: 0, pytest_startup: 0, tracer_around_tests: 0, traced_tests: 0 },
          unsolved,
        };
      }
      const traced =
        folded ?? (await traceAroundFix(ctx, task, clone, build, measured, outLayout.work(o.out, 'task-traces', ctx.unit.id, String(i)), rowsFile));
      return { trajectory, cuts: traced.cuts, cost: { ...cost, ...traced.seconds } };
    };
    // Tasks are independent (own containers, work folders and progress files, results by index):
    // --task-concurrency of them at once keep both cores busy through each one's engine round
    // trips and container starts, and the rows come out in the tasks' order either way.
    let finished = 0;
    let inFlight = 0;
    let inFlightMax = 0;
    ctx.steps?.(0, found.length, 'tasks');
    const done = await mapLimit([...found.entries()], o.taskConcurrency, async ([i, task]) => {
      const entry = await piece(ctx, join(progress, `task-${i}.json`), `task ${i + 1} of ${found.length}`, async (): Promise<TaskDone> => {
        checkBudget(ctx, `tasks ${i + 1}..${found.length} of ${found.length} (from ${task.instance_id})`);
        inFlightMax = Math.max(inFlightMax, ++inFlight);
        try {
          return await workTask(i, task);
        } finally {
          inFlight -= 1;
        }
      });
      finished += 1;
      ctx.steps?.(finished, found.length, 'tasks');
      return entry;
    });
    const fates = mined?.fates ?? [];
    for (const [i, d] of done.entries()) {
      if (!d.unsolved) continue;
      const task = found[i];
      const fate = fates.find((f: CandidateFate) => f.fate === 'kept' && f.fix_commit === task.fix_commit);
      if (fate) Object.assign(fate, { fate: 'dropped', reason: d.unsolved, seconds: Math.round((fate.seconds + d.cost.rollout + d.cost.grading) * 100) / 100 });
      else ctx.log(`forage ${ctx.unit.id}: ${task.kind} task ${task.instance_id} dropped: ${d.unsolved}`);
    }
    const tasks = found.filter((_, i) => !done[i].unsolved);
    for (const f of fates) {
      if (f.fate !== 'kept') ctx.log(`forage ${ctx.unit.id}: issue candidate ${f.fix_commit.slice(0, 12)} ${f.fate}: ${f.reason}`);
    }
    const issueTasks = tasks.filter((t) => t.kind === 'issue_fix').length;
    if (mined)
      ctx.log(
        `forage ${ctx.unit.id}: ${mined.candidates} issue candidates tried, ${issueTasks} kept, ${fates.filter((f) => f.fate === 'dropped').length} dropped, ${fates.filter((f) => f.fate === 'skipped').length} commits skipped`,
      );
    const trajectories = done.flatMap((d) => (d.trajectory ? [d.trajectory] : []));
    const traceParts = found.map((_, i) => join(progress, `traces-${i}.jsonl`)).filter((f) => existsSync(f));
    const redactor = unitRedactor(o, ctx.unit);
    const redactLine = redactor ? (line: string) => JSON.stringify(redactor.row('traces', JSON.parse(line))) : undefined;
    const taskTraceRows = concatFiles(traceParts, outLayout.part(o.out, 'task_traces', ctx.unit.id), redactLine);
    writeFileAtomic(outLayout.part(o.out, 'trajectories', ctx.unit.id), jsonl(redactRows(redactor, 'trajectories', trajectories)));
    writeFileAtomic(outLayout.part(o.out, 'tasks', ctx.unit.id), jsonl(redactRows(redactor, 'tasks', tasks)));
    rmSync(progress, { recursive: true, force: true });
    const cuts = done.flatMap((d) => d.cuts);
    for (const c of cuts) ctx.log(`forage ${ctx.unit.id}: ${c.task_id} ${c.phase} ${c.node_id}: ${c.reason}`);
    const costs = done.map((d) => d.cost);
    const phases = ['rollout', 'grading', 'container', 'patch_apply', 'pytest_startup', 'tracer_around_tests', 'traced_tests'] as const;
    ctx.log(`forage ${ctx.unit.id}: ${m.tasks.length} mutation tasks kept (${m.applied} applied, ${m.survived} survived, ${m.noSite} without a site)`);
    for (const t of m.treeRestored) ctx.log(`forage ${ctx.unit.id}: mutant check ${t.index}'s tests changed ${t.files.join(', ')}: restored before the next`);
    const resolved = trajectories.filter((t) => t.resolved).length;
    if (trajectories.length) ctx.log(`forage ${ctx.unit.id}: ${ctx.options.policy} resolved ${resolved} of ${trajectories.length} tasks`);
    return ok({
      issue_candidates: mined?.candidates ?? 0,
      candidates: fates,
      issue_tasks: issueTasks,
      issues_dropped: fates.filter((f) => f.fate === 'dropped').length,
      task_trace_rows: taskTraceRows,
      policy: ctx.options.policy,
      rollouts: trajectories.length,
      resolved,
      mutation_tries: m.tried,
      mutations_applied: m.applied,
      mutations_without_site: m.noSite,
      mutations_survived: m.survived,
      mutations_tree_restored: m.treeRestored,
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
      tasks_in_flight_max: inFlightMax,
    });
  },
};
