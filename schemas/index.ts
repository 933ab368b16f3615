import { reposSchema } from './repos.js';
import type { RecordSchema } from './schema.js';
import { tasksSchema } from './tasks.js';
import { testsSchema } from './tests.js';
import { traceDescriptionsSchema } from './trace_descriptions.js';
import { tracesSchema } from './traces.js';
import { trajectoriesSchema } from './trajectories.js';

/** Every record kind Worldline writes, by dataset config name. */
export const SCHEMAS: Record<string, RecordSchema> = {
  repos: reposSchema,
  tests: testsSchema,
  traces: tracesSchema,
  tasks: tasksSchema,
  trajectories: trajectoriesSchema,
  trace_descriptions: traceDescriptionsSchema,
};

export type { RepoRecord } from './repos.js';
export type { TaskRecord } from './tasks.js';
export type { TestRecord } from './tests.js';
export type { TraceDescriptionRecord } from './trace_descriptions.js';
export type { TraceRecord } from './traces.js';
export type { TrajectoryRecord } from './trajectories.js';
export { reposSchema, tasksSchema, testsSchema, traceDescriptionsSchema, tracesSchema, trajectoriesSchema };
