/**
 * The queue on a real redis-server (started here on loopback, persistence on) with workers as
 * separate processes on real Docker, over real corpus projects: a worker SIGKILLed mid-job, Redis
 * restarted mid-run, a unit that always fails, two shard runs at once. Needs redis-server on PATH
 * (.ci/run installs Debian's).
 */

import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { basename, join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { Queue } from 'bullmq';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { RedisServer } from '../bench/redis_server.js';
import { redisConnection } from '../pipeline/queue/connection.js';
import { CORPUS } from './corpus.js';
import { type CliResult, cli, cliProcess, gitRepo, sql, tempDir } from './helpers.js';

// Two fast projects of the real corpus whose suites take seconds, not minutes.
const PROJECTS = ['h11', 'toolz'];
const UNIT_STAGES = 'clone,build,validate,trace';

/** Each shard of the published dataset: its path, the sha256 its manifest names, and the sha256 of its bytes. */
const shardSums = (out: string) => {
  const manifest = JSON.parse(readFileSync(join(out, 'dataset', 'manifest.json'), 'utf8')) as { shards: { path: string; sha256: string }[] };
  return manifest.shards.map((s) => [
    s.path,
    s.sha256,
    createHash('sha256')
      .update(readFileSync(join(out, 'dataset', s.path)))
      .digest('hex'),
  ]);
};

/** Every row of a config, timing columns left out (they differ between any two runs), as a sorted set. */
const rowSet = async (out: string, config: string, timing: string[]) => {
  const rows = await sql<Record<string, unknown>>(`select * exclude (${timing.join(', ')}) from '${out}/dataset/${config}/data/*.parquet'`);
  return rows.map((r) => JSON.stringify(r, (_, v) => (typeof v === 'bigint' ? Number(v) : v))).sort();
};

const configRows = (out: string) => {
  const m = JSON.parse(readFileSync(join(out, 'dataset', 'manifest.json'), 'utf8')) as {
    configs: Record<string, { rows: number; duplicates_removed: number }>;
  };
  return Object.fromEntries(Object.entries(m.configs).map(([c, v]) => [c, [v.rows, v.duplicates_removed]]));
};

/** The exit and summary of a worker process, failing the test with its log when it failed. */
const finished = (r: CliResult) => {
  if (r.code !== 0) console.error(r.stderr);
  expect(r.code).toBe(0);
  return r.stdout;
};

async function waitFor(what: string, cond: () => boolean, timeoutMs = 600_000): Promise<void> {
  const until = Date.now() + timeoutMs;
  while (!cond()) {
    if (Date.now() > until) throw new Error(`timed out waiting for ${what}`);
    await sleep(200);
  }
}

describe('the queue: workers as processes on one Redis', () => {
  let redis: RedisServer;
  let dir: string;
  let manifest: string;
  let ref: string;

  beforeAll(async () => {
    dir = tempDir('queue');
    redis = await RedisServer.start(tempDir('redis'));
    const corpusRoot = inject('corpusRoot');
    manifest = join(dir, 'manifest.jsonl');
    const lines = PROJECTS.map((name) => {
      const commit = readFileSync(join(corpusRoot, name, '.git', 'refs', 'heads', 'main'), 'utf8').trim();
      return JSON.stringify({ repo: join(corpusRoot, name), commit, env: { apt: CORPUS[name].apt, pytest_args: CORPUS[name].pytestArgs } });
    });
    writeFileSync(manifest, lines.join('\n') + '\n');
    // The reference: one process, the same manifest.
    ref = join(dir, 'ref');
    const res = await cli(['run', '--manifest', manifest, '--out', ref, '--stages', `${UNIT_STAGES},shard`, '--concurrency', '2']);
    finished(res);
  }, 1_200_000);

  afterAll(async () => {
    await redis?.stop();
  });

  const queueOf = (name: string) => new Queue(name, { connection: redisConnection(redis.url) });

  /**
   * Equal to the single-process run: every config's row set, timing columns left out, and for
   * traces the frames' values and what derives from them (text, its tokens, episode bytes). The
   * host name is fixed and reprs no longer depend on load (no test hit the tracer's wall-time
   * safety net in either run: checked), but the corpus's own values still differ between any two
   * runs, single-process or not (measured on this test's outputs, 2026-12-01): `str()` of functions
   * with their addresses and `hash()` of objects (toolz, 2,904 of 12,666 rows), ephemeral ports in
   * socket reprs and the wall-clock HTTP Date header (h11, 18 of 17,588 rows). So the traces shards
   * are not byte-identical; episodes, their functions, lines, frame and event counts and every other
   * column must match.
   */
  const expectSameDataset = async (out: string) => {
    expect(configRows(out)).toEqual(configRows(ref));
    for (const o of [out, ref]) for (const t of ledgerRecords(o, 'trace')) expect(t.slow_repr_tests).toBe(0);
    const traceValues = ['frames', 'text', 'text_tokens', 'test_episode_bytes'];
    expect(await rowSet(out, 'traces', traceValues)).toEqual(await rowSet(ref, 'traces', traceValues));
    const repoValues = ['build_seconds', 'validate_seconds', 'trace_episode_bytes'];
    expect(await rowSet(out, 'repos', repoValues)).toEqual(await rowSet(ref, 'repos', repoValues));
    expect(await rowSet(out, 'tests', ['duration_seconds'])).toEqual(await rowSet(ref, 'tests', ['duration_seconds']));
    const v = await cli(['verify', join(out, 'dataset')]);
    expect(v.code).toBe(0);
  };

  const ledgerRecords = (out: string, stage: string) =>
    readdirSync(join(out, 'ledger', stage))
      .filter((n) => n.endsWith('.json'))
      .map((n) => (JSON.parse(readFileSync(join(out, 'ledger', stage, n), 'utf8')) as { record: { slow_repr_tests: number } }).record);

  /** One ledger entry per (stage, unit), all ok: nothing lost, nothing left half-done. */
  const expectLedgerComplete = (out: string) => {
    for (const stage of UNIT_STAGES.split(',')) {
      const names = readdirSync(join(out, 'ledger', stage)).filter((n) => n.endsWith('.json'));
      expect(names).toHaveLength(PROJECTS.length);
      for (const n of names) expect(JSON.parse(readFileSync(join(out, 'ledger', stage, n), 'utf8')).status).toBe('ok');
    }
  };

  it('3 workers, one SIGKILLed mid-job: every unit done exactly once, the dataset equal to a single-process run; two shard runs at once keep it intact', async () => {
    const out = join(dir, 'killed');
    const q = ['--redis', redis.url, '--queue', 'killed'];
    const enq = await cli(['enqueue', '--manifest', manifest, '--out', out, '--stages', UNIT_STAGES, ...q]);
    expect(finished(enq)).toContain('2 unit(s) queued, 0 already');
    // Enqueueing again adds nothing: the job id is the unit id.
    expect(finished(await cli(['enqueue', '--manifest', manifest, '--out', out, '--stages', UNIT_STAGES, ...q]))).toContain('0 unit(s) queued, 2 already');
    const workers = [0, 1, 2].map(() => cliProcess(['worker', '--out', out, ...q, '--concurrency', '1', '--exit-when-drained', '--json']));
    // Kill the first worker seen validating: its job is mid-flight, its lock stops being renewed.
    let victim = -1;
    await waitFor('a worker in validate', () => {
      victim = workers.findIndex((w) => /"event":"stage","unit_id":"[^"]+","stage":"validate"/.test(w.output().stderr));
      return victim >= 0;
    });
    workers[victim].child.kill('SIGKILL');
    const results = await Promise.all(workers.map((w) => w.done));
    expect(results[victim].code).toBe(null);
    const survivors = results.filter((_, i) => i !== victim).map((r) => JSON.parse(finished(r)) as { done: number; dead: number });
    // Exactly once: the two units completed once between the survivors; the killed one completed none.
    expect(survivors.reduce((s, t) => s + t.done, 0)).toBe(PROJECTS.length);
    expect(survivors.reduce((s, t) => s + t.dead, 0)).toBe(0);
    const queue = queueOf('killed');
    expect(await queue.getJobCounts('completed', 'failed', 'waiting', 'active', 'delayed')).toMatchObject({
      completed: 2,
      failed: 0,
      waiting: 0,
      active: 0,
      delayed: 0,
    });
    // The killed worker's job was taken over after its lock lapsed: started twice, completed once.
    const started = (await queue.getJobs(['completed'])).map((j) => j.attemptsStarted).sort();
    expect(started).toEqual([1, 2]);
    await queue.close();
    expectLedgerComplete(out);

    // The one writer of the dataset, twice at once: both finish, the published version verifies.
    const shards = await Promise.all([cli(['shard', '--out', out, '--json']), cli(['shard', '--out', out, '--json'])]);
    const written = shards.map((s) => (JSON.parse(finished(s)) as { shards: { path: string; sha256: string }[] }).shards);
    // One ledger, one dataset: both writers made the same shards, byte for byte, and the survivor is what they made.
    expect(written[1]).toEqual(written[0]);
    expect(shardSums(out)).toEqual(written[0].map((s) => [s.path, s.sha256, s.sha256]));
    expect(readdirSync(join(out, 'dataset-versions'))).toHaveLength(1);
    expect(existsSync(join(out, 'dataset-versions.lock'))).toBe(false);
    await expectSameDataset(out);
  }, 1_200_000);

  it('Redis restarted mid-run (append-only file): the run completes, nothing lost or duplicated', async () => {
    const out = join(dir, 'restart');
    const q = ['--redis', redis.url, '--queue', 'restart'];
    finished(await cli(['enqueue', '--manifest', manifest, '--out', out, '--stages', UNIT_STAGES, ...q]));
    const workers = [0, 1].map(() => cliProcess(['worker', '--out', out, ...q, '--concurrency', '1', '--exit-when-drained', '--json']));
    await waitFor('a worker in validate', () => workers.some((w) => /"event":"stage","unit_id":"[^"]+","stage":"validate"/.test(w.output().stderr)));
    await redis.restart();
    const results = await Promise.all(workers.map((w) => w.done));
    const totals = results.map((r) => JSON.parse(finished(r)) as { done: number; dead: number });
    expect(totals.reduce((s, t) => s + t.done, 0)).toBe(PROJECTS.length);
    const queue = queueOf('restart');
    expect(await queue.getJobCounts('completed', 'failed')).toEqual({ completed: 2, failed: 0 });
    await queue.close();
    expectLedgerComplete(out);
    finished(await cli(['shard', '--out', out]));
    await expectSameDataset(out);
  }, 1_200_000);

  it('a unit that always fails is a dead letter with its reason after N attempts, and status shows it', async () => {
    const repo = gitRepo(tempDir('always-fails'), { 'm.py': 'x = 1\n' });
    const m = join(repo, '..', 'fails.jsonl');
    writeFileSync(m, JSON.stringify({ repo, commit: '1'.repeat(40) }) + '\n');
    const out = join(dir, 'dead');
    const q = ['--redis', redis.url, '--queue', 'dead'];
    finished(await cli(['enqueue', '--manifest', m, '--out', out, '--stages', 'clone', '--attempts', '3', '--backoff', '0.2', ...q]));
    const w = await cli(['worker', '--out', out, ...q, '--exit-when-drained', '--json']);
    expect(JSON.parse(finished(w))).toEqual({ done: 0, retried: 2, dead: 1 });
    const s = await cli(['status', '--out', out, ...q, '--json']);
    const status = JSON.parse(finished(s)) as {
      queue: {
        counts: Record<string, number>;
        stages: Record<string, { dead: number; failed: number }>;
        dead_letters: { attempts: number; stage: string; reason: string }[];
        top_failures: { units: number }[];
      };
    };
    expect(status.queue.counts).toMatchObject({ dead: 1, completed: 0, waiting: 0, active: 0, retrying: 0 });
    expect(status.queue.dead_letters).toEqual([
      { unit_id: expect.any(String), repo: basename(repo), attempts: 3, stage: 'clone', reason: expect.stringMatching(/^clone: .*1111111111/) },
    ]);
    expect(status.queue.stages.clone).toMatchObject({ dead: 1, failed: 1 });
    expect(status.queue.top_failures).toEqual([expect.objectContaining({ stage: 'clone', units: 1 })]);
    const text = await cli(['status', '--out', out, ...q]);
    expect(finished(text)).toMatch(/dead letters:\n {2}\S+ {2}after 3 attempt\(s\) {2}clone: /);
  }, 300_000);

  it('--job-timeout cancels the job: its containers (labelled with the job) are removed, it starts no more and records nothing', async () => {
    // A suite that sleeps far past the job's timeout (and within its own suite timeout).
    const repo = gitRepo(tempDir('sleeps'), { 'm.py': 'x = 1\n', 'test_m.py': 'import time\n\ndef test_sleeps():\n    time.sleep(900)\n' });
    const m = join(repo, '..', 'sleeps.jsonl');
    writeFileSync(m, JSON.stringify({ repo }) + '\n');
    const out = join(dir, 'timeout');
    const q = ['--redis', redis.url, '--queue', 'timeout'];
    finished(await cli(['enqueue', '--manifest', m, '--out', out, '--stages', 'clone,build,validate', '--attempts', '1', '--job-timeout', '45', ...q]));
    const worker = cliProcess(['worker', '--out', out, ...q, '--exit-when-drained', '--json']);
    // The job's containers, by their job label (`unit#attempt`), while the worker runs.
    const jobContainers = () =>
      execFileSync('docker', ['ps', '-a', '--filter', 'label=worldline.job', '--format', '{{.Label "worldline.job"}} {{.Label "worldline.stage"}}'], {
        encoding: 'utf8',
      })
        .split('\n')
        .filter(Boolean);
    const seen = new Set<string>();
    let result: CliResult | null = null;
    void worker.done.then((r) => {
      result = r;
    });
    while (!result) {
      for (const l of jobContainers()) seen.add(l);
      await sleep(1000);
    }
    expect(JSON.parse(finished(result))).toEqual({ done: 0, retried: 0, dead: 1 });
    const s = JSON.parse(finished(await cli(['status', '--out', out, ...q, '--json']))) as {
      queue: { dead_letters: { unit_id: string; reason: string }[] };
    };
    const [dead] = s.queue.dead_letters;
    expect(dead.reason).toMatch(/job timed out after 45 s/);
    // It had containers running under its label when it timed out (validate's, or a slow build's)...
    const ours = [...seen].filter((l) => l.startsWith(`${dead.unit_id}#0`));
    expect(ours.length).toBeGreaterThan(0);
    const stage = /timed out in (\w+); removed [1-9]\d* container\(s\) of job/.exec(worker.output().stderr)?.[1];
    expect(stage).toMatch(/^(build|validate)$/);
    // ...and none is left, now or a little later (the abandoned stage starts no new one).
    await sleep(5000);
    expect(jobContainers().filter((l) => l.startsWith(`${dead.unit_id}#0`))).toEqual([]);
    // The stage it was in recorded nothing: the retry (or a rerun) runs it again.
    const ledger = join(out, 'ledger', stage!);
    expect(existsSync(ledger) ? readdirSync(ledger).filter((n) => n.endsWith('.json')) : []).toEqual([]);
  }, 900_000);

  it('static ranks do not write the dataset unless told to (--shard)', async () => {
    const rank = (out: string, extra: string[]) =>
      cli(['run', '--manifest', manifest, '--out', out, '--stages', 'clone,shard', '--world-size', '2', '--rank', '0', ...extra]);
    const plain = join(dir, 'rank-plain');
    const r = await rank(plain, []);
    finished(r);
    expect(r.stderr).toContain('not sharding');
    expect(existsSync(join(plain, 'dataset'))).toBe(false);
    const told = join(dir, 'rank-shard');
    finished(await rank(told, ['--shard']));
    expect(existsSync(join(told, 'dataset', 'manifest.json'))).toBe(true);
  }, 300_000);
});
