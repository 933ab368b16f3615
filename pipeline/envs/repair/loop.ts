/**
 * The repair loop, which decides an inferred environment after the fact: it is built (by the
 * caller: stages/build.ts builds images), its collect-only run read, and while that shows what a
 * repair can mend it is changed and built again, each try recorded; the environment that collects
 * is remembered for the same evidence (cache.ts). A manifest's env is built once, as written.
 */
import { chatOnce } from '../../../core/chat.js';
import { spoiled, workMark } from '../../runtime/job_scope.js';
import { DEBIAN_SUITES, PYTHON_VERSIONS, type PythonVersion, type UnitEnv } from '../../runtime/manifest.js';
import type { PipelineOptions } from '../../runtime/options.js';
import type { BuildAttempt, BuildRecord } from '../../runtime/records.js';
import { type DebianIndex, loadDebianIndex } from '../debian/suite_index.js';
import { AGENT_SYSTEM, agentQuestion, readAgentAnswer } from './agent.js';
import { writeRepairedEnv } from './cache.js';
import { type IndexRepair, relockForPython, repairFromIndex } from './index.js';
import { diagnose, lastResort, modulesDebianLacks, type Problem, reachedCollection, repair } from './rules.js';

/** How many images an inferred environment may take to collect (the first and its repairs), and for how long. */
const MAX_ATTEMPTS = 4;
const REPAIR_BUDGET_S = 900;

/** How a change the environment agent made says so (agent.ts). */
const AGENT_MARK = '(agent';

/** One build, as the loop reads it: why it failed, or what it built and its collect-only run (exit status null: no run to read). */
export type Tried<B> = { failure: string } | { built: B; collect: { output: string; exitCode: number | null } };

/** The environment a unit ends with, the build that holds it, and how it was decided. */
export interface Settled<B> {
  built: B;
  env: UnitEnv;
  python: PythonVersion;
  source: NonNullable<BuildRecord['env_source']>;
  attempts: BuildAttempt[];
}

/** What the loop is given besides the environment: the unit, the run's options, and the words of a collect-only run it cannot read itself. */
export interface RepairSetting {
  unit: { id: string; pythonGiven: boolean };
  options: Pick<PipelineOptions, 'envPolicy' | 'openai'>;
  /** The environment was inferred (resolve), not the manifest's own. */
  inferred: boolean;
  /** What a repaired environment is kept by (cache.ts), with the commit it was repaired at; null: kept nowhere. */
  key: string | null;
  commit: () => string;
  /** The first error line of a collect-only run's output (sandbox/pytest_output.ts). */
  firstErrorLine: (output: string) => string | null;
  log: (line: string) => void;
  /** The unit's Python index, when it was resolved with one: modules Debian lacks are looked up there. */
  index?: IndexRepair;
}

/**
 * The environment for the next try: the rules' (rules.ts), with what Debian lacks from the unit's
 * Python index (index.ts); else, with --env-policy openai, the
 * environment agent's (agent.ts: what it proposed and could not be taken goes on `attempt`);
 * else the last resort.
 */
async function nextEnv(s: RepairSetting, env: UnitEnv, python: PythonVersion, problems: Problem[], output: string, attempt: BuildAttempt) {
  const next = await proposedEnv(s, env, python, problems, output, attempt);
  // A move to another base takes the lock along, locked again for that base's Python.
  if (!next || next.python === python || !next.env.lock?.length) return next;
  const refused: string[] = [];
  const moved = s.index ? await relockForPython(next.env, next.python, s.index, refused) : null;
  if (refused.length) attempt.refused = [...(attempt.refused ?? []), ...refused];
  return moved
    ? { ...next, env: moved, changes: [...next.changes, `lock: ${moved.lock?.length} file(s) for python ${next.python}`] }
    : lastResort(env, python, problems);
}

async function proposedEnv(s: RepairSetting, env: UnitEnv, python: PythonVersion, problems: Problem[], output: string, attempt: BuildAttempt) {
  const indexes = Object.fromEntries(await Promise.all(PYTHON_VERSIONS.map(async (p) => [p, await loadDebianIndex(DEBIAN_SUITES[p])] as const))) as Record<
    PythonVersion,
    DebianIndex
  >;
  const rules = repair(env, python, problems, {
    index: indexes[python],
    newest: indexes[PYTHON_VERSIONS.at(-1)!],
    canMovePython: !s.unit.pythonGiven,
    stoppedAtStart: !reachedCollection(output),
  });
  // What Debian lacks comes from the index, beside what the rules took from Debian (on the same base: a lock is per Python).
  const lacking = s.index && (!rules || rules.python === python) ? modulesDebianLacks(problems, indexes[python]) : [];
  if (lacking.length && s.index) {
    const refused: string[] = [];
    const fromIndex = await repairFromIndex(rules?.env ?? env, python, lacking, s.index, refused);
    if (refused.length) attempt.refused = [...(attempt.refused ?? []), ...refused];
    if (fromIndex) return { env: fromIndex.env, python, changes: [...(rules?.changes ?? []), ...fromIndex.changes] };
  }
  if (rules) return rules;
  const { openai, envPolicy } = s.options;
  if (envPolicy === 'openai' && openai) {
    const answer = await chatOnce(openai)(AGENT_SYSTEM, agentQuestion(env, python, output)).catch((e: Error) => `(no answer: ${e.message})`);
    const agent = readAgentAnswer(answer, env, python, (p) => indexes[p], !s.unit.pythonGiven);
    if (agent.refused.length) attempt.refused = agent.refused;
    if (agent.repair) return agent.repair;
  }
  return lastResort(env, python, problems);
}

/**
 * Builds `env` with `build` until it collects or no repair is left: each build that is not kept is
 * handed to `discard`. A build that fails ends the loop with its failure (and the repairs before it).
 */
export async function settleEnv<B>(
  start: { env: UnitEnv; python: PythonVersion },
  s: RepairSetting,
  build: (env: UnitEnv, python: PythonVersion) => Promise<Tried<B>>,
  discard: (built: B) => Promise<unknown>,
): Promise<Settled<B> | { failure: string }> {
  let { env, python } = start;
  const attempts: BuildAttempt[] = [];
  const began = Date.now();
  const mark = workMark();
  for (;;) {
    const tried = Date.now();
    const built = await build(env, python);
    if ('failure' in built)
      return {
        failure: attempts.length ? `${built.failure} (after ${attempts.length} repair(s): ${attempts.flatMap((a) => a.changes).join('; ')})` : built.failure,
      };
    const done = (source: Settled<B>['source']): Settled<B> => ({ built: built.built, env, python, source, attempts });
    if (!s.inferred) return done('manifest');
    // null: no collect-only output to read (an image reused from another output folder's build).
    const collected = built.collect.exitCode === null || built.collect.exitCode === 0 || built.collect.exitCode === 5;
    // What stopped the collection, named even when no rule here knows it (its first error line).
    const diagnosed = collected ? [] : diagnose(built.collect.output);
    const first = s.firstErrorLine(built.collect.output) ?? `collect-only exited ${built.collect.exitCode}`;
    const problems: Problem[] = diagnosed.length || collected ? diagnosed : [{ kind: 'other', line: first }];
    const attempt: BuildAttempt = { problems: problems.map((p) => p.line), changes: [], seconds: Math.round((Date.now() - tried) / 100) / 10 };
    attempts.push(attempt);
    const next =
      problems.length && attempts.length < MAX_ATTEMPTS && Date.now() - began < REPAIR_BUDGET_S * 1000
        ? await nextEnv(s, env, python, problems, built.collect.output, attempt)
        : null;
    if (!next) {
      const repaired = attempts.length > 1;
      // Remembered for other folders only when undisturbed (see executor.ts): the ledger keeps it on the same terms.
      if (repaired && s.key && !spoiled(mark)) writeRepairedEnv(s.key, s.commit(), { env, python });
      return done(attempts.some((a) => a.changes.some((c) => c.includes(AGENT_MARK))) ? 'agent' : repaired ? 'repaired' : 'inferred');
    }
    attempt.changes = next.changes;
    s.log(`build ${s.unit.id}: repairing: ${next.changes.join('; ')}`);
    await discard(built.built);
    ({ env, python } = next);
  }
}
