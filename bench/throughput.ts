/**
 * `npm run bench:throughput`: the pipeline end to end (clone..shard, oracle forage) on a fixed set
 * of real Debian corpus projects (test/corpus.ts), as a user runs it through the CLI, in two
 * invocations so each part has its own wall clock: clone..trace, then forage and shard.
 * Prints repositories per core-hour for clone..trace, seconds per stage per unit, forage seconds
 * per task by phase (from the ledger's forage records), the docker run floor measured on this
 * machine and containers per unit-stage, and beside them SWE-bench's harness as its authors
 * report it (300 instances in about 30 minutes on 16 cores, environments cached) for scale.
 *
 *   node dist/bench/throughput.js [--projects toolz,h11,isodate,hyperlink,simplejson]
 *     [--dir /tmp/worldline-bench-throughput] [--mutation-tries 20] [--mutations-per-unit 3] [--cli dist/bin/worldline.js]
 *
 * `--cli` runs another build of Worldline (e.g. the main branch's) on the same projects: before/after.
 */
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { cpus } from 'node:os';
import { join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { packageRoot } from '../core/package.js';
import { table } from '../core/table.js';
import { materializeCorpus } from '../test/corpus.js';

const { values: args } = parseArgs({
  options: {
    projects: { type: 'string', default: 'toolz,h11,isodate,hyperlink,simplejson' },
    dir: { type: 'string', default: '/tmp/worldline-bench-throughput' },
    'mutation-tries': { type: 'string', default: '20' },
    'mutations-per-unit': { type: 'string', default: '3' },
    cli: { type: 'string', default: join(packageRoot, 'dist/bin/worldline.js') },
  },
});

/** SWE-bench's harness, as reported: 300 instances in about 30 minutes on 16 cores, envs cached. */
const SWEBENCH_CORE_S_PER_INSTANCE = (30 * 60 * 16) / 300;
const CORES = cpus().length;

interface Entry {
  status: string;
  seconds: number;
  record: { task_seconds?: Record<string, number | string>[]; seconds_by_phase?: Record<string, number> } | null;
}

function ledger(out: string, stage: string): Entry[] {
  const dir = join(out, 'ledger', stage);
  if (!existsSync(dir)) return [];
  return readdirSync(dir)
    .filter((f) => f.endsWith('.json'))
    .map((f) => JSON.parse(readFileSync(join(dir, f), 'utf8')) as Entry);
}

function runCli(argv: string[]): number {
  const started = Date.now();
  const res = spawnSync(process.execPath, [resolve(args.cli), ...argv], { stdio: ['ignore', 'inherit', 'inherit'] });
  if (res.status !== 0) process.stderr.write(`bench: worldline ${argv[0]} exited ${res.status}\n`);
  return (Date.now() - started) / 1000;
}

/** Seconds per `docker run --rm IMAGE true`: the floor under every container a stage starts. */
function dockerRunFloor(image: string, n = 5): number {
  const started = Date.now();
  for (let i = 0; i < n; i++) spawnSync('docker', ['run', '--rm', '--network', 'none', image, 'true'], { stdio: 'ignore' });
  return (Date.now() - started) / 1000 / n;
}

async function main(): Promise<void> {
  const names = args.projects.split(',').filter(Boolean);
  const dir = resolve(args.dir);
  rmSync(join(dir, 'out'), { recursive: true, force: true });
  mkdirSync(dir, { recursive: true });
  const corpus = await materializeCorpus(names, join(dir, 'corpus'));
  const manifest = join(dir, 'manifest.jsonl');
  // Each project's Debian test dependencies (isodate's tests import six) and pytest arguments, as the tests' manifests give them.
  writeFileSync(
    manifest,
    corpus.map((p) => JSON.stringify({ repo: p.path, env: { apt: p.project.apt, pytest_args: p.project.pytestArgs } })).join('\n') + '\n',
  );
  const out = join(dir, 'out');
  const common = ['--manifest', manifest, '--out', out, '--mutation-tries', args['mutation-tries'], '--mutations-per-unit', args['mutations-per-unit']];
  const upToTrace = runCli(['run', '--stages', 'clone,build,validate,trace', ...common]);
  const forageAndShard = runCli(['run', '--stages', 'forage,shard', ...common]);

  const units = names.length;
  const stages = ['clone', 'build', 'validate', 'trace', 'forage'];
  const perStage = stages.map((s) => {
    const entries = ledger(out, s);
    const secs = entries.reduce((t, e) => t + e.seconds, 0);
    return [s, entries.filter((e) => e.status === 'ok').length, secs.toFixed(1), entries.length ? (secs / entries.length).toFixed(1) : ''];
  });
  const costs = ledger(out, 'forage').flatMap((e) => e.record?.task_seconds ?? []);
  const phases = ['rollout', 'grading', 'container', 'patch_apply', 'pytest_startup', 'tracer_around_tests', 'traced_tests'];
  const unitPhases = ['mutant_check', 'issue_mining'];
  const unitPhaseS = (p: string) => ledger(out, 'forage').reduce((t, e) => t + (e.record?.seconds_by_phase?.[p] ?? 0), 0);
  const tasks = costs.length;
  const perTask = (s: number) => (tasks ? (s / tasks).toFixed(2) : 'n/a');
  const phaseRows = [
    ...unitPhases.map((p) => [p, unitPhaseS(p).toFixed(1), perTask(unitPhaseS(p))]),
    ...phases.map((p) => {
      const s = costs.reduce((t, c) => t + Number(c[p] ?? 0), 0);
      return [p, s.toFixed(1), perTask(s)];
    }),
  ];
  const forageTaskS = tasks ? (forageAndShard * CORES) / tasks : Number.NaN;
  const reposPerCoreHour = units / ((upToTrace * CORES) / 3600);
  const image = ledger(out, 'build').find((e) => e.status === 'ok') as unknown as { record: { image_id: string } } | undefined;
  const floor = image ? dockerRunFloor(image.record.image_id) : Number.NaN;

  const lines = [
    `throughput on ${units} corpus projects (${names.join(', ')}), ${CORES} cores, CLI ${args.cli}`,
    '',
    table([
      ['part', 'wall s', 'core-hours', 'result'],
      ['clone..trace', upToTrace.toFixed(1), ((upToTrace * CORES) / 3600).toFixed(3), `${reposPerCoreHour.toFixed(1)} repos per core-hour (goal >= 100)`],
      ['forage+shard', forageAndShard.toFixed(1), ((forageAndShard * CORES) / 3600).toFixed(3), `${tasks} tasks, ${forageTaskS.toFixed(1)} core-s per task`],
    ]),
    '',
    table([['stage', 'units ok', 'seconds', 'per unit'], ...perStage]),
    '',
    `forage seconds by phase (${tasks} tasks; mutant check and mining are per unit, shown per task):`,
    table([['phase', 'seconds', 'per task'], ...phaseRows]),
    '',
    table([
      ['for scale', 'core-s per task', 'ratio to ours'],
      ['Worldline forage (oracle, traced before/after)', forageTaskS.toFixed(1), '1.00'],
      ['SWE-bench harness (300 in 30 min on 16 cores)', SWEBENCH_CORE_S_PER_INSTANCE.toFixed(1), (SWEBENCH_CORE_S_PER_INSTANCE / forageTaskS).toFixed(2)],
    ]),
    '',
    `docker run floor on this machine: ${floor.toFixed(2)} s per container (goal <= 0.5 s overhead per unit-stage);`,
    'containers per unit-stage: validate 1 (all its runs), trace 1, forage 1 mutant check + 2 per task (agent; grading, then the traces when the submission is the gold fix, else a third).',
  ];
  process.stdout.write(lines.join('\n') + '\n');
}

await main();
