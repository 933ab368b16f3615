/**
 * `npm run bench:queue`: the queue's own cost, without Docker.
 *
 *   node dist/bench/queue.js [--units 21000] [--procs 1,2,4,8] [--slots 8] [--scale 0.1] [--seed 1] [--jobs unit|stage]
 *
 * 1. `--units` simulated units (a generated manifest) go through `enqueueManifest` and the real
 *    worker (`runWorker`, BullMQ, a local redis-server with append-only persistence) in 1, 2, 4, 8
 *    worker processes of `--slots` concurrent jobs each. The job handler sleeps a seeded 50-500 ms
 *    per unit times `--scale` (default 0.1: 5-50 ms, so 21,000 units take minutes, not hours; the
 *    scheduling cost per job does not shrink with it, so the overhead figures are if anything
 *    pessimistic). Printed: jobs/s, efficiency (the sleep time divided by wall x slots), the
 *    scheduling overhead per job (wall x slots - sleep, per job), scaling against linear from one
 *    process, and Redis memory per queued job (used_memory before and after the enqueue).
 *    `--jobs stage`: the same units as one job per (unit, stage), 4 stages, each job a quarter of a
 *    unit's sleep (jobs with no ordering between a unit's stages: the most a per-stage split could
 *    balance), to weigh the extra scheduling of 4x the jobs against what it balances.
 * 2. The ledger at corpus size: 5 stages x `--units` entries, then `status` (readStatus) and a
 *    no-op rerun through the real executor (runStages; every stage answered from the ledger).
 */
import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { hashOf } from '../core/hashing.js';
import { table } from '../core/table.js';
import { enqueueManifest } from '../pipeline/queue/enqueue.js';
import type { UnitHandler } from '../pipeline/queue/unit_worker.js';
import { runWorker } from '../pipeline/queue/unit_worker.js';
import { runStages } from '../pipeline/runtime/executor.js';
import { Ledger, STAGES } from '../pipeline/runtime/ledger.js';
import { readManifest } from '../pipeline/runtime/manifest.js';
import { DEFAULTS } from '../pipeline/runtime/options.js';
import { failed, type Stage } from '../pipeline/runtime/stage.js';
import { readStatus } from '../pipeline/runtime/status.js';
import { RedisServer } from './redis_server.js';

const arg = (name: string, fallback: string) => {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 ? process.argv[i + 1] : fallback;
};

/** A unit's seeded sleep: 50-500 ms from a hash of the seed and its id, times the scale. */
const sleepMs = (seed: string, unitId: string, scale: number) =>
  (50 + (createHash('sha256').update(`${seed}:${unitId}`).digest().readUInt32BE(0) % 451)) * scale;

const BENCH_STAGES = ['clone', 'build', 'validate', 'trace'] as const;
/** Jobs per unit, or per (unit, stage): then a job is a quarter of a unit's sleep. */
const perJob = (jobs: string) => (jobs === 'stage' ? 1 / BENCH_STAGES.length : 1);

/** Child mode: one worker process draining the queue with a sleeping handler; prints its figures. */
async function workerProcess(): Promise<void> {
  const scale = Number(arg('scale', '0.1')) * perJob(arg('jobs', 'unit'));
  const seed = arg('seed', '1');
  let first = Infinity;
  let last = 0;
  const handler: UnitHandler = async (data, _out, _attempt, _log, onStage) => {
    first = Math.min(first, Date.now());
    for (const s of data.stages) onStage(s);
    await sleep(sleepMs(seed, data.unit.id, scale));
    last = Date.now();
    return { unit: data.unit, status: 'ok', stage: data.stages.at(-1) ?? null, reason: null, ran: data.stages };
  };
  const totals = await runWorker(
    {
      redis: arg('redis', ''),
      queue: arg('queue', ''),
      out: arg('out', ''),
      concurrency: Number(arg('slots', '8')),
      lockDurationMs: 30_000,
      exitWhenDrained: true,
      handler,
    },
    () => undefined,
  );
  process.stdout.write(JSON.stringify({ ...totals, first, last }) + '\n');
}

function spawnWorker(args: string[]): Promise<{ done: number; first: number; last: number }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [fileURLToPath(import.meta.url), '--worker', ...args], { stdio: ['ignore', 'pipe', 'inherit'] });
    let out = '';
    child.stdout.on('data', (d) => (out += d));
    child.on('close', (code) => (code === 0 ? resolve(JSON.parse(out)) : reject(new Error(`bench worker exited ${code}`))));
  });
}

async function queueBench(dir: string, units: number, procsList: number[], slots: number, scale: number, seed: string, jobs: string): Promise<void> {
  const redis = await RedisServer.start(mkdtempSync(join(dir, 'redis-')));
  try {
    const manifest = join(dir, 'manifest.jsonl');
    writeFileSync(manifest, Array.from({ length: units }, (_, i) => JSON.stringify({ repo: `/bench/units/u${i}` })).join('\n') + '\n');
    // Per (unit, stage): a manifest line per pair, so each is its own job.
    const jobManifest = join(dir, `jobs-${jobs}.jsonl`);
    const parts = jobs === 'stage' ? BENCH_STAGES.map((s) => `/${s}`) : [''];
    writeFileSync(
      jobManifest,
      Array.from({ length: units }, (_, i) => parts.map((p) => JSON.stringify({ repo: `/bench/units/u${i}${p}` })).join('\n')).join('\n') + '\n',
    );
    const ids = readManifest(jobManifest).units.map((u) => u.id);
    const jobScale = scale * perJob(jobs);
    const sleepTotal = ids.reduce((s, id) => s + sleepMs(seed, id, jobScale), 0);
    const rows: (string | number)[][] = [];
    let base = 0;
    let perJobBytes = 0;
    let enqueueS = 0;
    for (const procs of procsList) {
      const name = `bench-${procs}`;
      const before = redis.usedMemory();
      const t0 = Date.now();
      const report = await enqueueManifest(
        jobManifest,
        ['clone', 'build', 'validate', 'trace'],
        { ...DEFAULTS, out: join(dir, 'out') },
        { redis: redis.url, name, retry: { attempts: 3, backoffMs: 1000 }, timeoutS: 0 },
        () => undefined,
      );
      if (procs === procsList[0]) {
        enqueueS = (Date.now() - t0) / 1000;
        perJobBytes = (redis.usedMemory() - before) / report.added;
      }
      const results = await Promise.all(
        Array.from({ length: procs }, () =>
          spawnWorker([
            '--redis',
            redis.url,
            '--queue',
            name,
            '--out',
            join(dir, 'out'),
            '--slots',
            String(slots),
            '--scale',
            String(scale),
            '--seed',
            seed,
            '--jobs',
            jobs,
          ]),
        ),
      );
      const done = results.reduce((s, r) => s + r.done, 0);
      if (done !== ids.length) throw new Error(`${procs} process(es) completed ${done} of ${ids.length} jobs`);
      const wall = Math.max(...results.map((r) => r.last)) - Math.min(...results.map((r) => r.first));
      const rate = (ids.length / wall) * 1000;
      if (procs === procsList[0]) base = rate / procs;
      const overhead = (wall * procs * slots - sleepTotal) / ids.length;
      rows.push([
        procs,
        procs * slots,
        (wall / 1000).toFixed(1),
        rate.toFixed(0),
        ((units / wall) * 1000).toFixed(0),
        `${((sleepTotal / (wall * procs * slots)) * 100).toFixed(0)}%`,
        overhead.toFixed(2),
        `${((rate / (base * procs)) * 100).toFixed(0)}%`,
      ]);
    }
    process.stdout.write(
      `${units} simulated units as ${ids.length} jobs (per ${jobs}), handler sleeps a seeded 50-500 ms x ${jobScale} (mean ${(sleepTotal / ids.length).toFixed(1)} ms), ${slots} concurrent jobs per worker process\n`,
    );
    process.stdout.write(
      table([['worker processes', 'slots', 'wall s', 'jobs/s', 'units/s', 'efficiency (sleep / wall x slots)', 'overhead ms/job/slot', 'of linear'], ...rows]) +
        '\n',
    );
    process.stdout.write(
      `enqueue: ${ids.length} jobs in ${enqueueS.toFixed(1)} s (${(ids.length / enqueueS).toFixed(0)} jobs/s); Redis memory per queued job: ${(perJobBytes / 1024).toFixed(2)} KiB\n\n`,
    );
  } finally {
    await redis.stop();
  }
}

async function ledgerBench(dir: string, units: number): Promise<void> {
  const out = join(dir, 'ledger-out');
  const manifest = join(dir, 'manifest.jsonl');
  const us = readManifest(manifest).units.slice(0, units);
  const ledger = new Ledger(out);
  let t = Date.now();
  for (const u of us)
    for (const stage of STAGES) {
      ledger.put({
        stage,
        unit_id: u.id,
        unit: { repo: u.repo, url: u.location, ref: null, python: u.python },
        key: hashOf(u.id),
        status: 'ok',
        reason: null,
        record: { note: 'a record of typical size'.repeat(8) },
        seconds: 1,
        finished_at: new Date().toISOString(),
      });
    }
  const writeS = (Date.now() - t) / 1000;
  t = Date.now();
  const status = readStatus(out);
  const statusS = (Date.now() - t) / 1000;
  if (status.stages.trace.ok !== us.length) throw new Error('status miscounted the ledger');
  // The real executor over every unit; a stage that would run means the ledger was not honoured.
  const stages = STAGES.map((name) => ({ name, key: (ctx) => ctx.unit.id, run: async () => failed('ran in a no-op rerun') }) as Stage);
  t = Date.now();
  const rerun = await runStages(us, stages, { ...DEFAULTS, out, concurrency: 8 }, () => undefined);
  const rerunS = (Date.now() - t) / 1000;
  const ran = rerun.reduce((s, u) => s + u.ran.length, 0);
  if (ran) throw new Error(`${ran} stage(s) ran in a no-op rerun`);
  process.stdout.write(`ledger at corpus size: ${us.length} units x ${STAGES.length} stages = ${us.length * STAGES.length} entries\n`);
  process.stdout.write(
    table([
      ['step', 'seconds', 'per unit ms'],
      ['write the ledger', writeS.toFixed(1), ((writeS * 1000) / us.length).toFixed(2)],
      ['status (readStatus)', statusS.toFixed(1), ((statusS * 1000) / us.length).toFixed(2)],
      ['no-op rerun (runStages, all from the ledger)', rerunS.toFixed(1), ((rerunS * 1000) / us.length).toFixed(2)],
    ]) + '\n',
  );
}

if (process.argv.includes('--worker')) {
  await workerProcess();
} else {
  const units = Number(arg('units', '21000'));
  const dir = mkdtempSync(join(tmpdir(), 'worldline-bench-queue-'));
  try {
    const jobs = arg('jobs', 'unit');
    if (jobs !== 'unit' && jobs !== 'stage') throw new Error(`--jobs is unit or stage, not ${jobs}`);
    await queueBench(
      dir,
      units,
      arg('procs', '1,2,4,8').split(',').map(Number),
      Number(arg('slots', '8')),
      Number(arg('scale', '0.1')),
      arg('seed', '1'),
      jobs,
    );
    await ledgerBench(dir, units);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
