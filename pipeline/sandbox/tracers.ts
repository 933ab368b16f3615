/**
 * Our Python that runs inside containers (tracers/), and the hashes of it that key the ledger:
 * a stage's key names every file its containers run, so editing one reruns exactly the stages
 * that run it.
 */
import { createHash } from 'node:crypto';
import { readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { hashOf, hashTree } from '../../core/hashing.js';
import { packageRoot } from '../../core/package.js';
import type { TraceCaps } from '../runtime/options.js';

/** Mounted read-only at /worldline/lib in every sandbox. */
export const tracersDir = join(packageRoot, 'tracers');

/** The Python each kind of container run executes, relative to tracers/ (a folder: its .py files). */
export const TRACER_CODE = {
  /** The per-test reporting plugin (every pytest run loads it), the runner that holds the key and signs its records, and its zygote. */
  report: ['worldline_report.py', 'worldline_runs.py', 'worldline_pytest.py', 'worldline_zygote.py'],
  tracer: ['worldline_tracer', 'worldline_report.py', 'worldline_runs.py', 'worldline_pytest.py', 'worldline_zygote.py'],
  mutants: ['worldline_mutate', 'forage_mutations.py', 'worldline_report.py', 'worldline_runs.py', 'worldline_pytest.py', 'worldline_zygote.py'],
  /** The agent's tools, run by exec inside the rollout container. */
  agent: ['agent_tools.py'],
  /**
   * The server the agent's commands go through: not part of `agent` (a trajectory's tool versions),
   * since a command's observation is the same through it or through an exec of its own.
   */
  toolServer: ['tool_server.py'],
} as const;

/** One hash of the named files and folders under tracers/. */
export function tracerCodeHash(entries: readonly string[]): string {
  return hashOf(
    entries.map((e) => {
      const path = join(tracersDir, e);
      return [e, statSync(path).isDirectory() ? hashTree(path, '.py') : createHash('sha256').update(readFileSync(path)).digest('hex')];
    }),
  );
}

/** The tracer plugin's output caps as its environment (tracers/worldline_tracer/caps.py): the trace stage and the traces around a fix pass the same. */
export function traceCapsEnv(c: TraceCaps): Record<string, string> {
  return {
    WORLDLINE_TRACE_MAX_TEST_EPISODES: String(c.testEpisodes),
    WORLDLINE_TRACE_MAX_TEST_BYTES: String(c.testBytes),
    WORLDLINE_TRACE_MAX_UNIT_EPISODES: String(c.unitEpisodes),
    WORLDLINE_TRACE_MAX_UNIT_BYTES: String(c.unitBytes),
  };
}
