/**
 * Crash consistency (issue 32), the smaller version of `npm run bench:chaos`: two real corpus
 * projects through clone..forage and shard, run once uninterrupted on the machine's engine, then on
 * a private Docker Engine this file starts and stops (bench/private_docker.ts: restarting it touches
 * no other test's containers): a graceful stop of `run` and of `worker` (SIGTERM), `gc --out A`
 * beside a folder B, and the fault schedules (SIGKILL at seeded moments of `run`, `worker` and
 * `shard`, a Docker Engine restart during a unit, a full disk while `shard` writes, Redis restarted
 * under three workers), each ending with the uninterrupted run's rows, nothing left behind and a
 * dataset that verifies. WORLDLINE_CHAOS_CLI runs it against another build (another tree's dist/bin/worldline.js).
 */
import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { hostname } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import {
  type Chaos,
  compareRows,
  dockerRestart,
  enqueue,
  fresh,
  fullDisk,
  leftovers,
  manifestOf,
  type Outcome,
  prepare,
  queueName,
  queueState,
  redisRestart,
  runArgs,
  runKills,
  shardKills,
  untilStage,
  untilStderr,
  workerArgs,
  workerKills,
  worldline,
} from '../bench/chaos.js';
import { RedisServer } from '../bench/redis_server.js';
import { mountsUnder } from '../core/mounts.js';
import { STOP_GRACE_S } from '../pipeline/stop.js';
import { CORPUS } from './corpus.js';
import { gitRepo, tempDir } from './helpers.js';

const PROJECTS = ['isodate', 'h11'];

/** A schedule's outcome as the issue asks it: the reference's rows, nothing left, verified, no problem on the way. */
const expectSurvived = (o: Outcome) => {
  expect({ schedule: o.schedule, problems: o.problems, leftovers: o.leftovers, missing: o.missing, extra: o.extra, verified: o.verified }).toEqual({
    schedule: o.schedule,
    problems: [],
    leftovers: [],
    missing: 0,
    extra: 0,
    verified: true,
  });
};

/** Every ledger entry of `out` parses (none torn). */
const ledgerWhole = (out: string) => {
  for (const stage of readdirSync(join(out, 'ledger'), { withFileTypes: true }).filter((d) => d.isDirectory()))
    for (const f of readdirSync(join(out, 'ledger', stage.name)).filter((n) => n.endsWith('.json')))
      JSON.parse(readFileSync(join(out, 'ledger', stage.name, f), 'utf8'));
};

describe('crash consistency: stops, kills, an engine restart, a full disk, a Redis restart', () => {
  let c: Chaos;
  let redis: RedisServer;

  /** `run` again over `out` after a stop: it finishes, with the uninterrupted run's rows and nothing left. */
  const rerunSame = async (out: string) => {
    const again = await worldline(c, runArgs(c, out)).done;
    expect(again.code, again.stderr.slice(-2000)).toBe(0);
    expect(await compareRows(out, c.ref)).toMatchObject({ missing: 0, extra: 0 });
    expect(leftovers(c, out)).toEqual([]);
  };

  beforeAll(async () => {
    const dir = tempDir('chaos');
    const corpusRoot = inject('corpusRoot');
    const manifest = join(dir, 'manifest.jsonl');
    writeFileSync(
      manifest,
      manifestOf(
        PROJECTS.map((name) => ({
          path: join(corpusRoot, name),
          commit: readFileSync(join(corpusRoot, name, '.git', 'refs', 'heads', 'main'), 'utf8').trim(),
          project: CORPUS[name],
        })),
      ),
    );
    c = await prepare({ dir, manifest, units: PROJECTS.length, seed: 32, log: (m) => process.stderr.write(`[chaos] ${m}\n`) });
    redis = await RedisServer.start(tempDir('chaos-redis'));
  }, 900_000);

  afterAll(async () => {
    await redis?.stop();
    await c?.engine.stop();
  });

  it('SIGTERM on run: it exits 143 within the stop bound, its containers removed and no mount left, the ledger whole; the rerun gives the same rows', async () => {
    const out = fresh(c, 'sigterm-run');
    const p = worldline(c, runArgs(c, out));
    expect(await untilStage(p, ['trace'])).toBe(true);
    expect(c.engine.containers().length).toBeGreaterThan(0);
    const stopped = Date.now();
    p.child.kill('SIGTERM');
    const r = await p.done;
    expect({ code: r.code, signal: r.signal }).toEqual({ code: 143, signal: null });
    expect(Date.now() - stopped).toBeLessThan((STOP_GRACE_S + 10) * 1000);
    expect(r.stderr).toMatch(/stopped by SIGTERM/);
    expect(c.engine.containers()).toEqual([]);
    expect(mountsUnder(out)).toEqual([]);
    ledgerWhole(out);
    await rerunSame(out);
  }, 600_000);

  it('a second SIGINT on run exits at once with 130; gc --out removes what it left, and the rerun gives the same rows', async () => {
    const out = fresh(c, 'sigint-twice');
    const p = worldline(c, runArgs(c, out));
    expect(await untilStage(p, ['trace'])).toBe(true);
    const stopped = Date.now();
    p.child.kill('SIGINT');
    expect(await untilStderr(p, /SIGINT: stopping/, 20)).toBe(true);
    p.child.kill('SIGINT');
    const r = await p.done;
    expect({ code: r.code, signal: r.signal }).toEqual({ code: 130, signal: null });
    // It did not wait out the grace the first signal gives the work in flight.
    expect(Date.now() - stopped).toBeLessThan(STOP_GRACE_S * 1000);
    expect(r.stderr).toMatch(/SIGINT again: exiting now/);
    ledgerWhole(out);
    const gc = await worldline(c, ['gc', '--out', out]).done;
    expect(gc.code, gc.stderr).toBe(0);
    expect(c.engine.containers()).toEqual([]);
    expect(mountsUnder(out)).toEqual([]);
    await rerunSame(out);
  }, 600_000);

  it('SIGTERM on a worker: it exits 143 within the stop bound, no container or mount left, its jobs back on the queue with no attempt spent; another worker finishes them', async () => {
    const out = fresh(c, 'sigterm-worker');
    const queue = queueName();
    await enqueue(c, out, redis.url, queue);
    const w = worldline(c, workerArgs(out, redis.url, queue, 2));
    expect(await untilStage(w, ['validate', 'trace'])).toBe(true);
    const stopped = Date.now();
    w.child.kill('SIGTERM');
    const r = await w.done;
    expect({ code: r.code, signal: r.signal }).toEqual({ code: 143, signal: null });
    expect(Date.now() - stopped).toBeLessThan((STOP_GRACE_S + 10) * 1000);
    expect(c.engine.containers()).toEqual([]);
    expect(mountsUnder(out)).toEqual([]);
    ledgerWhole(out);
    const state = await queueState(redis.url, queue);
    expect(state.counts).toMatchObject({ failed: 0, active: 0, delayed: 0 });
    expect(state.counts.waiting + state.counts.completed).toBe(PROJECTS.length);
    const next = await worldline(c, workerArgs(out, redis.url, queue, 2)).done;
    expect(next.code, next.stderr.slice(-2000)).toBe(0);
    expect(await queueState(redis.url, queue)).toMatchObject({ counts: { completed: PROJECTS.length, failed: 0 } });
    expect((await worldline(c, ['shard', '--out', out]).done).code).toBe(0);
    expect(await compareRows(out, c.ref)).toMatchObject({ missing: 0, extra: 0 });
    expect(leftovers(c, out)).toEqual([]);
  }, 600_000);

  it("gc --out A removes A's dead runs' containers and keeps B's; --host-wide takes every folder's", async () => {
    // A suite that sleeps, so a run killed in validate leaves its container running.
    const repo = gitRepo(tempDir('chaos-sleeps'), { 'm.py': 'x = 1\n', 'test_m.py': 'import time\n\ndef test_sleeps():\n    time.sleep(900)\n' });
    const manifest = join(c.dir, 'sleeps.jsonl');
    writeFileSync(manifest, JSON.stringify({ repo, python: '3.11', env: { apt: [], pytest_args: [] } }) + '\n');
    const killedIn = async (name: string) => {
      const out = fresh(c, name);
      const p = worldline(c, ['run', '--manifest', manifest, '--out', out, '--stages', 'clone,build,validate', '--validate-runs', '1', '--no-plain-parity']);
      const owner = `worldline.owner=${hostname()}:${p.child.pid}`;
      expect(await untilStage(p, ['validate'])).toBe(true);
      while (c.engine.containers(owner).length === 0) await new Promise((r) => setTimeout(r, 200));
      p.child.kill('SIGKILL');
      await p.done;
      return { out, owner };
    };
    const a = await killedIn('gc-a');
    const b = await killedIn('gc-b');
    expect(c.engine.containers(a.owner)).not.toEqual([]);
    expect(c.engine.containers(b.owner)).not.toEqual([]);
    const gcA = await worldline(c, ['gc', '--out', a.out, '--json']).done;
    expect(gcA.code, gcA.stderr).toBe(0);
    expect((JSON.parse(gcA.stdout) as { containers_removed: number }).containers_removed).toBeGreaterThan(0);
    expect(c.engine.containers(a.owner)).toEqual([]);
    expect(c.engine.containers(b.owner)).not.toEqual([]);
    expect(mountsUnder(a.out)).toEqual([]);
    expect(mountsUnder(b.out)).not.toEqual([]);
    const wide = await worldline(c, ['gc', '--out', a.out, '--host-wide', '--json']).done;
    expect(wide.code, wide.stderr).toBe(0);
    expect(c.engine.containers(b.owner)).toEqual([]);
    expect((await worldline(c, ['gc', '--out', b.out]).done).code).toBe(0);
    expect(mountsUnder(b.out)).toEqual([]);
  }, 600_000);

  it('run SIGKILLed at seeded moments, each kill followed by a rerun: the same rows, nothing left', async () => {
    for (const o of await runKills(c, 3, 3)) expectSurvived(o);
  }, 900_000);

  it('worker SIGKILLed at seeded moments, each kill followed by a new worker: every unit done once, the same rows, nothing left', async () => {
    for (const o of await workerKills(c, redis, 2, 2)) expectSurvived(o);
  }, 900_000);

  it('shard SIGKILLed at seeded moments: the published version verifies and keeps its rows after each kill; the last shard publishes the same rows', async () => {
    expectSurvived(await shardKills(c, c.ref, 3));
  }, 600_000);

  it('the Docker Engine restarted while a unit traces: nothing of the lost work recorded, the rerun gives the same rows, nothing left', async () => {
    const o = await dockerRestart(c, 'trace', true);
    expectSurvived(o);
    expect(o.notes.join('\n')).toMatch(/[1-9]\d* unit\(s\) had a stage not recorded for the engine's loss/);
  }, 600_000);

  it('a full disk while shard writes: the shard fails and is retried while full, the previous version readable throughout; with space it publishes the same rows', async () => {
    const o = await fullDisk(c, c.ref, [0.3]);
    expectSurvived(o);
    expect(o.notes.join('\n')).toMatch(/retried while full: exit 1, ENOSPC; previous version read [1-9]/);
  }, 600_000);

  it('Redis restarted under three workers: no job lost or run twice to completion, the same rows', async () => {
    expectSurvived(await redisRestart(c, redis, 'trace'));
  }, 600_000);
});
