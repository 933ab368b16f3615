/**
 * The agent's environment: one container per rollout from the unit's image, holding a fresh
 * single-commit checkout of the task state (no history, reflog or objects with the fix), no
 * network, and the tools bash, view, edit, create and submit. Tool calls and their results are
 * returned verbatim (capped); a malformed call gets an error observation, never an exception.
 */
import { FIXED_COMMIT_ENV } from '../../core/git.js';
import type { TaskRecord } from '../../schemas/tasks.js';
import { OUR_PYTHON } from '../sandbox/our_python.js';
import { SandboxSession } from '../sandbox/sandbox.js';

export const TOOL_NAMES = ['bash', 'view', 'edit', 'create', 'submit'] as const;

/** JSON-schema tool definitions, in the OpenAI tools format. */
export const TOOL_SPECS = [
  {
    name: 'bash',
    description: 'Run a shell command in /repo (no network). Output is capped.',
    parameters: { type: 'object', properties: { command: { type: 'string' } }, required: ['command'] },
  },
  {
    name: 'view',
    description: 'Show a file with line numbers (optionally a line range), or list a folder.',
    parameters: { type: 'object', properties: { path: { type: 'string' }, start: { type: 'integer' }, end: { type: 'integer' } }, required: ['path'] },
  },
  {
    name: 'edit',
    description: 'Replace the one exact occurrence of `search` in a file with `replace`.',
    parameters: {
      type: 'object',
      properties: { path: { type: 'string' }, search: { type: 'string' }, replace: { type: 'string' } },
      required: ['path', 'search', 'replace'],
    },
  },
  {
    name: 'create',
    description: 'Create a new file with the given content.',
    parameters: { type: 'object', properties: { path: { type: 'string' }, content: { type: 'string' } }, required: ['path', 'content'] },
  },
  { name: 'submit', description: 'Submit the current changes to /repo as your fix. Ends the episode.', parameters: { type: 'object', properties: {} } },
].map((f) => ({ type: 'function' as const, function: f }));

export interface ToolCall {
  id: string;
  name: string;
  /** The arguments as the model wrote them: JSON text. */
  arguments: string;
}

export interface Observation {
  output: string;
  exitCode: number | null;
  durationS: number;
  /** True when the call itself was malformed or failed as a tool (not a failing command). */
  error: boolean;
  submitted?: string;
}

export interface EnvLimits {
  memoryMb: number;
  cpus: number;
  pids: number;
  bashTimeoutS: number;
  outputCap: number;
}

const TOOL_ARG_CAP = 96 * 1024;
/** Largest base64 patch passed as one exec argument (Linux takes up to 128 KiB in one). */
const PATCH_ARG_CAP = 96 * 1024;

export class AgentEnv {
  private constructor(
    private readonly session: SandboxSession,
    private readonly limits: EnvLimits,
  ) {}

  /** Starts a container at the task state: base + bug patch + test patch, as one fresh commit. */
  static async start(task: TaskRecord, env: Record<string, string>, limits: EnvLimits): Promise<AgentEnv> {
    const identity = Object.entries(FIXED_COMMIT_ENV)
      .map(([k, v]) => `${k}='${v}'`)
      .join(' ');
    // The patches arrive as base64 arguments ($1, $2) or, past one argument's size, as files
    // written before. The old .git (which holds the environment baseline, i.e. the unmutated
    // code) goes away.
    const script = [
      'set -e',
      'cd /repo',
      '[ -z "$1" ] || printf %s "$1" | base64 -d > /tmp/bug.patch',
      '[ -z "$2" ] || printf %s "$2" | base64 -d > /tmp/test.patch',
      '[ -s /tmp/bug.patch ] && git apply /tmp/bug.patch',
      '[ -s /tmp/test.patch ] && git apply /tmp/test.patch',
      'rm -f /tmp/bug.patch /tmp/test.patch',
      'rm -rf .git',
      'git init -q',
      'git add -A',
      `${identity} git -c commit.gpgsign=false commit -q -m "task state"`,
    ].join('\n');
    const patches = [task.bug_patch ?? '', task.test_patch];
    const args = patches.map((p) => Buffer.from(p).toString('base64'));
    // Small patches (the usual case): the task state is set up in the exec that copies /repo.
    const inline = args.every((a) => a.length <= PATCH_ARG_CAP);
    const opts = { image: task.image_id, env, limits, labels: { 'worldline.role': 'rollout', 'worldline.task': task.instance_id }, toolServer: true };
    let session: SandboxSession;
    try {
      session = await SandboxSession.start(inline ? { ...opts, setup: { script, args } } : opts);
    } catch (e) {
      throw new Error(`cannot set up the task state for ${task.instance_id}: ${(e as Error).message}`);
    }
    const agentEnv = new AgentEnv(session, limits);
    if (inline) return agentEnv;
    try {
      await session.writeFile('/tmp/bug.patch', patches[0]);
      await session.writeFile('/tmp/test.patch', patches[1]);
      const res = await agentEnv.exec(['sh', '-c', script], 120);
      if (res.exitCode !== 0) throw new Error(`cannot set up the task state for ${task.instance_id}: ${res.output.slice(-500)}`);
      return agentEnv;
    } catch (e) {
      await agentEnv.close();
      throw e;
    }
  }

  /** Runs a command in the container, bounded in time and output. */
  exec(cmd: string[], timeoutS: number): Promise<{ output: string; exitCode: number | null }> {
    return this.session.exec(cmd, timeoutS, this.limits.outputCap);
  }

  /**
   * Executes one tool call; whatever goes wrong becomes the observation. `maxS` caps a bash
   * call below its own limit: the rollout's wall budget must bound a command too, not only the
   * gaps between turns.
   */
  async call(tc: ToolCall, maxS = Number.POSITIVE_INFINITY): Promise<Observation> {
    const started = Date.now();
    const done = (output: string, exitCode: number | null, error: boolean, submitted?: string): Observation => ({
      output,
      exitCode,
      error,
      durationS: (Date.now() - started) / 1000,
      ...(submitted !== undefined ? { submitted } : {}),
    });
    if (!(TOOL_NAMES as readonly string[]).includes(tc.name)) return done(`error: unknown tool "${tc.name}"; tools are ${TOOL_NAMES.join(', ')}`, null, true);
    let args: Record<string, unknown>;
    try {
      args = tc.arguments.trim() ? (JSON.parse(tc.arguments) as Record<string, unknown>) : {};
      if (!args || typeof args !== 'object' || Array.isArray(args)) throw new Error('arguments must be a JSON object');
    } catch (e) {
      return done(`error: the arguments of ${tc.name} are not valid JSON (${(e as Error).message})`, null, true);
    }
    const spec = TOOL_SPECS.find((t) => t.function.name === tc.name)!.function;
    const missing = ((spec.parameters as { required?: string[] }).required ?? []).filter(
      (k) => typeof args[k] !== 'string' || (k === 'search' && args[k] === ''),
    );
    if (missing.length) return done(`error: ${tc.name} needs ${missing.map((m) => `"${m}"`).join(', ')} (strings)`, null, true);
    if (tc.name === 'bash') {
      const timeoutS = Math.max(1, Math.min(this.limits.bashTimeoutS, Math.ceil(maxS)));
      const res = await this.exec(['bash', '-c', args.command as string], timeoutS);
      const note = res.exitCode === 124 ? `\n[timed out after ${timeoutS} s]` : '';
      return done(res.output + note, res.exitCode, false);
    }
    if (tc.name === 'submit') {
      const res = await this.exec(['sh', '-c', 'git add -A && git diff --cached --binary HEAD'], 60);
      if (res.exitCode !== 0) return done(`error: cannot take the diff: ${res.output}`, res.exitCode, true);
      return done(res.output.trim() ? 'submitted' : 'submitted (no changes)', 0, false, res.output);
    }
    const encoded = Buffer.from(JSON.stringify(args)).toString('base64');
    if (encoded.length > TOOL_ARG_CAP)
      return done(`error: ${tc.name} arguments are too large (${encoded.length} bytes encoded; at most ${TOOL_ARG_CAP})`, null, true);
    // On our own interpreter: the image's standard library is the build's to rewrite.
    const res = await this.exec([OUR_PYTHON, '/worldline/lib/agent_tools.py', tc.name, encoded], 60);
    return done(res.output, res.exitCode, res.exitCode !== 0);
  }

  close(): Promise<void> {
    return this.session.close();
  }
}
