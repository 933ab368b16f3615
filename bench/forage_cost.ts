/**
 * `npm run bench:forage -- --before OTHER/dist/bin/worldline.js`: forage's seconds per task, this
 * build against another build of Worldline (issue 14's goal names its own tree, 9b7d083: "half of
 * today's seconds per task on the demo and on a real corpus project, same rows"), side by side in
 * one run. Each side first runs clone..trace into its own output folder (its own images, as a user
 * of that build gets them); then, round by round with the sides' order rotating, each side forages
 * each project again from scratch (its forage record removed, nothing else), timed by the wall
 * clock and by the whole machine's CPU from /proc/stat (engine, shims and containers included, so
 * run it on an otherwise idle machine). Prints per task medians, the within-round ratios
 * (ours / before) and whether both sides made the same tasks (ids, FAIL_TO_PASS, PASS_TO_PASS) and
 * the same grades and tool exit codes.
 *
 *   node dist/bench/forage_cost.js --before PATH [--projects textstats,toolz] [--rounds 4]
 *     [--mutations-per-unit 10] [--dir /tmp/worldline-bench-forage]
 *
 * A project is a folder of examples/repos (textstats: the demo's) or a Debian corpus project (test/corpus.ts).
 */
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { packageRoot } from '../core/package.js';
import { median } from '../core/stats.js';
import { table } from '../core/table.js';
import { CORPUS, materializeCorpus } from '../test/corpus.js';

const { values: args } = parseArgs({
  options: {
    before: { type: 'string' },
    projects: { type: 'string', default: 'textstats,toolz' },
    rounds: { type: 'string', default: '4' },
    'mutations-per-unit': { type: 'string', default: '10' },
    dir: { type: 'string', default: '/tmp/worldline-bench-forage' },
  },
});
if (!args.before) throw new Error("--before: the other build's CLI (e.g. a `git worktree` of 9b7d083, built: its dist/bin/worldline.js)");

const SIDES = { before: resolve(args.before), ours: join(packageRoot, 'dist/bin/worldline.js') };
type Side = keyof typeof SIDES;

/** Busy CPU seconds of the whole machine so far (user, nice, system, irq, softirq; not idle, iowait or steal). */
function machineCpuS(): number {
  const f = readFileSync('/proc/stat', 'utf8').split('\n')[0].trim().split(/\s+/).slice(1).map(Number);
  return (f[0] + f[1] + f[2] + f[5] + f[6]) / 100;
}

function cli(side: Side, argv: string[]): void {
  const res = spawnSync(process.execPath, [SIDES[side], ...argv], { stdio: ['ignore', 'ignore', 'pipe'] });
  if (res.status !== 0) throw new Error(`${side}: worldline ${argv[0]} exited ${res.status}: ${res.stderr.toString().slice(-800)}`);
}

interface ForageEntry {
  record: { mutation_tasks?: number; issue_tasks?: number };
}

/** The project's unit's file in `dir` (a unit's id is the project's name and a hash), if any. */
function unitFile(dir: string, project: string): string | undefined {
  const name = existsSync(dir) ? readdirSync(dir).find((f) => f.startsWith(`${project}-`)) : undefined;
  return name && join(dir, name);
}

const forageFile = (out: string, project: string) => unitFile(join(out, 'ledger', 'forage'), project);

/** What must match across the sides: each task's id and tests, each trajectory's grade and its tools' exit codes. */
function rowsOf(out: string, project: string): string {
  const part = (kind: string) => {
    const file = unitFile(join(out, 'parts', kind), project);
    return file
      ? readFileSync(file, 'utf8')
          .split('\n')
          .filter(Boolean)
          .map((l) => JSON.parse(l))
      : [];
  };
  const tasks = part('tasks').map((t) => [t.instance_id, t.FAIL_TO_PASS, t.PASS_TO_PASS]);
  const trajectories = part('trajectories').map((t) => [t.task_id, t.resolved, t.exit_status, t.steps.map((s: { exit_code: number | null }) => s.exit_code)]);
  return JSON.stringify([tasks, trajectories]);
}

async function main(): Promise<void> {
  const names = args.projects!.split(',').filter(Boolean);
  const dir = resolve(args.dir!);
  mkdirSync(dir, { recursive: true });
  const corpus = await materializeCorpus(
    names.filter((n) => n in CORPUS),
    join(dir, 'corpus'),
  );
  const lineOf = (name: string) => {
    const found = corpus.find((p) => p.project.name === name);
    if (found) return { repo: found.path, env: { apt: found.project.apt, pytest_args: found.project.pytestArgs } };
    const example = join(packageRoot, 'examples/repos', name);
    if (!existsSync(example)) throw new Error(`--projects: ${name} is neither a folder of examples/repos nor a corpus project`);
    // As the demo runs it (textstats has its environment variables there).
    const demo = readFileSync(join(packageRoot, 'examples/demo-manifest.jsonl'), 'utf8')
      .split('\n')
      .filter(Boolean)
      .map((l) => JSON.parse(l) as { repo: string })
      .find((l) => l.repo === `repos/${name}`);
    return { ...demo, repo: example };
  };
  const manifests = new Map(names.map((n) => [n, join(dir, `${n}.jsonl`)]));
  for (const [n, m] of manifests) writeFileSync(m, `${JSON.stringify(lineOf(n))}\n`);
  const outs = { before: join(dir, 'before'), ours: join(dir, 'ours') };
  const common = ['--mutations-per-unit', args['mutations-per-unit']!];
  for (const side of Object.keys(SIDES) as Side[])
    for (const m of manifests.values()) cli(side, ['run', '--stages', 'clone,build,validate,trace', '--manifest', m, '--out', outs[side], ...common]);

  const samples = new Map<string, { wall: number; cpu: number }[]>();
  // ours / before within each round: the two sides of a round met the same load
  const ratios = new Map<string, number[]>(names.map((n) => [n, []]));
  const rounds = Number(args.rounds);
  for (let r = 0; r < rounds; r++) {
    const order: Side[] = r % 2 ? ['ours', 'before'] : ['before', 'ours'];
    const wallOf: Record<string, number> = {};
    for (const side of order)
      for (const [name, manifest] of manifests) {
        const stale = forageFile(outs[side], name);
        if (stale) rmSync(stale);
        const cpu0 = machineCpuS();
        const t0 = performance.now();
        cli(side, ['forage', '--manifest', manifest, '--out', outs[side], ...common]);
        const wall = (performance.now() - t0) / 1000;
        const cpu = machineCpuS() - cpu0;
        const entry = JSON.parse(readFileSync(forageFile(outs[side], name)!, 'utf8')) as ForageEntry;
        const tasks = (entry.record.mutation_tasks ?? 0) + (entry.record.issue_tasks ?? 0);
        const key = `${name}|${side}`;
        wallOf[key] = wall / tasks;
        samples.set(key, [...(samples.get(key) ?? []), { wall: wall / tasks, cpu: cpu / tasks }]);
        process.stderr.write(`round ${r + 1}: ${side} ${name}: ${tasks} tasks, ${(wall / tasks).toFixed(2)} s and ${(cpu / tasks).toFixed(2)} CPU-s a task\n`);
      }
    for (const name of names) ratios.get(name)!.push(wallOf[`${name}|ours`] / wallOf[`${name}|before`]);
  }

  const rows = names.map((name) => {
    const b = samples.get(`${name}|before`)!;
    const o = samples.get(`${name}|ours`)!;
    const r = ratios.get(name)!;
    const cpuRatio = median(o.map((s) => s.cpu)) / median(b.map((s) => s.cpu));
    const same = rowsOf(outs.before, name) === rowsOf(outs.ours, name) ? 'same' : 'DIFFER';
    return [
      name,
      median(b.map((s) => s.wall)).toFixed(2),
      median(o.map((s) => s.wall)).toFixed(2),
      `${median(r).toFixed(2)} (${Math.min(...r).toFixed(2)}-${Math.max(...r).toFixed(2)})`,
      median(b.map((s) => s.cpu)).toFixed(2),
      median(o.map((s) => s.cpu)).toFixed(2),
      cpuRatio.toFixed(2),
      same,
    ];
  });
  process.stdout.write(
    [
      `forage seconds per task, ${rounds} rounds, --mutations-per-unit ${args['mutations-per-unit']}; before: ${SIDES.before}`,
      '',
      table([
        [
          'project',
          'before wall/task',
          'ours wall/task',
          'ours / before (within rounds)',
          'before CPU/task',
          'ours CPU/task',
          'CPU ratio',
          'tasks, grades, exit codes',
        ],
        ...rows,
      ]),
      '',
    ].join('\n'),
  );
}

await main();
