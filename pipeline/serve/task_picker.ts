/**
 * The tasks a server offers and how reset picks one: by `task_id` (a `tasks` row's instance_id),
 * or by a seed among the tasks a filter keeps (kind, repository, difficulty by the size of the gold
 * fix, a split of instance ids hashed into train/test), the same task for the same seed and filter on any host. Each task comes with
 * what grading needs of its unit (environment variables, pytest arguments, src layout, whether
 * pytest-timeout is in the image), read from the output folder's ledger beside the dataset: the
 * dataset's rows alone do not hold them.
 */
import { createHash } from 'node:crypto';
import { existsSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { readRows } from '../../datasets/reader.js';
import type { TaskRecord } from '../../schemas/tasks.js';
import { withLedgerEnv } from '../runtime/executor.js';
import { Ledger } from '../runtime/ledger.js';
import { readManifest, type UnitEnv } from '../runtime/manifest.js';
import type { BuildRecord, CloneRecord } from '../runtime/records.js';
import { ProtocolError, type ResetRequest } from './protocol.js';

/** What grading and the agent's environment need of a task's unit. */
export interface UnitContext {
  vars: Record<string, string>;
  pytestArgs: string[];
  srcLayout: boolean;
  hasTimeoutPlugin: boolean;
}

export interface ServedTask {
  task: TaskRecord;
  unit: UnitContext;
}

/** Share of tasks in the `test` split; the rest are `train`. By a hash of the instance id: stable as tasks are added. */
const TEST_SHARE = 0.2;

const unitHash = (s: string) => createHash('sha256').update(s).digest();

export function splitOf(instanceId: string): 'train' | 'test' {
  return unitHash(`split:${instanceId}`).readUInt32BE(0) / 2 ** 32 < TEST_SHARE ? 'test' : 'train';
}

export const DIFFICULTIES = ['easy', 'medium', 'hard'] as const;

/**
 * How hard a task is, by the size of its gold fix (the rows carry no person's estimate, as SWE-bench
 * Verified's do): `easy` changes at most 4 lines of one file, `medium` at most 20 lines in at most 2
 * files, `hard` more. A fix's size is what the agent must find and write, and it is the same on every host.
 */
export function difficultyOf(task: Pick<TaskRecord, 'patch'>): (typeof DIFFICULTIES)[number] {
  const lines = task.patch.split('\n');
  const files = lines.filter((l) => l.startsWith('diff --git ')).length;
  const changed = lines.filter((l) => (l.startsWith('+') && !l.startsWith('+++')) || (l.startsWith('-') && !l.startsWith('---'))).length;
  if (files <= 1 && changed <= 4) return 'easy';
  return files <= 2 && changed <= 20 ? 'medium' : 'hard';
}

export class TaskCatalog {
  private constructor(
    private readonly tasks: ServedTask[],
    /** The output folder the dataset belongs to. */
    readonly out: string,
  ) {}

  /**
   * Reads `dataset`'s tasks and, from the output folder it lives in (`OUT/dataset`), each unit's
   * grading context. A unit whose environment was its manifest line's own is in no ledger
   * record: `manifest` (the run's manifest) supplies it.
   */
  static async load(dataset: string, manifest?: string): Promise<TaskCatalog> {
    const out = dirname(resolve(dataset));
    if (!existsSync(join(out, 'ledger')))
      throw new Error(`${dataset}: no ledger beside it (${join(out, 'ledger')}); serve a dataset where its run left it, OUT/dataset`);
    const ledger = new Ledger(out);
    const units = manifest ? new Map(readManifest(manifest).units.map((u) => [u.id, withLedgerEnv(u, ledger)])) : new Map();
    const contexts = new Map<string, UnitContext>();
    const contextOf = (unitId: string): UnitContext => {
      const known = contexts.get(unitId);
      if (known) return known;
      const clone = ledger.get<CloneRecord>('clone', unitId)?.record;
      const build = ledger.get<BuildRecord>('build', unitId)?.record;
      if (!clone || !build) throw new Error(`unit ${unitId}: no clone or build record in ${out}/ledger`);
      const env: UnitEnv | undefined = build.env ?? ledger.get<{ env?: UnitEnv }>('resolve', unitId)?.record?.env ?? units.get(unitId)?.env;
      if (!env) throw new Error(`unit ${unitId}: its environment was its manifest line's own, which no ledger record holds; pass the run's --manifest`);
      const ctx = { vars: env.vars, pytestArgs: env.pytest_args, srcLayout: clone.src_layout, hasTimeoutPlugin: build.pytest_timeout };
      contexts.set(unitId, ctx);
      return ctx;
    };
    const tasks: ServedTask[] = [];
    for await (const row of readRows(dataset, { config: 'tasks' })) {
      const task = row as unknown as TaskRecord;
      tasks.push({ task, unit: contextOf(task.unit_id) });
    }
    tasks.sort((a, b) => (a.task.instance_id < b.task.instance_id ? -1 : 1));
    return new TaskCatalog(tasks, out);
  }

  get size(): number {
    return this.tasks.length;
  }

  /** Every task, in instance-id order. */
  all(): readonly ServedTask[] {
    return this.tasks;
  }

  /** The task a reset asks for: by id, else by seed (a random one when none is given) among those the filter keeps. */
  pick(req: ResetRequest): ServedTask & { seed: number | null } {
    if (req.task_id !== undefined) {
      const found = this.tasks.find((t) => t.task.instance_id === req.task_id);
      if (!found) throw new ProtocolError('VALIDATION_ERROR', `reset: no task "${req.task_id.slice(0, 200)}" in this dataset`);
      return { ...found, seed: null };
    }
    if (req.split !== undefined && req.split !== 'train' && req.split !== 'test')
      throw new ProtocolError('VALIDATION_ERROR', 'reset: "split" is train or test');
    if (req.difficulty !== undefined && !(DIFFICULTIES as readonly string[]).includes(req.difficulty))
      throw new ProtocolError('VALIDATION_ERROR', `reset: "difficulty" is one of ${DIFFICULTIES.join(', ')}`);
    const kept = this.tasks.filter(
      ({ task }) =>
        (req.kind === undefined || task.kind === req.kind) &&
        (req.repo === undefined || task.repo === req.repo) &&
        (req.split === undefined || splitOf(task.instance_id) === req.split) &&
        (req.difficulty === undefined || difficultyOf(task) === req.difficulty),
    );
    if (!kept.length) throw new ProtocolError('VALIDATION_ERROR', 'reset: no task matches the filter (kind, repo, split, difficulty)');
    const seed = req.seed ?? Math.floor(Math.random() * 2 ** 31);
    const index = Number(unitHash(`seed:${seed}`).readBigUInt64BE(0) % BigInt(kept.length));
    return { ...kept[index], seed };
  }
}
