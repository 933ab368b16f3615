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

const FORAGE_REVISION = 1;

export interface ForageRecord {
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
      revision: FORAGE_REVISION,
    };
  },
  async run(ctx: StageContext) {
    const clone = requireRecord<CloneRecord>(ctx, 'clone');
    const build = requireRecord<BuildRecord>(ctx, 'build');
    ctx.log(`forage ${ctx.unit.id}: trying up to ${ctx.options.mutationTries} mutations`);
    const m = await mutationTasks(ctx, clone, build);
    writeFileAtomic(tasksPartPath(ctx.options.out, ctx.unit.id), m.tasks.map((t) => JSON.stringify(t)).join('\n') + (m.tasks.length ? '\n' : ''));
    ctx.log(`forage ${ctx.unit.id}: ${m.tasks.length} mutation tasks kept (${m.applied} applied, ${m.survived} survived, ${m.noSite} without a site)`);
    return ok({
      mutation_tries: m.tried,
      mutations_applied: m.applied,
      mutations_without_site: m.noSite,
      mutations_survived: m.survived,
      mutation_tasks: m.tasks.length,
      tasks_by_operator: m.byOperator,
    });
  },
};
