/**
 * Stage `forage`: ForagerAgent's tasks for a unit. Today it creates mutation-fix tasks (see
 * mutation_tasks.ts); issue-fix mining and agent rollouts come next and will write here too.
 */
import { join } from 'node:path';
import type { BuildRecord } from './build.js';
import type { CloneRecord } from './clone.js';
import { hashTree } from './hashing.js';
import { writeFileAtomic } from './ledger.js';
import { mutationTasks } from './mutation_tasks.js';
import { tracersDir } from './paths.js';
import { ok, requireRecord, type Stage, type StageContext } from './stage.js';
import type { TraceStageRecord } from './trace.js';
import type { TaskRecord } from '../schemas/tasks.js';
import type { TrajectoryRecord } from '../schemas/trajectories.js';
import { oraclePolicy } from './policies.js';
import { rollout } from './rollout.js';
import { traceAroundFixes } from './task_traces.js';

const jsonl = (rows: object[]) => rows.map((r) => JSON.stringify(r)).join('\n') + (rows.length ? '\n' : '');

const FORAGE_REVISION = 2;

export interface ForageRecord {
  task_trace_rows: number;
  policy: string;
  rollouts: number;
  resolved: number;
  mutation_tries: number;
  mutations_applied: number;
  mutations_without_site: number;
  mutations_survived: number;
  mutation_tasks: number;
  tasks_by_operator: Record<string, number>;
}

export function tasksPartPath(out: string, unitId: string): string {
  return join(out, 'parts', 'tasks', `${unitId}.jsonl`);
}

export function trajectoriesPartPath(out: string, unitId: string): string {
  return join(out, 'parts', 'trajectories', `${unitId}.jsonl`);
}

async function rolloutAll(ctx: StageContext, clone: CloneRecord, build: BuildRecord, tasks: TaskRecord[]): Promise<TrajectoryRecord[]> {
  const o = ctx.options;
  if (o.policy === 'none') return [];
  const runEnv = { ...ctx.unit.env.vars, PYTHONPATH: clone.src_layout ? '/repo/src' : '', PYTHONDONTWRITEBYTECODE: '1', TZ: 'UTC' };
  const out: TrajectoryRecord[] = [];
  for (const [i, task] of tasks.entries()) {
    const traj = await rollout(
      task,
      oraclePolicy(task),
      { maxTurns: o.maxTurns, maxTokens: o.maxTokens, maxWallS: o.maxWallS },
      { memoryMb: o.memoryMb, cpus: o.cpus, pids: o.pids, bashTimeoutS: o.bashTimeoutS, outputCap: 20_000 },
      runEnv,
      { options: o, srcLayout: clone.src_layout, vars: ctx.unit.env.vars, pytestArgs: ctx.unit.env.pytest_args, hasTimeoutPlugin: build.pytest_timeout, work: join(o.out, 'work', 'grade', ctx.unit.id, String(i)) },
    );
    out.push(traj);
  }
  return out;
}

export const forageStage: Stage<ForageRecord> = {
  name: 'forage',
  key(ctx) {
    const build = requireRecord<BuildRecord>(ctx, 'build');
    const trace = requireRecord<TraceStageRecord>(ctx, 'trace');
    const o = ctx.options;
    return {
      image: build.image_id,
      trace: [trace.episodes, trace.line_events, trace.tracer_version],
      code: [hashTree(join(tracersDir, 'worldline_mutate'), '.py'), hashTree(tracersDir, 'forage_mutations.py'), hashTree(tracersDir, 'worldline_report.py')],
      seed: o.forageSeed,
      tries: o.mutationTries,
      perUnit: o.mutationsPerUnit,
      testTimeout: o.mutantTestTimeoutS,
      policy: o.policy,
      budgets: [o.maxTurns, o.maxTokens, o.maxWallS, o.bashTimeoutS],
      revision: FORAGE_REVISION,
    };
  },
  async run(ctx: StageContext) {
    const clone = requireRecord<CloneRecord>(ctx, 'clone');
    const build = requireRecord<BuildRecord>(ctx, 'build');
    ctx.log(`forage ${ctx.unit.id}: trying up to ${ctx.options.mutationTries} mutations`);
    const m = await mutationTasks(ctx, clone, build);
    const trajectories = await rolloutAll(ctx, clone, build, m.tasks);
    const taskTraceRows = await traceAroundFixes(ctx, m.tasks, clone, build);
    writeFileAtomic(trajectoriesPartPath(ctx.options.out, ctx.unit.id), jsonl(trajectories));
    writeFileAtomic(tasksPartPath(ctx.options.out, ctx.unit.id), jsonl(m.tasks));
    ctx.log(`forage ${ctx.unit.id}: ${m.tasks.length} mutation tasks kept (${m.applied} applied, ${m.survived} survived, ${m.noSite} without a site)`);
    const resolved = trajectories.filter((t) => t.resolved).length;
    if (trajectories.length) ctx.log(`forage ${ctx.unit.id}: ${ctx.options.policy} resolved ${resolved} of ${trajectories.length} tasks`);
    return ok({
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
