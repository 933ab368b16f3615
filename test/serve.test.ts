/**
 * `worldline serve` on real Docker, driven by a raw WebSocket client and by OpenEnv's own Python
 * client: the oracle's tool calls earn reward 1, a no-op submission, an edit of the tests and a
 * conftest that forces passes earn 0; sessions do not see each other's files; past capacity a
 * reset gets CAPACITY_REACHED; a client gone takes its container; malformed, unknown and
 * oversized messages get OpenEnv's error codes on a connection that goes on; off loopback the
 * server wants a token. Every finished episode is a `trajectories` row.
 */
import { execFileSync, spawn, spawnSync } from 'node:child_process';
import { existsSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { hostname } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import WebSocket from 'ws';
import { packageRoot } from '../core/package.js';
import { hunksOf } from '../pipeline/agent/policy.js';
import { DEFAULTS } from '../pipeline/runtime/options.js';
import { ENV_REPOSITORY, readImagesFile } from '../pipeline/sandbox/registry.js';
import { pullMissingImages } from '../pipeline/serve/images.js';
import { MAX_MESSAGE_BYTES } from '../pipeline/serve/protocol.js';
import { type RunningServer, type ServeOptions, serve } from '../pipeline/serve/server.js';
import { DIFFICULTIES, difficultyOf, TaskCatalog } from '../pipeline/serve/task_picker.js';
import { validateRecord } from '../schemas/schema.js';
import type { TaskRecord } from '../schemas/tasks.js';
import { trajectoriesSchema } from '../schemas/trajectories.js';
import { RegistryServer } from './fixtures/registry_server.js';
import { cli, cliProcess, tempDir } from './helpers.js';

/** What the server sends: an observation (its fields as the tests read them), the state, or an error. */
interface Msg {
  type: string;
  data: {
    observation: {
      problem_statement?: string;
      tools?: { name: string; input_schema: { required?: string[] } }[];
      result?: { output: string; exit_code: number | null };
      error?: unknown;
    };
    reward: number | null;
    done: boolean;
    metadata: Record<string, unknown>;
    code?: string;
    message?: string;
    episode_id?: string;
  };
}

/** A raw WebSocket client: one request, one reply, in order. */
class Client {
  private readonly replies: Msg[] = [];
  private waiting: ((m: Msg) => void) | null = null;
  closeCode: number | null = null;

  private constructor(readonly ws: WebSocket) {
    ws.on('message', (d) => {
      const m = JSON.parse(d.toString()) as Msg;
      if (this.waiting) {
        const w = this.waiting;
        this.waiting = null;
        w(m);
      } else this.replies.push(m);
    });
    ws.on('close', (code) => {
      this.closeCode = code;
    });
  }

  static async open(url: string, headers: Record<string, string> = {}): Promise<Client> {
    const ws = new WebSocket(`${url.replace(/^http/, 'ws')}/ws`, { headers });
    await new Promise<void>((resolve, reject) => {
      ws.once('open', () => resolve());
      ws.once('error', reject);
    });
    return new Client(ws);
  }

  request(msg: object | string): Promise<Msg> {
    const reply = new Promise<Msg>((resolve) => {
      const queued = this.replies.shift();
      if (queued) resolve(queued);
      else this.waiting = resolve;
    });
    this.ws.send(typeof msg === 'string' ? msg : JSON.stringify(msg));
    return reply;
  }

  reset(data: object): Promise<Msg> {
    return this.request({ type: 'reset', data });
  }

  call(tool: string, args: object = {}): Promise<Msg> {
    return this.request({ type: 'step', data: { type: 'call_tool', tool_name: tool, arguments: args } });
  }

  close(): void {
    this.ws.close();
  }
}

/** Containers of ours (this process) for `taskId` that still exist. */
function containersOf(taskId: string): string[] {
  const out = execFileSync('docker', [
    'ps',
    '-aq',
    '--filter',
    `label=worldline.task=${taskId}`,
    '--filter',
    `label=worldline.owner=${hostname()}:${process.pid}`,
  ]).toString();
  return out.split('\n').filter(Boolean);
}

async function until(what: () => boolean, ms: number): Promise<boolean> {
  const end = Date.now() + ms;
  while (Date.now() < end) {
    if (what()) return true;
    await new Promise((r) => setTimeout(r, 250));
  }
  return what();
}

describe('worldline serve', () => {
  let out: string;
  let catalog: TaskCatalog;
  let server: RunningServer;
  let tasks: TaskRecord[];
  const options = (): ServeOptions => ({
    host: '127.0.0.1',
    port: 0,
    maxSessions: 3,
    idleS: 120,
    record: true,
    budgets: { maxTurns: 20, maxTokens: DEFAULTS.maxTokens, maxWallS: 300 },
    limits: { memoryMb: 1024, cpus: 1, pids: 256, bashTimeoutS: 60, outputCap: 20_000 },
    options: { ...DEFAULTS, out, memoryMb: 1024, cpus: 1, pids: 256, workDiskMb: 512 },
    log: () => undefined,
  });

  beforeAll(async () => {
    const dir = tempDir('serve');
    out = join(dir, 'out');
    const manifest = join(dir, 'manifest.jsonl');
    writeFileSync(manifest, `${JSON.stringify({ repo: join(packageRoot, 'examples/repos/calc') })}\n`);
    const res = await cli(['run', '--manifest', manifest, '--out', out, '--validate-runs', '1', '--mutations-per-unit', '2']);
    expect(res.code, res.stderr).toBe(0);
    catalog = await TaskCatalog.load(join(out, 'dataset'));
    tasks = catalog.all().map((t) => t.task);
    expect(tasks.length).toBeGreaterThanOrEqual(2);
    server = await serve(catalog, options());
  }, 600_000);

  afterAll(async () => {
    await server?.close();
  });

  it('answers /health, /schema and /metadata', async () => {
    expect(await (await fetch(`${server.url}/health`)).json()).toEqual({ status: 'healthy' });
    const schema = (await (await fetch(`${server.url}/schema`)).json()) as Record<string, unknown>;
    expect(Object.keys(schema).sort()).toEqual(['action', 'observation', 'state']);
    const meta = (await (await fetch(`${server.url}/metadata`)).json()) as { tasks: number };
    expect(meta.tasks).toBe(tasks.length);
  });

  it("gives reward 1 to the oracle's tool calls on every task, and records each episode as a trajectories row", async () => {
    for (const task of tasks) {
      const c = await Client.open(server.url);
      const reset = await c.reset({ task_id: task.instance_id, policy: 'test-oracle' });
      expect(reset.type).toBe('observation');
      expect(reset.data.observation.problem_statement).toBe(task.problem_statement);
      expect(reset.data.observation.tools?.map((t: { name: string }) => t.name)).toEqual(['bash', 'view', 'edit', 'create', 'submit']);
      expect(reset.data.done).toBe(false);
      const listed = await c.request({ type: 'step', data: { type: 'list_tools' } });
      expect(listed.data.observation.tools?.[0].input_schema.required).toEqual(['command']);
      for (const h of hunksOf(task.patch)) {
        const edited = await c.call('edit', { path: h.path, search: h.search, replace: h.replace });
        expect(edited.data.observation.error, JSON.stringify(edited)).toBeNull();
      }
      const done = await c.call('submit');
      expect(done.data.done).toBe(true);
      expect(done.data.reward).toBe(1);
      const episode = done.data.metadata.trajectory_id as string;
      const state = await c.request({ type: 'state' });
      expect(state.data).toMatchObject({ done: true, reward: 1, task_id: task.instance_id });
      c.close();
      const file = join(out, 'served', 'trajectories', `${state.data.episode_id}.jsonl`);
      const row = JSON.parse(readFileSync(file, 'utf8'));
      validateRecord(trajectoriesSchema, row);
      expect(row).toMatchObject({
        trajectory_id: episode,
        task_id: task.instance_id,
        policy: 'test-oracle',
        reward: 1,
        resolved: true,
        exit_status: 'submitted',
      });
      // The same row forage writes: system and task messages, then one assistant call and one tool answer per step.
      expect(row.messages[1].content).toBe(task.problem_statement);
      expect(row.steps.length).toBe(hunksOf(task.patch).length + 1);
    }
  }, 300_000);

  it('gives reward 0 to a no-op submission, to an edit of the tests and to a conftest that forces passes', async () => {
    const task = tasks[0];
    const attempts: ((c: Client) => Promise<unknown>)[] = [
      async () => undefined,
      // Every test file rewritten to pass: grading puts the task's tests back.
      (c) => c.call('bash', { command: 'for f in $(find tests -name "test_*.py"); do printf "def test_ok():\\n    pass\\n" > "$f"; done' }),
      // A conftest that reports every test as passed: grading deletes new conftests.
      (c) =>
        c.call('create', {
          path: 'conftest.py',
          content:
            'import pytest\n@pytest.hookimpl(hookwrapper=True)\ndef pytest_runtest_makereport(item, call):\n    o = yield\n    r = o.get_result()\n    r.outcome = "passed"\n',
        }),
    ];
    for (const attempt of attempts) {
      const c = await Client.open(server.url);
      await c.reset({ task_id: task.instance_id });
      await attempt(c);
      const done = await c.call('submit');
      expect(done.data.done).toBe(true);
      expect(done.data.reward).toBe(0);
      c.close();
    }
  }, 300_000);

  it("keeps parallel sessions apart: one never sees the other's files", async () => {
    const [a, b] = await Promise.all([Client.open(server.url), Client.open(server.url)]);
    await Promise.all([a.reset({ task_id: tasks[0].instance_id }), b.reset({ task_id: tasks[0].instance_id })]);
    await a.call('bash', { command: 'echo only-a > /repo/a-was-here && echo only-a > /tmp/a-was-here' });
    try {
      const seen = await b.call('bash', { command: 'cat /repo/a-was-here /tmp/a-was-here' });
      expect(seen.data.observation.result?.exit_code).not.toBe(0);
      expect(seen.data.observation.result?.output).not.toContain('only-a');
      const own = await a.call('bash', { command: 'cat /repo/a-was-here' });
      expect(own.data.observation.result?.output).toContain('only-a');
    } finally {
      a.close();
      b.close();
    }
  }, 120_000);

  it('says CAPACITY_REACHED past the session limit, at once, and frees the slot when a session closes', async () => {
    await until(() => server.sessions() === 0, 20_000);
    const held = await Promise.all([0, 1, 2].map(() => Client.open(server.url)));
    const extra = await Client.open(server.url);
    try {
      for (const c of held) expect((await c.reset({ seed: 7 })).type).toBe('observation');
      const started = Date.now();
      const refused = await extra.reset({ seed: 7 });
      expect(refused).toMatchObject({ type: 'error', data: { code: 'CAPACITY_REACHED' } });
      expect(Date.now() - started).toBeLessThan(2000);
      held[0].close();
      expect(await until(() => server.sessions() === 2, 20_000)).toBe(true);
      expect((await extra.reset({ seed: 7 })).type).toBe('observation');
    } finally {
      for (const c of [...held, extra]) c.close();
    }
  }, 120_000);

  it('removes the container of a client that goes away without a word', async () => {
    await until(() => server.sessions() === 0, 20_000);
    const task = tasks[1];
    const c = await Client.open(server.url);
    await c.reset({ task_id: task.instance_id });
    expect(containersOf(task.instance_id).length).toBe(1);
    c.ws.terminate();
    expect(await until(() => containersOf(task.instance_id).length === 0, 20_000)).toBe(true);
    expect(server.sessions()).toBe(0);
  }, 60_000);

  it('answers malformed, unknown and oversized messages with error codes, and the connection goes on', async () => {
    const c = await Client.open(server.url);
    expect((await c.request('{"type": "reset",')).data.code).toBe('INVALID_JSON');
    expect((await c.request({ type: 'teleport' })).data.code).toBe('UNKNOWN_TYPE');
    expect((await c.request({ type: 'step', data: { type: 'call_tool', tool_name: 'rm' } })).data.code).toBe('VALIDATION_ERROR');
    expect((await c.request({ type: 'reset', data: { task_id: 'no-such-task' } })).data.code).toBe('VALIDATION_ERROR');
    expect((await c.call('bash', { command: 'true' })).data.code).toBe('SESSION_ERROR');
    const big = JSON.stringify({ type: 'state', pad: 'x'.repeat(MAX_MESSAGE_BYTES + 10) });
    const tooBig = await c.request(big);
    expect(tooBig.data.code).toBe('VALIDATION_ERROR');
    expect(tooBig.data.message).toMatch(/at most/);
    expect((await c.request({ type: 'state' })).type).toBe('state');
    c.close();
    // Past the hard limit the socket is closed (1009), never the server.
    const d = await Client.open(server.url);
    d.ws.send('x'.repeat(5 * MAX_MESSAGE_BYTES));
    expect(await until(() => d.closeCode !== null, 10_000)).toBe(true);
    expect(d.closeCode).toBe(1009);
    expect((await fetch(`${server.url}/health`)).status).toBe(200);
  }, 60_000);

  it('picks the same task for the same seed and filter', async () => {
    const a = catalog.pick({ seed: 42, kind: 'mutation_fix' });
    const b = catalog.pick({ seed: 42, kind: 'mutation_fix' });
    expect(a.task.instance_id).toBe(b.task.instance_id);
    expect(() => catalog.pick({ kind: 'issue_fix', repo: 'nowhere' })).toThrow(/no task matches/);
    // Difficulty by the gold fix's size: a filter keeps only its own, and a word it does not know is refused.
    for (const difficulty of DIFFICULTIES) {
      const matching = tasks.filter((t) => difficultyOf(t) === difficulty);
      if (!matching.length) expect(() => catalog.pick({ seed: 1, difficulty })).toThrow(/no task matches/);
      else for (const seed of [1, 2, 3]) expect(difficultyOf(catalog.pick({ seed, difficulty }).task)).toBe(difficulty);
    }
    expect(difficultyOf({ patch: 'diff --git a/x.py b/x.py\n--- a/x.py\n+++ b/x.py\n@@ -1 +1 @@\n-a = 1\n+a = 2\n' })).toBe('easy');
    expect(() => catalog.pick({ seed: 1, difficulty: 'trivial' })).toThrow(/"difficulty" is one of easy, medium, hard/);
  });

  it('ends an episode at the turn limit with the grader reward, and records nothing under --no-record', async () => {
    const short = await serve(catalog, { ...options(), record: false, budgets: { ...options().budgets, maxTurns: 2 } });
    const recorded = () => (existsSync(join(out, 'served')) ? readdirSync(join(out, 'served', 'trajectories')).length : 0);
    const before = recorded();
    try {
      const c = await Client.open(short.url);
      await c.reset({ task_id: tasks[0].instance_id });
      expect((await c.call('bash', { command: 'true' })).data.done).toBe(false);
      const last = await c.call('bash', { command: 'true' });
      expect(last.data).toMatchObject({ done: true, reward: 0, metadata: { exit_status: 'max_turns' } });
      expect((await c.call('bash', { command: 'true' })).data.code).toBe('SESSION_ERROR');
      c.close();
      expect(recorded()).toBe(before);
    } finally {
      await short.close();
    }
  }, 120_000);

  it('closes a session silent past the idle limit, its container removed, but never cuts a step that is running', async () => {
    const brief = await serve(catalog, { ...options(), idleS: 2 });
    try {
      const c = await Client.open(brief.url);
      await c.reset({ task_id: tasks[1].instance_id });
      const slow = await c.call('bash', { command: 'sleep 3; echo still-here' });
      expect(slow.data.observation.result?.output).toContain('still-here');
      expect(containersOf(tasks[1].instance_id).length).toBe(1);
      expect(await until(() => c.closeCode !== null, 10_000)).toBe(true);
      expect(await until(() => containersOf(tasks[1].instance_id).length === 0, 20_000)).toBe(true);
      expect(brief.sessions()).toBe(0);
    } finally {
      await brief.close();
    }
  }, 60_000);

  it('answers the stateless HTTP /reset and /step', async () => {
    const post = (path: string, body: string) => fetch(`${server.url}${path}`, { method: 'POST', body, headers: { 'content-type': 'application/json' } });
    const reset = await post('/reset', JSON.stringify({ task_id: tasks[0].instance_id }));
    expect(reset.status).toBe(200);
    expect(((await reset.json()) as { observation: { task_id: string } }).observation.task_id).toBe(tasks[0].instance_id);
    expect(await until(() => server.sessions() === 0, 10_000)).toBe(true);
    const listed = (await (await post('/step', JSON.stringify({ action: { type: 'list_tools' } }))).json()) as { observation: { tools: unknown[] } };
    expect(listed.observation.tools.length).toBe(5);
    expect((await post('/step', JSON.stringify({ action: { type: 'call_tool', tool_name: 'bash', arguments: { command: 'id' } } }))).status).toBe(409);
    expect((await post('/step', JSON.stringify({ action: { type: 'fly' } }))).status).toBe(422);
    expect((await post('/reset', '{oops')).status).toBe(400);
  }, 60_000);

  it('binds off loopback only with a token, and then wants it on every request', async () => {
    await expect(serve(catalog, { ...options(), host: '0.0.0.0' })).rejects.toThrow(/bearer token/);
    const guarded = await serve(catalog, { ...options(), token: 'sesame' });
    try {
      expect((await fetch(`${guarded.url}/health`)).status).toBe(401);
      expect((await fetch(`${guarded.url}/health`, { headers: { authorization: 'Bearer sesame' } })).status).toBe(200);
      await expect(Client.open(guarded.url)).rejects.toThrow(/401/);
      const c = await Client.open(guarded.url, { authorization: 'Bearer sesame' });
      expect((await c.request({ type: 'state' })).type).toBe('state');
      c.close();
    } finally {
      await guarded.close();
    }
  });

  it("leaves nothing behind when killed: the next server's start sweeps the dead one's containers, and a stop removes its own", async () => {
    const task = tasks[0];
    /** A `worldline serve` process, its URL read from its first line. */
    const start = async () => {
      const p = cliProcess(['serve', '--dataset', join(out, 'dataset'), '--port', '0', '--no-record']);
      expect(await until(() => /serving .*? at (http\S+) /.test(p.output().stderr) || p.child.exitCode !== null, 60_000), p.output().stderr).toBe(true);
      return { ...p, url: /serving .*? at (http\S+) /.exec(p.output().stderr)![1] };
    };
    const owned = (pid: number) =>
      execFileSync('docker', ['ps', '-aq', '--filter', `label=worldline.task=${task.instance_id}`, '--filter', `label=worldline.owner=${hostname()}:${pid}`])
        .toString()
        .split('\n')
        .filter(Boolean);
    const first = await start();
    const c = await Client.open(first.url);
    expect((await c.reset({ task_id: task.instance_id })).type).toBe('observation');
    first.child.kill('SIGKILL');
    await first.done;
    expect(owned(first.child.pid!).length).toBe(1);
    const second = await start();
    expect(owned(first.child.pid!)).toEqual([]);
    const d = await Client.open(second.url);
    expect((await d.reset({ task_id: task.instance_id })).type).toBe('observation');
    second.child.kill('SIGTERM');
    expect((await second.done).code).toBe(143);
    expect(owned(second.child.pid!)).toEqual([]);
  }, 180_000);

  it("serve --registry pulls a task image this host lacks through the dataset's images.json (Debian's docker-registry on loopback), as the same image", async () => {
    const registry = await RegistryServer.start(tempDir('registry'));
    const dataset = join(out, 'dataset');
    try {
      const pushed = await cli(['push', '--dataset', dataset, '--registry', registry.host]);
      expect(pushed.code, pushed.stderr).toBe(0);
      const images = readImagesFile(dataset)?.images ?? {};
      const ids = [...new Set(tasks.map((t) => t.image_id))];
      for (const id of ids) {
        // The registry holds the image itself: its manifest's config is the task's image id.
        const manifest = await fetch(`http://${registry.host}/v2/${ENV_REPOSITORY}/manifests/${images[id].digest}`, {
          headers: { accept: 'application/vnd.docker.distribution.manifest.v2+json' },
        });
        expect(((await manifest.json()) as { config: { digest: string } }).config.digest).toBe(id);
      }
      // Images already here are neither pulled nor rebuilt.
      expect(await pullMissingImages(catalog, dataset, registry.host, () => undefined)).toBe(0);
      // As on a rollout host that never built it: the first task's image gone, then pulled back by digest.
      execFileSync('docker', ['rmi', '-f', ids[0]], { stdio: 'ignore' });
      expect(await pullMissingImages(catalog, dataset, registry.host, () => undefined)).toBe(1);
      expect(execFileSync('docker', ['image', 'inspect', '--format', '{{.Id}}', ids[0]], { encoding: 'utf8' }).trim()).toBe(ids[0]);
    } finally {
      await registry.stop();
    }
  }, 300_000);

  it("is driven by OpenEnv's own GenericEnvClient (examples/serve_client.py): oracle 1, scripted 0, in parallel sessions", async () => {
    const venv = join(inject('workRoot'), 'openenv-venv');
    const python = join(venv, 'bin', 'python');
    if (!existsSync(python)) {
      const made = spawnSync('python3', ['-m', 'venv', venv]);
      expect(made.status, made.stderr?.toString()).toBe(0);
      const pip = spawnSync(join(venv, 'bin', 'pip'), ['install', '-q', 'openenv==0.10.0'], { timeout: 480_000 });
      if (pip.status !== 0) {
        console.warn(`openenv==0.10.0 cannot be installed here; OpenEnv's client case skipped:\n${pip.stderr?.toString().slice(-2000)}`);
        return;
      }
    }
    const tasksFile = join(out, 'tasks-export.jsonl');
    const exported = await cli(['export', join(out, 'dataset')]);
    writeFileSync(tasksFile, exported.stdout);
    // Not spawnSync: the server answering it runs on this process's event loop.
    const run = await new Promise<{ status: number | null; stdout: string; stderr: string }>((resolve) => {
      const child = spawn(python, [join(packageRoot, 'examples/serve_client.py'), '--url', server.url, '--tasks', tasksFile, '--sessions', '3']);
      let stdout = '';
      let stderr = '';
      child.stdout.on('data', (d) => (stdout += d));
      child.stderr.on('data', (d) => (stderr += d));
      child.on('close', (status) => resolve({ status, stdout, stderr }));
    });
    expect(run.status, run.stderr).toBe(0);
    const rows = run.stdout
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as { task_id: string; policy: string; reward: number; done: boolean });
    expect(rows.length).toBe(tasks.length * 2);
    for (const r of rows) expect([r.policy, r.done, r.reward]).toEqual([r.policy, true, r.policy === 'oracle' ? 1 : 0]);
    const recorded = readdirSync(join(out, 'served', 'trajectories')).map((f) => JSON.parse(readFileSync(join(out, 'served', 'trajectories', f), 'utf8')));
    expect(recorded.filter((r) => r.policy === 'scripted').length).toBe(tasks.length);
  }, 900_000);
});
