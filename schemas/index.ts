import { reposSchema } from './repos.js';
import { testsSchema } from './tests.js';
import type { RecordSchema } from './schema.js';

/** Every record kind Worldline writes, by dataset config name. */
export const SCHEMAS: Record<string, RecordSchema> = {
  repos: reposSchema,
  tests: testsSchema,
};

export { reposSchema, testsSchema };
export type { RepoRecord } from './repos.js';
export type { TestRecord } from './tests.js';
