/**
 * `npm run bench:serve`: what `worldline serve` costs a trainer, on this machine, against a run's
 * dataset whose env images are here (warm). Rows:
 * - reset latency (p50, p95): a new session's container at the task state, until its observation;
 * - step latency (p50, p95) of a trivial bash call (`true`) in a held session;
 * - sessions held at once: `--idle` idle sessions reset, then each answers a step;
 * - oracle episodes per hour, one at a time: the oracle's own turns (oraclePolicy) sent over the
 *   WebSocket and graded by the server, beside the same policy through the forage stage's
 *   `rollout` on the same tasks.
 * Targets (issue 42): reset p50 < 1 s, trivial step p50 < 50 ms, 16 idle sessions on 2 cores.
 *
 *   node dist/bench/serve.js --dataset out/demo/dataset [--rounds 10] [--idle 16]
 */
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import WebSocket from 'ws';
import { table } from '../core/table.js';
import { oraclePolicy, oracleTurns } from '../pipeline/agent/policies/oracle.js';
import { agentRunEnv, rollout } from '../pipeline/agent/rollout.js';
import { DEFAULTS } from '../pipeline/runtime/options.js';
import { serve } from '../pipeline/serve/server.js';
import { TaskCatalog } from '../pipeline/serve/task_picker.js';

const { values: args } = parseArgs({
  options: { dataset: { type: 'string' }, rounds: { type: 'string', default: '10' }, idle: { type: 'string', default: '16' } },
});

/** The server's replies, as far as the bench reads them. */
interface Msg {
  type: string;
  data: { observation?: { result?: { output: string } }; reward: number; done: boolean };
}

/** One WebSocket session: a request, then its reply. */
async function open(url: string): Promise<{ ask(m: object): Promise<Msg>; close(): void }> {
  const ws = new WebSocket(`${url.replace(/^http/, 'ws')}/ws`);
  await new Promise((resolve, reject) => {
    ws.once('open', resolve);
    ws.once('error', reject);
  });
  return {
    ask: (m) =>
      new Promise((resolve) => {
        ws.once('message', (d) => resolve(JSON.parse(d.toString()) as Msg));
        ws.send(JSON.stringify(m));
      }),
    close: () => ws.close(),
  };
}

const pct = (xs: number[], p: number) => [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor((p / 100) * xs.length))];
const ms = (s: number) => `${Math.round(s * 1000)} ms`;

async function timed<T>(fn: () => Promise<T>): Promise<[T, number]> {
  const started = process.hrtime.bigint();
  const value = await fn();
  return [value, Number(process.hrtime.bigint() - started) / 1e9];
}

async function settled(sessions: () => number): Promise<void> {
  while (sessions() > 0) await new Promise((r) => setTimeout(r, 50));
}

async function main(): Promise<void> {
  if (!args.dataset) throw new Error('--dataset OUT/dataset is required (a run whose env images are on this host: npm run demo)');
  const rounds = Number(args.rounds);
  const idle = Number(args.idle);
  const catalog = await TaskCatalog.load(args.dataset);
  const out = catalog.out;
  const limits = { memoryMb: 1024, cpus: 1, pids: 256, bashTimeoutS: 60, outputCap: 20_000 };
  const budgets = { maxTurns: 40, maxTokens: DEFAULTS.maxTokens, maxWallS: 600 };
  const options = { ...DEFAULTS, out, memoryMb: 1024, cpus: 1, pids: 256 };
  const server = await serve(catalog, {
    host: '127.0.0.1',
    port: 0,
    maxSessions: idle + 1,
    idleS: 600,
    record: false,
    budgets,
    limits,
    options,
    log: () => undefined,
  });
  const rows: string[][] = [];
  try {
    const first = catalog.all()[0].task.instance_id;
    const resets: number[] = [];
    for (let r = 0; r < rounds; r++) {
      const s = await open(server.url);
      const [reply, took] = await timed(() => s.ask({ type: 'reset', data: { task_id: first } }));
      if (reply.type !== 'observation') throw new Error(`reset failed: ${JSON.stringify(reply.data)}`);
      resets.push(took);
      s.close();
      await settled(server.sessions);
    }
    rows.push(['reset (warm image)', ms(pct(resets, 50)), ms(pct(resets, 95)), `${rounds} resets`]);

    const s = await open(server.url);
    await s.ask({ type: 'reset', data: { task_id: first } });
    const steps: number[] = [];
    for (let r = 0; r < rounds * 5; r++)
      steps.push((await timed(() => s.ask({ type: 'step', data: { type: 'call_tool', tool_name: 'bash', arguments: { command: 'true' } } })))[1]);
    s.close();
    await settled(server.sessions);
    rows.push(['step: bash true', ms(pct(steps, 50)), ms(pct(steps, 95)), `${steps.length} steps`]);

    const held = await Promise.all(Array.from({ length: idle }, () => open(server.url)));
    const [, heldS] = await timed(async () => {
      for (const h of held) {
        const reply = await h.ask({ type: 'reset', data: { task_id: first } });
        if (reply.type !== 'observation') throw new Error(`idle session refused: ${JSON.stringify(reply.data)}`);
      }
    });
    const answers = await Promise.all(
      held.map((h) => h.ask({ type: 'step', data: { type: 'call_tool', tool_name: 'bash', arguments: { command: 'echo up' } } })),
    );
    const up = answers.filter((a) => a.data.observation?.result?.output === 'up\n').length;
    rows.push(['sessions held at once', `${server.sessions()}`, '', `${up} of ${idle} answered a step; all reset in ${heldS.toFixed(1)} s`]);
    for (const h of held) h.close();
    await settled(server.sessions);

    const tasks = catalog.all();
    let servedRewards = 0;
    const [, servedS] = await timed(async () => {
      for (const { task } of tasks) {
        const c = await open(server.url);
        await c.ask({ type: 'reset', data: { task_id: task.instance_id, policy: 'oracle' } });
        const policy = oraclePolicy(task);
        for (let turn = 0; turn < oracleTurns(task); turn++) {
          const [call] = (await policy.next([])).toolCalls;
          const reply = await c.ask({ type: 'step', data: { type: 'call_tool', tool_name: call.name, arguments: JSON.parse(call.arguments) } });
          if (reply.data.done) {
            servedRewards += reply.data.reward;
            break;
          }
        }
        c.close();
      }
    });
    let forageRewards = 0;
    const [, forageS] = await timed(async () => {
      for (const { task, unit } of tasks) {
        const grade = {
          options,
          srcLayout: unit.srcLayout,
          vars: unit.vars,
          pytestArgs: unit.pytestArgs,
          hasTimeoutPlugin: unit.hasTimeoutPlugin,
          work: join(out, 'work', 'serve', 'bench'),
        };
        const traj = await rollout(
          task,
          oraclePolicy(task),
          { ...budgets, maxTurns: oracleTurns(task) },
          limits,
          agentRunEnv(unit.vars, unit.srcLayout),
          grade,
        );
        forageRewards += traj.reward;
      }
    });
    const perHour = (n: number, s: number) => `${Math.round((n / s) * 3600)} / h`;
    rows.push(['oracle episodes, served', perHour(tasks.length, servedS), '', `${servedRewards} of ${tasks.length} rewarded 1; ${servedS.toFixed(1)} s`]);
    rows.push([
      'oracle episodes, forage rollout',
      perHour(tasks.length, forageS),
      '',
      `${forageRewards} of ${tasks.length} rewarded 1; ${forageS.toFixed(1)} s`,
    ]);
  } finally {
    await server.close();
  }
  process.stdout.write(`${table([['what', 'p50 / value', 'p95', 'note'], ...rows])}\n`);
}

main().catch((e: unknown) => {
  process.stderr.write(`bench:serve: ${(e as Error).message}\n`);
  process.exit(1);
});
