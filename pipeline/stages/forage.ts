/**
 * Stage `forage`: ForagerAgent's tasks for a unit: mutation-fix tasks (tasks/mutation_tasks.ts) and
 * issue-fix tasks mined from its history (tasks/issue_verification.ts), each worked by the chosen
 * policy in its own container and graded (agent/), and traced before and after its fix
 * (tasks/fix_traces.ts). Tasks and trajectories go to the unit's part files.
 */
import { readFileSync } from 'node:fs';
import { writeFileAtomic } from '../../core/atomic.js';
import { sha256 } from '../../core/hashing.js';
import { readRows } from '../../datasets/reader.js';
import type { TaskRecord } from '../../schemas/tasks.js';
import type { TrajectoryRecord } from '../../schemas/trajectories.js';
import { openaiPolicy } from '../agent/policies/openai.js';
import { oraclePolicy, oracleTurns } from '../agent/policies/oracle.js';
import { type ReplayPolicy, replayBudgets, replayOutcome, replayPolicy } from '../agent/policies/replay.js';
import type { Policy } from '../agent/policy.js';
import { type Budgets, rollout } from '../agent/rollout.js';
import { outLayout } from '../runtime/layout.js';
import type { BuildRecord, CandidateFate, CloneRecord } from '../runtime/records.js';
import { ok, requireRecord, type Stage, type StageContext } from '../runtime/stage.js';
import { TRACER_CODE, tracerCodeHash } from '../sandbox/tracers.js';
import { traceAroundFixes } from '../tasks/fix_traces.js';
import { type IssueText, readIssueExport } from '../tasks/issue_export.js';
import { mineIssueTasks } from '../tasks/issue_verification.js';
import { mutationTasks } from '../tasks/mutation_tasks.js';
import { modelStatementWriter } from '../tasks/statement_model.js';

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
): Promise<{ policy: Policy; budgets: Budgets; replay?: ReplayPolicy; recorded?: TrajectoryRecord } | null> {
  const o = ctx.options;
  // The oracle's plan grows with the gold patch (a view per file, an edit per hunk): its budget does too.
  if (o.policy === 'oracle')
    return { policy: oraclePolicy(task, o.mutantTestTimeoutS), budgets: { ...budgets, maxTurns: Math.max(budgets.maxTurns, oracleTurns(task)) } };
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

async function rolloutAll(ctx: StageContext, clone: CloneRecord, build: BuildRecord, tasks: TaskRecord[]): Promise<TrajectoryRecord[]> {
  const o = ctx.options;
  if (o.policy === 'none') return [];
  const pythonPath = [clone.src_layout ? '/repo/src' : '', ctx.unit.env.vars.PYTHONPATH].filter(Boolean).join(':');
  const runEnv = { ...ctx.unit.env.vars, PYTHONPATH: pythonPath, PYTHONDONTWRITEBYTECODE: '1', TZ: 'UTC' };
  const out: TrajectoryRecord[] = [];
  for (const [i, task] of tasks.entries()) {
    const chosen = await policyFor(ctx, task, { maxTurns: o.maxTurns, maxTokens: o.maxTokens, maxWallS: o.maxWallS });
    if (!chosen) continue;
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
      },
    );
    if (chosen.replay) {
      Object.assign(traj, replayOutcome(chosen.recorded!, traj, chosen.replay));
      const diffs = traj.replay_diffs;
      ctx.log(
        `replay ${task.instance_id}: ${diffs.length ? `differs at ${diffs.map((d) => (d.step === null ? d.what : `step ${d.step}`)).join(', ')}` : 'replayed exactly'}`,
      );
    }
    out.push(traj);
  }
  return out;
}

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
      issues: [o.issueCandidates, o.issuesFile ? sha256(readFileSync(o.issuesFile)) : null, o.statementModel ? [o.openai?.baseURL, o.openai?.model] : null],
      budgets: [o.maxTurns, o.maxTokens, o.maxWallS, o.bashTimeoutS],
      revision: FORAGE_REVISION,
    };
  },
  async run(ctx: StageContext) {
    const clone = requireRecord(ctx, 'clone');
    const build = requireRecord(ctx, 'build');
    ctx.log(`forage ${ctx.unit.id}: trying up to ${ctx.options.mutationTries} mutations`);
    const m = await mutationTasks(ctx, clone, build);
    // Older commits (--commits) share the head's history: only the head mines it.
    const mined =
      ctx.unit.historyOf || ctx.options.issueCandidates === 0
        ? null
        : await mineIssueTasks(ctx, clone, build, {
            issues: issueExport(ctx.options.issuesFile),
            maxCandidates: ctx.options.issueCandidates,
            writeStatement: ctx.options.statementModel && ctx.options.openai ? modelStatementWriter(ctx.options.openai) : undefined,
          });
    let tasks = [...m.tasks, ...(mined?.tasks ?? [])];
    let trajectories = await rolloutAll(ctx, clone, build, tasks);
    const fates = mined?.fates ?? [];
    // Only solvable tasks: one the oracle (the gold patch, through the real tools) cannot resolve is dropped, with why.
    if (ctx.options.policy === 'oracle') {
      const unresolved = new Map(trajectories.filter((t) => !t.resolved).map((t) => [t.task_id, t]));
      for (const task of tasks.filter((t) => unresolved.has(t.instance_id))) {
        const t = unresolved.get(task.instance_id)!;
        const last = t.steps.at(-1)?.observation.replace(/\s+/g, ' ').slice(0, 200) ?? '';
        const reason = `the oracle did not resolve it (${t.exit_status} after ${t.turns} of ${t.max_turns} turns; last observation: ${last})`;
        const fate = fates.find((f: CandidateFate) => f.fate === 'kept' && f.fix_commit === task.fix_commit);
        if (fate) Object.assign(fate, { fate: 'dropped', reason, seconds: Math.round((fate.seconds + t.wall_seconds) * 100) / 100 });
        else ctx.log(`forage ${ctx.unit.id}: ${task.kind} task ${task.instance_id} dropped: ${reason}`);
      }
      tasks = tasks.filter((t) => !unresolved.has(t.instance_id));
      trajectories = trajectories.filter((t) => t.resolved);
    }
    for (const f of fates) {
      if (f.fate !== 'kept') ctx.log(`forage ${ctx.unit.id}: issue candidate ${f.fix_commit.slice(0, 12)} ${f.fate}: ${f.reason}`);
    }
    const issueTasks = tasks.filter((t) => t.kind === 'issue_fix').length;
    if (mined)
      ctx.log(
        `forage ${ctx.unit.id}: ${mined.candidates} issue candidates tried, ${issueTasks} kept, ${fates.filter((f) => f.fate === 'dropped').length} dropped, ${fates.filter((f) => f.fate === 'skipped').length} commits skipped`,
      );
    const taskTraceRows = await traceAroundFixes(ctx, tasks, clone, build);
    writeFileAtomic(outLayout.part(ctx.options.out, 'trajectories', ctx.unit.id), jsonl(trajectories));
    writeFileAtomic(outLayout.part(ctx.options.out, 'tasks', ctx.unit.id), jsonl(tasks));
    ctx.log(`forage ${ctx.unit.id}: ${m.tasks.length} mutation tasks kept (${m.applied} applied, ${m.survived} survived, ${m.noSite} without a site)`);
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
      mutation_tasks: m.tasks.length,
      tasks_by_operator: m.byOperator,
    });
  },
};
