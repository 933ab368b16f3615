import { reposSchema } from './repos.js';
import { testsSchema } from './tests.js';
import { tracesSchema } from './traces.js';
import { tasksSchema } from './tasks.js';
import { trajectoriesSchema } from './trajectories.js';
import type { RecordSchema } from './schema.js';

/** Every record kind Worldline writes, by dataset config name. */
export const SCHEMAS: Record<string, RecordSchema> = {
  repos: reposSchema,
  tests: testsSchema,
  traces: tracesSchema,
  tasks: tasksSchema,
  trajectories: trajectoriesSchema,
};

export { reposSchema, testsSchema, tracesSchema, tasksSchema, trajectoriesSchema };
export type { RepoRecord } from './repos.js';
export type { TestRecord } from './tests.js';
export type { TraceRecord } from './traces.js';
export type { TaskRecord } from './tasks.js';
export type { TrajectoryRecord } from './trajectories.js';
