/**
 * `npm run bench:chaos`: crash consistency under faults (issue 32). A real manifest (Debian corpus
 * projects, clone..forage and shard with small forage settings) is run once uninterrupted, then
 * under fault schedules, each ending with the same invariant checked (SQLite's and Jepsen's way:
 * fault at random, check the invariant after):
 *
 * - `run`, `worker` and `shard` SIGKILLed at seeded random moments, each kill followed by a rerun
 *   (which may be killed in turn), until one runs to its end;
 * - the Docker Engine restarted while a unit runs (gracefully, and as a crash), then a rerun;
 * - a full disk while `shard` writes (the output folder on a small loop-mounted ext4, filled to
 *   several levels), the shard retried while full, then with space;
 * - Redis restarted under three workers.
 *
 * After each schedule: the dataset's rows equal the uninterrupted run's (timing columns and the
 * known run-to-run values aside: `RUN_TO_RUN`), nothing missing or extra, no container, mount,
 * loop device, work folder, temporary file, stale version or lock left, and `worldline verify`
 * passes; after every kill, the published dataset (if any) still verifies and every ledger entry
 * parses. All Docker work runs on a private engine (bench/private_docker.ts): the machine's engine
 * and other people's containers are never touched. Needs root, dockerd, redis-server, a loop device.
 *
 *   node dist/bench/chaos.js [--projects isodate,h11,toolz] [--seed 1] [--run-kills 20]
 *     [--worker-kills 15] [--shard-kills 15] [--dir /tmp/worldline-bench-chaos] [--json FILE]
 *     [--cli OTHER/dist/bin/worldline.js]   (the schedules against another build: what they find there)
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { cpSync, existsSync, mkdirSync, readdirSync, readFileSync, readlinkSync, realpathSync, rmSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { Queue } from 'bullmq';
import { dirBytes } from '../core/disk.js';
import { mountsUnder } from '../core/mounts.js';
import { packageRoot } from '../core/package.js';
import { mulberry32 } from '../core/prng.js';
import { table } from '../core/table.js';
import { query } from '../datasets/duckdb.js';
import { redisConnection } from '../pipeline/queue/connection.js';
import { LoopDisk } from './loop_disk.js';
import { PrivateDocker } from './private_docker.js';
import { RedisServer } from './redis_server.js';

/** The unit stages every schedule runs, and the small forage settings (a task a unit, few mutants, capped traces). */
export const STAGES = 'clone,resolve,build,validate,trace,forage';
export const RUN_OPTIONS = [
  '--validate-runs',
  '1',
  '--mutation-tries',
  '6',
  '--mutations-per-unit',
  '1',
  '--issue-candidates',
  '0',
  '--trace-caps',
  '50,1Mi,1500,16Mi',
];

/**
 * Columns that differ between any two uninterrupted runs (measured on this manifest, two runs
 * compared column by column): timings, and the corpus's own values in traces (addresses and
 * hashes in reprs, as test/queue.test.ts says) and in trajectories (pytest's own timings in the
 * tool output the messages carry, and the id hashed from them).
 */
export const RUN_TO_RUN: Record<string, string[]> = {
  repos: ['build_seconds', 'validate_seconds', 'trace_episode_bytes'],
  tests: ['duration_seconds'],
  traces: ['frames', 'text', 'text_tokens', 'test_episode_bytes'],
  trajectories: ['trajectory_id', 'messages', 'messages_tokens', 'steps', 'wall_seconds'],
};

export interface Chaos {
  dir: string;
  manifest: string;
  units: number;
  /** The uninterrupted run's output folder, and its wall seconds. */
  ref: string;
  refSeconds: number;
  engine: PrivateDocker;
  /** Environment of every Worldline process: the private engine, a mirrors cache of its own. */
  env: Record<string, string>;
  /** Uniform in [0, 1), seeded. */
  rng: () => number;
  log: (m: string) => void;
}

export interface KillPoint {
  command: 'run' | 'worker' | 'shard';
  /** Seconds after the process started. */
  at: number;
  /** What it was doing: the stages of the units in flight, `startup`, or `shard`. */
  where: string;
}

/** What a schedule left: rows against the reference, leftovers, verify, and what went wrong on the way. */
export interface Outcome {
  schedule: string;
  kills: KillPoint[];
  missing: number;
  extra: number;
  leftovers: string[];
  verified: boolean;
  problems: string[];
  notes: string[];
}

interface Proc {
  child: ChildProcess;
  /** `hung`: still running after the harness's patience ran out, and SIGKILLed for it. */
  done: Promise<{ code: number | null; signal: NodeJS.Signals | null; stdout: string; stderr: string; hung: boolean }>;
  stderr: () => string;
}

/** Minutes any one process may take before it counts as hung (a wedged lock, a wait that never returns). */
const PATIENCE_MIN = 15;

/** The Worldline under test: this tree's build, or another's (`--cli`, WORLDLINE_CHAOS_CLI) to see what the harness finds there. */
const cliPath = () => process.env.WORLDLINE_CHAOS_CLI ?? join(packageRoot, 'dist/bin/worldline.js');

/** A Worldline command as its own process, against the private engine. */
export function worldline(c: Pick<Chaos, 'env'>, args: string[]): Proc {
  const child = spawn(process.execPath, [cliPath(), ...args], { env: { ...process.env, ...c.env }, stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  let hung = false;
  child.stdout?.on('data', (d) => (stdout += d));
  child.stderr?.on('data', (d) => (stderr += d));
  const patience = setTimeout(() => {
    hung = true;
    child.kill('SIGKILL');
  }, PATIENCE_MIN * 60_000);
  const done = new Promise<{ code: number | null; signal: NodeJS.Signals | null; stdout: string; stderr: string; hung: boolean }>((r) =>
    child.on('close', (code, signal) => {
      clearTimeout(patience);
      r({ code, signal, stdout, stderr: hung ? `${stderr}\n[harness: SIGKILLed after ${PATIENCE_MIN} min: hung]` : stderr, hung });
    }),
  );
  return { child, done, stderr: () => stderr };
}

/** The stages of the units a process's JSON progress shows in flight (`startup` before any, `shard` after every unit). */
function whereOf(stderr: string, command: KillPoint['command']): string {
  if (command === 'shard') return 'shard';
  const at = new Map<string, string>();
  let units = 0;
  let ended = 0;
  for (const line of stderr.split('\n')) {
    if (!line.startsWith('{')) continue;
    let e: { event?: string; unit_id?: string; stage?: string; units?: number };
    try {
      e = JSON.parse(line);
    } catch {
      continue;
    }
    if (e.event === 'start') units = e.units ?? 0;
    if (e.event === 'stage' && e.unit_id) at.set(e.unit_id, e.stage ?? '?');
    if (e.event === 'unit' && e.unit_id) {
      at.delete(e.unit_id);
      ended += 1;
    }
  }
  if (at.size) return [...new Set(at.values())].sort().join('+');
  if (command === 'run' && units && ended >= units) return 'shard';
  return ended ? 'between units' : 'startup';
}

/**
 * A chain's first process that ran to its end did the whole manifest: its wall time is what the
 * next kills are drawn over (the reference's may have run on a busier engine).
 */
function calibrate(c: Chaos, r: { killed: boolean; code: number | null; seconds: number }, whole: boolean): void {
  if (whole && !r.killed && r.code === 0) c.refSeconds = r.seconds;
}

/** Runs `args`, SIGKILLed `killAfterS` seconds in unless it ends first (null: never). */
async function runKilled(c: Chaos, command: KillPoint['command'], args: string[], killAfterS: number | null) {
  const started = Date.now();
  const p = worldline(c, args);
  const timer = killAfterS === null ? undefined : setTimeout(() => p.child.kill('SIGKILL'), killAfterS * 1000);
  const r = await p.done;
  clearTimeout(timer);
  const killed = r.signal === 'SIGKILL' && !r.hung;
  const seconds = (Date.now() - started) / 1000;
  const point: KillPoint | null = killed ? { command, at: Math.round(seconds * 10) / 10, where: whereOf(r.stderr, command) } : null;
  return { ...r, killed, point, seconds };
}

const ledgerFiles = (out: string) =>
  existsSync(join(out, 'ledger'))
    ? readdirSync(join(out, 'ledger'), { withFileTypes: true })
        .filter((d) => d.isDirectory())
        .flatMap((d) => readdirSync(join(out, 'ledger', d.name)).map((n) => join(out, 'ledger', d.name, n)))
        .filter((f) => f.endsWith('.json'))
    : [];

/** Share of the (unit, stage) ledger entries done, for where the next kill may land. */
function doneShare(c: Chaos, out: string): number {
  const ok = ledgerFiles(out).filter((f) => {
    try {
      return JSON.parse(readFileSync(f, 'utf8')).status === 'ok';
    } catch {
      return false;
    }
  }).length;
  return Math.min(1, ok / (c.units * STAGES.split(',').length));
}

/** Seconds of work a rerun on `out` has left, about: the reference's share of what the ledger lacks, and a start. */
const left = (c: Chaos, out: string) => 0.9 * (c.refSeconds * (1 - doneShare(c, out)) + 1);

/** What must hold right after a kill: every ledger entry whole, and the published dataset (if any) still verifying. */
export async function afterKill(c: Chaos, out: string): Promise<string[]> {
  const problems: string[] = [];
  for (const f of ledgerFiles(out)) {
    try {
      JSON.parse(readFileSync(f, 'utf8'));
    } catch (e) {
      problems.push(`torn ledger entry ${f}: ${(e as Error).message}`);
    }
  }
  if (existsSync(join(out, 'dataset'))) {
    const v = await worldline(c, ['verify', join(out, 'dataset')]).done;
    if (v.code !== 0) problems.push(`the published dataset does not verify after a kill: ${v.stdout.slice(-400)}`);
  }
  return problems;
}

/** Rows of every config the reference has, run-to-run columns left out, compared as multisets. */
export async function compareRows(out: string, ref: string): Promise<{ missing: number; extra: number; byConfig: Record<string, [number, number]> }> {
  const configs = Object.keys((JSON.parse(readFileSync(join(ref, 'dataset', 'manifest.json'), 'utf8')) as { configs: object }).configs);
  let missing = 0;
  let extra = 0;
  const byConfig: Record<string, [number, number]> = {};
  const rowsOf = async (folder: string, config: string) => {
    const skip = RUN_TO_RUN[config] ?? [];
    const glob = join(realpathSync(join(folder, 'dataset')), config, 'data', '*.parquet');
    const rows = await query<Record<string, unknown>>(`select * ${skip.length ? `exclude (${skip.join(', ')})` : ''} from '${glob}'`);
    const counts = new Map<string, number>();
    for (const r of rows) {
      const key = JSON.stringify(r, (_, v) => (typeof v === 'bigint' ? Number(v) : v));
      counts.set(key, (counts.get(key) ?? 0) + 1);
    }
    return counts;
  };
  for (const config of configs) {
    const [a, b] = [await rowsOf(ref, config), await rowsOf(out, config)];
    let m = 0;
    let x = 0;
    for (const [k, n] of a) m += Math.max(0, n - (b.get(k) ?? 0));
    for (const [k, n] of b) x += Math.max(0, n - (a.get(k) ?? 0));
    byConfig[config] = [m, x];
    missing += m;
    extra += x;
  }
  return { missing, extra, byConfig };
}

/** Names a killed or failed writer leaves: temporary files, unfinished shards, links, lock claims, spills. */
const TEMP_NAME = /\.tmp(-|$)|\.partial$|\.link-\d+$|\.claim-|^\.spill$/;

/** Everything a schedule must not leave: containers, mounts, loop devices, scratch, temporary files, stale versions, locks. */
export function leftovers(c: Pick<Chaos, 'engine'>, out: string): string[] {
  const found: string[] = [];
  // Only the harness runs containers on its engine, and nothing of it runs between schedules.
  for (const id of c.engine.containers()) found.push(`container ${id.slice(0, 12)}`);
  for (const m of mountsUnder(out)) found.push(`mount ${m}`);
  const root = realpathSync(out);
  for (const loop of existsSync('/sys/block') ? readdirSync('/sys/block').filter((n) => n.startsWith('loop')) : []) {
    const file = join('/sys/block', loop, 'loop', 'backing_file');
    const backing = existsSync(file) ? readFileSync(file, 'utf8').trim() : '';
    if (backing.startsWith(`${root}/`)) found.push(`loop device /dev/${loop} on ${backing}`);
  }
  for (const area of ['work', 'progress']) {
    const dir = join(out, area);
    for (const kind of existsSync(dir) ? readdirSync(dir) : []) {
      const sub = join(dir, kind);
      for (const e of readdirSync(sub)) found.push(`${area}/${kind}/${e}`);
    }
  }
  const walk = (dir: string, rel: string) => {
    for (const e of readdirSync(dir, { withFileTypes: true })) {
      const path = join(dir, e.name);
      const r = rel ? `${rel}/${e.name}` : e.name;
      if (TEMP_NAME.test(e.name)) found.push(`temporary ${r}`);
      // Checkouts are the repositories' own files; work and progress are counted above.
      if (e.isDirectory() && !['checkouts', 'work', 'progress'].includes(r)) walk(path, r);
    }
  };
  walk(out, '');
  const versions = join(out, 'dataset-versions');
  const published = existsSync(join(out, 'dataset')) ? readlinkSync(join(out, 'dataset')) : '';
  for (const v of existsSync(versions) ? readdirSync(versions) : []) if (!published.endsWith(v)) found.push(`unpublished version ${v}`);
  if (existsSync(`${versions}.lock`)) found.push('the writers lock');
  return found;
}

/** The end of a schedule: rows against the reference, leftovers, verify. */
async function settle(c: Chaos, schedule: string, out: string, kills: KillPoint[], problems: string[], notes: string[] = []): Promise<Outcome> {
  let missing = 0;
  let extra = 0;
  let verified = false;
  if (existsSync(join(out, 'dataset', 'manifest.json'))) {
    const rows = await compareRows(out, c.ref);
    missing = rows.missing;
    extra = rows.extra;
    if (missing || extra) notes.push(`rows missing/extra by config: ${JSON.stringify(rows.byConfig)}`);
    verified = (await worldline(c, ['verify', join(out, 'dataset')]).done).code === 0;
  } else problems.push('no dataset was published');
  const left = leftovers(c, out);
  const o = { schedule, kills, missing, extra, leftovers: left, verified, problems, notes };
  c.log(
    `${schedule}: ${kills.length} kill(s); rows missing ${missing}, extra ${extra}; leftovers ${left.length ? left.join(', ') : 'none'}; verify ${verified ? 'ok' : 'FAILED'}${problems.length ? `; problems: ${problems.join('; ')}` : ''}`,
  );
  return o;
}

export const runArgs = (c: Chaos, out: string) => ['run', '--manifest', c.manifest, '--out', out, '--stages', `${STAGES},shard`, ...RUN_OPTIONS];

let folders = 0;
export const fresh = (c: Chaos, name: string) => {
  const out = join(c.dir, `${name}-${++folders}`);
  rmSync(out, { recursive: true, force: true });
  return out;
};

/**
 * `run` SIGKILLed at random moments: chains of runs on one output folder, each killed somewhere in
 * what is left of its work (estimated from the ledger and the reference's wall time) until one
 * runs to its end (at most `perChain` kills a chain); chains until `kills` kill points.
 */
export async function runKills(c: Chaos, kills: number, perChain = 6): Promise<Outcome[]> {
  const outcomes: Outcome[] = [];
  const made = { kills: 0 };
  while (made.kills < kills) {
    const out = fresh(c, 'run-kills');
    const { points, problems } = await killChain(c, 'run', runArgs(c, out), out, Math.min(perChain, kills - made.kills), made);
    outcomes.push(await settle(c, `run SIGKILLed ${points.length}x`, out, points, problems));
  }
  return outcomes;
}

/**
 * One command on `out`, SIGKILLed at a moment drawn over what is left of its work and started
 * again, `kills` times; then once more to its end. `made` counts the kills of every chain.
 */
async function killChain(c: Chaos, command: 'run' | 'worker', args: string[], out: string, kills: number, made: { kills: number }) {
  const points: KillPoint[] = [];
  const problems: string[] = [];
  // A worker started after a kill first waits out the dead one's job locks (10-20 s): its kills are drawn after that.
  const wait = (n: number) => (command === 'worker' && n ? 10 : 0);
  for (;;) {
    const killAt = points.length < kills ? 0.3 + wait(points.length) + c.rng() * left(c, out) : null;
    const r = await runKilled(c, command, args, killAt);
    calibrate(c, r, points.length === 0);
    if (r.point) {
      points.push(r.point);
      made.kills += 1;
      problems.push(...(await afterKill(c, out)));
      continue;
    }
    if (r.code !== 0) problems.push(`${command} exited ${r.code}: ${r.stderr.slice(-600)}`);
    return { points, problems };
  }
}

/** Enqueues the manifest on `queue`. */
export async function enqueue(c: Chaos, out: string, redis: string, queue: string): Promise<void> {
  const r = await worldline(c, ['enqueue', '--manifest', c.manifest, '--out', out, '--stages', STAGES, ...RUN_OPTIONS, '--redis', redis, '--queue', queue])
    .done;
  if (r.code !== 0 || !r.stdout.startsWith(`${c.units} unit(s) queued`)) throw new Error(`enqueue exited ${r.code}: ${r.stdout} ${r.stderr}`);
}

/** A queue name no earlier schedule (of any run of the harness on this Redis) used. */
export const queueName = () => `chaos-${process.pid}-${folders}`;

/** The queue's job counts, and how many attempts each completed job started. */
export async function queueState(redis: string, name: string) {
  const q = new Queue(name, { connection: redisConnection(redis) });
  try {
    const counts = await q.getJobCounts('completed', 'failed', 'waiting', 'active', 'delayed');
    const started = (await q.getJobs(['completed'])).map((j) => j.attemptsStarted);
    return { counts, started };
  } finally {
    await q.close();
  }
}

export const workerArgs = (out: string, redis: string, queue: string, concurrency: number) => [
  'worker',
  '--out',
  out,
  '--redis',
  redis,
  '--queue',
  queue,
  '--concurrency',
  String(concurrency),
  // A dead worker's job is taken over 10-20 s after it died (the default 30 s doubles that).
  '--lock-duration',
  '10',
  '--exit-when-drained',
  '--json',
];

/** The queue drained with every unit done once and none dead; then `shard`. */
async function queueDone(c: Chaos, out: string, redis: string, queue: string, problems: string[], notes: string[]): Promise<void> {
  const s = await queueState(redis, queue);
  if (s.counts.completed !== c.units || s.counts.failed || s.counts.waiting || s.counts.active || s.counts.delayed)
    problems.push(`queue not drained as it should be: ${JSON.stringify(s.counts)}`);
  notes.push(`attempts started per completed job: ${s.started.sort().join(',')}`);
  const sh = await worldline(c, ['shard', '--out', out]).done;
  if (sh.code !== 0) problems.push(`shard exited ${sh.code}: ${sh.stderr.slice(-400)}`);
}

/**
 * `worker` SIGKILLed at random moments: one worker at a time on a queue of the manifest, killed,
 * started again, until one drains the queue. A chain has at most 3 kills: a 4th death of the same
 * job's worker makes it a dead letter by design (maxStalledCount), which is not a loss.
 */
export async function workerKills(c: Chaos, redis: RedisServer, kills: number, perChain = 3): Promise<Outcome[]> {
  const outcomes: Outcome[] = [];
  const made = { kills: 0 };
  while (made.kills < kills) {
    const out = fresh(c, 'worker-kills');
    const queue = queueName();
    await enqueue(c, out, redis.url, queue);
    const notes: string[] = [];
    const chain = await killChain(c, 'worker', workerArgs(out, redis.url, queue, 2), out, Math.min(perChain, kills - made.kills), made);
    await queueDone(c, out, redis.url, queue, chain.problems, notes);
    outcomes.push(await settle(c, `worker SIGKILLed ${chain.points.length}x`, out, chain.points, chain.problems, notes));
  }
  return outcomes;
}

/**
 * `shard` SIGKILLed at random moments of its writing, over a folder whose units are all done and
 * whose dataset is published: after each kill the published version still verifies and holds the
 * reference's rows; then a shard that runs to its end.
 */
export async function shardKills(c: Chaos, from: string, kills: number): Promise<Outcome> {
  const out = fresh(c, 'shard-kills');
  for (const part of ['ledger', 'parts']) cpSync(join(from, part), join(out, part), { recursive: true });
  const problems: string[] = [];
  const points: KillPoint[] = [];
  const first = Date.now();
  const sh = await worldline(c, ['shard', '--out', out]).done;
  if (sh.code !== 0) problems.push(`shard exited ${sh.code}: ${sh.stderr.slice(-400)}`);
  const seconds = (Date.now() - first) / 1000;
  while (points.length < kills) {
    const r = await runKilled(c, 'shard', ['shard', '--out', out], 0.05 + c.rng() * seconds);
    if (!r.point) continue;
    points.push(r.point);
    problems.push(...(await afterKill(c, out)));
    const rows = await compareRows(out, c.ref);
    if (rows.missing || rows.extra) problems.push(`after a shard kill the published rows differ: ${JSON.stringify(rows.byConfig)}`);
  }
  const last = await worldline(c, ['shard', '--out', out]).done;
  if (last.code !== 0) problems.push(`shard exited ${last.code}: ${last.stderr.slice(-400)}`);
  return settle(c, `shard SIGKILLed ${points.length}x`, out, points, problems, [`an uninterrupted shard took ${seconds.toFixed(1)} s`]);
}

/** Waits until a process's stderr matches `seen`; false when it ended first. */
export async function untilStderr(p: Proc, seen: RegExp, everyMs = 100): Promise<boolean> {
  let ended = false;
  void p.done.then(() => {
    ended = true;
  });
  while (!ended && !seen.test(p.stderr())) await sleep(everyMs);
  return !ended;
}

/** Waits until a process's progress shows a unit in one of `stages`; false when it ended first. */
export const untilStage = (p: Proc, stages: string[]): Promise<boolean> =>
  untilStderr(p, new RegExp(`"event":"stage","unit_id":"[^"]+","stage":"(${stages.join('|')})"`));

/**
 * The Docker Engine restarted while a unit runs in `stage` (graceful: as a service manager
 * restarts it; else killed and started again, as after a crash), then a rerun.
 */
export async function dockerRestart(c: Chaos, stage: string, graceful: boolean): Promise<Outcome> {
  const out = fresh(c, `docker-${graceful ? 'restart' : 'crash'}`);
  const problems: string[] = [];
  const notes: string[] = [];
  const p = worldline(c, runArgs(c, out));
  if (await untilStage(p, [stage])) {
    await sleep(c.rng() * 2000);
    const t0 = Date.now();
    await c.engine.restart(graceful);
    notes.push(`engine ${graceful ? 'restarted' : 'killed and started'} during ${stage} (${((Date.now() - t0) / 1000).toFixed(1)} s down)`);
  } else problems.push(`the run ended before any unit reached ${stage}`);
  const r = await p.done;
  if (r.hung) problems.push(`the run under the ${graceful ? 'restart' : 'crash'} hung (SIGKILLed after ${PATIENCE_MIN} min)`);
  const lost = (r.stderr.match(/"event":"unit"[^\n]*not recorded: the Docker Engine went away/g) ?? []).length;
  notes.push(`the run under the restart exited ${r.code}; ${lost} unit(s) had a stage not recorded for the engine's loss`);
  const again = await worldline(c, runArgs(c, out)).done;
  if (again.code !== 0) problems.push(`the rerun exited ${again.code}: ${again.stderr.slice(-600)}`);
  return settle(c, `Docker Engine ${graceful ? 'restart' : 'crash'} in ${stage}`, out, [], problems, notes);
}

/** The rows of every config of the published dataset, counted (a reader beside a writer). */
async function readable(out: string): Promise<boolean> {
  try {
    const m = JSON.parse(readFileSync(join(out, 'dataset', 'manifest.json'), 'utf8')) as { configs: Record<string, { rows: number }> };
    const root = realpathSync(join(out, 'dataset'));
    for (const [config, { rows }] of Object.entries(m.configs)) {
      const [{ n }] = await query<{ n: bigint }>(`select count(*) as n from '${join(root, config, 'data', '*.parquet')}'`);
      if (Number(n) !== rows) return false;
    }
    return true;
  } catch {
    return false;
  }
}

/**
 * A full disk while `shard` writes: the output folder on a small loop-mounted ext4, a dataset
 * published, then for each of `levels` (shares of what a shard needs beyond what it had) the disk
 * filled to leave only that much: the shard fails, the published version stays as it was and is
 * read throughout, the retry fails alike, and with the space back the retry publishes the same rows.
 */
export async function fullDisk(c: Chaos, from: string, levels: number[]): Promise<Outcome> {
  const mount = join(c.dir, 'full-disk');
  const parts = dirBytes(join(from, 'ledger')) + dirBytes(join(from, 'parts'));
  const version = dirBytes(realpathSync(join(from, 'dataset')));
  // Room for the inputs, the shard's spill (rows uncompressed, about the part files' size), two
  // versions, and ext4's own metadata.
  const disk = LoopDisk.create(`${mount}.img`, mount, Math.ceil((2.5 * parts + 4 * version) * 1.2) + (16 << 20));
  const out = join(mount, 'out');
  const problems: string[] = [];
  const notes: string[] = [];
  try {
    for (const part of ['ledger', 'parts']) cpSync(join(from, part), join(out, part), { recursive: true });
    const shard = () => worldline(c, ['shard', '--out', out]);
    const first = await shard().done;
    if (first.code !== 0) {
      problems.push(`the first shard failed with ${Math.round(disk.free() / 1e6)} MB free: ${first.stderr.slice(-400)}`);
      return await settle(c, 'full disk while shard writes', out, [], problems, notes);
    }
    // What a shard takes beyond what is there (the new version and its spill, the old one kept), by polling.
    const before = disk.free();
    let least = before;
    const p = shard();
    const poll = setInterval(() => {
      least = Math.min(least, disk.free());
    }, 20);
    await p.done;
    clearInterval(poll);
    const needs = Math.max(before - least, version);
    notes.push(`disk ${Math.round(before / 1e6)} MB free; a shard takes up to ${(needs / 1e6).toFixed(1)} MB more`);
    for (const level of levels) {
      const published = realpathSync(join(out, 'dataset'));
      disk.fill(Math.floor(needs * level));
      for (const attempt of ['fails', 'retried while full']) {
        const s = shard();
        let reads = 0;
        let unreadable = 0;
        let ended = false;
        void s.done.then(() => {
          ended = true;
        });
        while (!ended) {
          if (await readable(out)) reads++;
          else unreadable++;
        }
        const r = await s.done;
        if (r.code === 0) {
          notes.push(`with ${Math.round(needs * level)} bytes free the shard (${attempt}) succeeded`);
          break;
        }
        if (!/ENOSPC|no space/i.test(r.stderr)) problems.push(`the shard failed otherwise than for space: ${r.stderr.slice(-300)}`);
        if (realpathSync(join(out, 'dataset')) !== published) problems.push('a failed shard changed the published version');
        if (unreadable) problems.push(`the published version was unreadable ${unreadable} time(s) while the shard ${attempt}`);
        problems.push(...(await afterKill(c, out)));
        const rows = await compareRows(out, c.ref);
        if (rows.missing || rows.extra) problems.push(`the published rows changed under a failed shard: ${JSON.stringify(rows.byConfig)}`);
        const left = leftovers(c, out);
        if (left.length) problems.push(`a failed shard left: ${left.join(', ')}`);
        notes.push(`${Math.round(needs * level)} bytes free: shard ${attempt}: exit ${r.code}, ENOSPC; previous version read ${reads} time(s) meanwhile`);
      }
      disk.unfill();
      const ok = await shard().done;
      if (ok.code !== 0) problems.push(`with the space back the shard exited ${ok.code}: ${ok.stderr.slice(-300)}`);
    }
    return await settle(c, `full disk while shard writes (${levels.length} level(s))`, out, [], problems, notes);
  } finally {
    disk.destroy();
  }
}

/** Redis restarted (SIGTERM, append-only file) while three workers run units in `stage`. */
export async function redisRestart(c: Chaos, redis: RedisServer, stage: string): Promise<Outcome> {
  const out = fresh(c, 'redis-restart');
  const queue = queueName();
  const problems: string[] = [];
  const notes: string[] = [];
  await enqueue(c, out, redis.url, queue);
  const workers = [0, 1, 2].map(() => worldline(c, workerArgs(out, redis.url, queue, 1)));
  let ended = false;
  void Promise.all(workers.map((w) => w.done)).then(() => {
    ended = true;
  });
  const seen = new RegExp(`"event":"stage","unit_id":"[^"]+","stage":"${stage}"`);
  while (!ended && !workers.some((w) => seen.test(w.stderr()))) await sleep(100);
  if (!ended) {
    await redis.restart();
    notes.push(`Redis restarted while a worker ran ${stage}`);
  } else problems.push(`the workers drained before any reached ${stage}`);
  const results = await Promise.all(workers.map((w) => w.done));
  for (const r of results) if (r.code !== 0) problems.push(`a worker exited ${r.code}: ${r.stderr.slice(-400)}`);
  const done = results.reduce((n, r) => n + ((JSON.parse(r.stdout || '{}') as { done?: number }).done ?? 0), 0);
  notes.push(`units done by the workers: ${done} of ${c.units}`);
  if (done !== c.units) problems.push(`the workers did ${done} units, not ${c.units}`);
  await queueDone(c, out, redis.url, queue, problems, notes);
  return settle(c, 'Redis restart under 3 workers', out, [], problems, notes);
}

/** A manifest line per corpus project. */
export function manifestOf(projects: { path: string; commit: string; project: { apt: string[]; pytestArgs: string[] } }[]): string {
  return (
    projects.map((p) => JSON.stringify({ repo: p.path, commit: p.commit, env: { apt: p.project.apt, pytest_args: p.project.pytestArgs } })).join('\n') + '\n'
  );
}

/**
 * The reference: the manifest run uninterrupted on the machine's engine (where env images can be
 * built with the network), its images then copied into the private engine.
 */
export async function prepare(opts: {
  dir: string;
  manifest: string;
  units: number;
  seed: number;
  log: (m: string) => void;
  engineName?: string;
}): Promise<Chaos> {
  const mirrors = join(opts.dir, 'mirrors');
  const ref = join(opts.dir, 'ref');
  rmSync(ref, { recursive: true, force: true });
  const base = { env: { WORLDLINE_MIRRORS: mirrors } };
  const started = Date.now();
  const r = await worldline(base, ['run', '--manifest', opts.manifest, '--out', ref, '--stages', `${STAGES},shard`, ...RUN_OPTIONS]).done;
  if (r.code !== 0) throw new Error(`the reference run exited ${r.code}: ${r.stderr.slice(-2000)}`);
  const refSeconds = (Date.now() - started) / 1000;
  const images = readdirSync(join(ref, 'ledger', 'build')).map(
    (f) => (JSON.parse(readFileSync(join(ref, 'ledger', 'build', f), 'utf8')) as { record: { image: string; base: string } }).record,
  );
  const engine = await PrivateDocker.start(join(opts.dir, 'engine'), opts.engineName);
  engine.loadImages([...new Set(images.flatMap((i) => [i.base, i.image]))]);
  const rng = mulberry32(opts.seed);
  return {
    dir: opts.dir,
    manifest: opts.manifest,
    units: opts.units,
    ref,
    refSeconds,
    engine,
    env: { WORLDLINE_MIRRORS: mirrors, ...engine.env },
    rng: () => rng() / 2 ** 32,
    log: opts.log,
  };
}

/** The figures of a set of outcomes, one line a schedule. */
export function summary(outcomes: Outcome[]): string {
  return table([
    ['schedule', 'kills', 'rows missing', 'rows extra', 'leftovers', 'verify', 'problems'],
    ...outcomes.map((o) => [o.schedule, o.kills.length, o.missing, o.extra, o.leftovers.length, o.verified ? 'ok' : 'FAILED', o.problems.length]),
  ]);
}

async function main(): Promise<void> {
  const { values: a } = parseArgs({
    options: {
      projects: { type: 'string', default: 'isodate,h11,toolz' },
      seed: { type: 'string', default: '1' },
      'run-kills': { type: 'string', default: '20' },
      'worker-kills': { type: 'string', default: '15' },
      'shard-kills': { type: 'string', default: '15' },
      dir: { type: 'string', default: '/tmp/worldline-bench-chaos' },
      json: { type: 'string' },
      cli: { type: 'string' },
    },
  });
  if (a.cli) process.env.WORLDLINE_CHAOS_CLI = resolve(a.cli);
  const dir = resolve(a.dir!);
  mkdirSync(dir, { recursive: true });
  const log = (m: string) => process.stderr.write(`[chaos ${new Date().toISOString().slice(11, 19)}] ${m}\n`);
  const { materializeCorpus } = await import('../test/corpus.js');
  const projects = await materializeCorpus(a.projects!.split(','), join(dir, 'corpus'));
  const manifest = join(dir, 'manifest.jsonl');
  writeFileSync(manifest, manifestOf(projects));
  const t0 = Date.now();
  const c = await prepare({ dir, manifest, units: projects.length, seed: Number(a.seed), log });
  // A Redis of its own, empty: queues of an earlier run of the harness would answer for this one's.
  rmSync(join(dir, 'redis'), { recursive: true, force: true });
  mkdirSync(join(dir, 'redis'), { recursive: true });
  const redis = await RedisServer.start(join(dir, 'redis'));
  const outcomes: Outcome[] = [];
  try {
    log(`reference (machine's engine): ${c.refSeconds.toFixed(1)} s`);
    // The same run uninterrupted on the private engine: the comparison finds nothing there.
    const base = fresh(c, 'uninterrupted');
    const t = Date.now();
    const r = await worldline(c, runArgs(c, base)).done;
    if (r.code !== 0) throw new Error(`the uninterrupted run on the private engine exited ${r.code}: ${r.stderr.slice(-1000)}`);
    c.refSeconds = (Date.now() - t) / 1000;
    outcomes.push(await settle(c, 'uninterrupted (private engine)', base, [], []));
    outcomes.push(...(await runKills(c, Number(a['run-kills']))));
    outcomes.push(...(await workerKills(c, redis, Number(a['worker-kills']))));
    outcomes.push(await shardKills(c, base, Number(a['shard-kills'])));
    for (const stage of ['validate', 'trace', 'forage']) outcomes.push(await dockerRestart(c, stage, true));
    outcomes.push(await dockerRestart(c, 'trace', false));
    outcomes.push(await fullDisk(c, base, [0.05, 0.3, 0.6, 0.9]));
    outcomes.push(await redisRestart(c, redis, 'trace'));
  } finally {
    await redis.stop();
    await c.engine.stop();
  }
  const kills = outcomes.flatMap((o) => o.kills);
  const by = (cmd: string) => kills.filter((k) => k.command === cmd);
  const where = (cmd: string) => {
    const n = new Map<string, number>();
    for (const k of by(cmd)) n.set(k.where, (n.get(k.where) ?? 0) + 1);
    return [...n].map(([w, k]) => `${w} ${k}`).join(', ');
  };
  process.stdout.write(`${summary(outcomes)}\n\n`);
  process.stdout.write(
    `kill points: ${kills.length} (run ${by('run').length}: ${where('run')}; worker ${by('worker').length}: ${where('worker')}; shard ${by('shard').length})\n`,
  );
  process.stdout.write(
    `rows missing ${outcomes.reduce((n, o) => n + o.missing, 0)}, extra ${outcomes.reduce((n, o) => n + o.extra, 0)}; leftovers ${outcomes.reduce((n, o) => n + o.leftovers.length, 0)}; problems ${outcomes.reduce((n, o) => n + o.problems.length, 0)}; ${((Date.now() - t0) / 60000).toFixed(1)} min\n`,
  );
  for (const o of outcomes) for (const n of [...o.problems, ...o.notes, ...o.leftovers]) process.stdout.write(`  ${o.schedule}: ${n}\n`);
  if (a.json) writeFileSync(a.json, JSON.stringify(outcomes, null, 2));
}

if (process.argv[1] === fileURLToPath(import.meta.url)) await main();
