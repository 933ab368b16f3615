/**
 * The environment agent (`--env-policy openai`): what the rules miss, asked of a model through an
 * OpenAI-compatible server (the same client as the describe and statement models, core/chat.ts).
 * Once the repair rules have nothing more for an image whose suite does not collect, the model is
 * shown the environment and the end of the collect-only run, and answers with changes in one
 * JSON object: Debian packages to add, pytest arguments to add, a base. Only what can be checked is
 * taken: package names the suite's index has (installed by the package phase, whose network
 * reaches only the mirror), arguments that are single words with no shell in them, a Python we have
 * a base for. Nothing the model says runs as a command. What it proposed and what was refused is
 * recorded with the attempt.
 */
import { DEBIAN_SUITES, PYTHON_VERSIONS, type PythonVersion, type UnitEnv } from '../../runtime/manifest.js';
import type { DebianIndex } from '../debian/suite_index.js';
import type { Repair } from './rules.js';

/** How much of the collect-only run's end the model sees. */
const OUTPUT_TAIL = 6000;

export const AGENT_SYSTEM = [
  "You repair the test environment of a Python repository in a Debian image (Debian's python3 and pytest, no pip).",
  'Its pytest collect-only run fails and the automatic rules found nothing more to change.',
  'Answer with one JSON object and nothing else:',
  '{"apt": [Debian binary package names to install], "pytest_args": [pytest arguments to add], "python": "3.9" | "3.11" | "3.13" (only to change the base), "why": "one sentence"}.',
  'Use empty lists where nothing is needed. The suite itself must not be edited.',
].join('\n');

/** A pytest argument we take from a model: one word, no shell, no path outside the checkout. */
const SAFE_ARG = /^-{0,2}[\w][\w.:=,/[\]*@+-]*$/;

export interface AgentAnswer {
  repair: Repair | null;
  /** What the model proposed that was not taken, and why. */
  refused: string[];
}

/** Reads the model's answer (a JSON object, possibly inside a fenced block) into checked changes. */
export function readAgentAnswer(
  answer: string,
  env: UnitEnv,
  python: PythonVersion,
  indexOf: (p: PythonVersion) => DebianIndex,
  canMovePython: boolean,
): AgentAnswer {
  const refused: string[] = [];
  const json = /\{[\s\S]*\}/.exec(answer)?.[0];
  let said: { apt?: unknown; pytest_args?: unknown; python?: unknown; why?: unknown };
  try {
    said = json ? (JSON.parse(json) as typeof said) : {};
  } catch {
    return { repair: null, refused: [`not a JSON object: ${answer.slice(0, 200)}`] };
  }
  const list = (v: unknown) => (Array.isArray(v) ? v.filter((x): x is string => typeof x === 'string') : []);
  let next = python;
  if (typeof said.python === 'string' && said.python !== python) {
    if (!canMovePython) refused.push(`python ${said.python}: the manifest line names its own Python`);
    else if ((PYTHON_VERSIONS as readonly string[]).includes(said.python)) next = said.python as PythonVersion;
    else refused.push(`python ${said.python}: no base for it`);
  }
  const index = indexOf(next);
  const apt = new Set(env.apt);
  const changes: string[] = [];
  const why = typeof said.why === 'string' ? ` (agent: ${said.why.slice(0, 200)})` : ' (agent)';
  for (const pkg of list(said.apt)) {
    if (apt.has(pkg)) continue;
    if (!index.packages.has(pkg)) refused.push(`${pkg}: no such package in ${DEBIAN_SUITES[next]}`);
    else {
      apt.add(pkg);
      changes.push(`+${pkg}${why}`);
    }
  }
  const args = [...env.pytest_args];
  for (const arg of list(said.pytest_args)) {
    if (!SAFE_ARG.test(arg) || arg.includes('..')) refused.push(`pytest argument ${JSON.stringify(arg)}: not a plain word`);
    else if (!args.includes(arg)) {
      args.push(arg);
      changes.push(`pytest ${arg}${why}`);
    }
  }
  if (next !== python) changes.push(`python ${python} -> ${next}${why}`);
  return { repair: changes.length ? { env: { ...env, apt: [...apt].sort(), pytest_args: args }, python: next, changes } : null, refused };
}

/** The question for the model: the environment and the end of what stopped the collection. */
export function agentQuestion(env: UnitEnv, python: PythonVersion, output: string): string {
  return [
    `Base: Debian ${DEBIAN_SUITES[python]}, Python ${python}.`,
    `Environment: ${JSON.stringify(env)}`,
    'The end of `python3 -m pytest --collect-only -q` in the image:',
    output.slice(-OUTPUT_TAIL),
  ].join('\n');
}
