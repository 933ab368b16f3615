/**
 * `npm run bench:envs`: environments with no person. A manifest of bare lines (repo and commit,
 * no env) goes through clone, resolve, build and validate as a user runs it; the figure of the
 * work itself leads: the seconds resolution and repair add to each repository (the resolve stage,
 * and every build try after the first: the median is the goal's, at most 30 s on 2 cores), then
 * the share that validates, the passing tests against a hand-written environment of the same
 * repositories where one is given (--hand, run into its own folder; the goal is 90% of them),
 * seconds per repository by phase, and cache hits: the same bare manifest into a second folder,
 * where resolve must answer from its cache (under 1 s) and no build repairs again. `--hand-out DIR`
 * reads the hand-written environments' results from an output folder a run already wrote.
 *
 *   node dist/bench/envs.js [--manifest bare.jsonl] [--hand hand.jsonl | --hand-out DIR] [--dir /tmp/worldline-bench-envs] [--fresh] [--index-for all]
 *   node dist/bench/envs.js --set bench/fixtures/envs-index ...   (issue 41's set: bench/envs_set.ts)
 *
 * Without --manifest it lays out Debian corpus projects (test/corpus.ts) bare: their package folder
 * alone, no packaging file, so the repair loop finds what their tests import; with --hand absent,
 * their hand-written environment is the corpus's own apt list. Output folders are kept (a rerun
 * with the same --dir reuses what the ledger holds; --fresh starts over, with no repaired environment
 * remembered). Env images already on the host are reused: remove them first for cold builds.
 */
import { spawnSync } from 'node:child_process';
import { mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { packageRoot } from '../core/package.js';
import { median } from '../core/stats.js';
import { table } from '../core/table.js';
import { Ledger, type LedgerEntry, type StageName } from '../pipeline/runtime/ledger.js';
import type { BuildRecord, ResolveRecord, ValidateRecord } from '../pipeline/runtime/records.js';
import { CORPUS, materializeCorpus } from '../test/corpus.js';
import { benchSet } from './envs_set.js';

const { values: args } = parseArgs({
  options: {
    manifest: { type: 'string' },
    hand: { type: 'string' },
    'hand-out': { type: 'string' },
    projects: { type: 'string', default: 'isodate,hyperlink,jsonschema,traitlets' },
    dir: { type: 'string', default: '/tmp/worldline-bench-envs' },
    fresh: { type: 'boolean', default: false },
    // The bare lines with every requirement from the index (worldline's --index-for all) instead of Debian first.
    'index-for': { type: 'string' },
    // Issue 41's set (bench/envs_set.ts): Debian alone, the index and the plain script side by side.
    set: { type: 'string' },
    modes: { type: 'string', default: 'none,auto' },
    only: { type: 'string' },
    torch: { type: 'string' },
    plain: { type: 'string', default: join(packageRoot, 'bench', 'plain_env.jsonl') },
    concurrency: { type: 'string', default: '2' },
    // One suite run answers "does a test pass in the offline container"; flakiness is validate's own benchmark.
    'validate-runs': { type: 'string', default: '1' },
    // Each suite's time (worldline's --suite-timeout): a suite past it keeps the tests that finished.
    'suite-timeout': { type: 'string', default: '1800' },
    // Print the tables from the output folders as they are (a run cut short), running nothing.
    'report-only': { type: 'boolean', default: false },
  },
});

if (args.set) {
  await benchSet({
    ...args,
    set: args.set,
    dir: args.dir === '/tmp/worldline-bench-envs' ? '/var/cache/worldline-bench/envs' : args.dir,
    concurrency: Number(args.concurrency),
    validateRuns: Number(args['validate-runs']),
    suiteTimeoutS: Number(args['suite-timeout']),
    reportOnly: args['report-only'],
  });
  process.exit(0);
}

const CLI = join(packageRoot, 'dist/bin/worldline.js');

function run(manifest: string, out: string, stages: string): number {
  const started = Date.now();
  const indexFor = args['index-for'] ? ['--index-for', args['index-for']] : [];
  const res = spawnSync(
    process.execPath,
    [CLI, 'run', '--manifest', manifest, '--out', out, '--stages', stages, '--licenses', '*', '--progress', 'json', ...indexFor],
    {
      stdio: ['ignore', 'ignore', 'inherit'],
      // The repaired environments this bench finds are its own (--fresh starts with none): the first
      // folder repairs, the second must find them.
      env: { ...process.env, WORLDLINE_RESOLUTIONS: join(dir, 'resolutions') },
    },
  );
  if (res.status !== 0 && res.status !== 1) process.stderr.write(`bench: worldline run exited ${res.status}\n`);
  return (Date.now() - started) / 1000;
}

/** A stage's ledger entries by repository (the bare and hand folders name the same repository by different unit ids). */
const entries = <R>(out: string, stage: StageName): Map<string, LedgerEntry<R>> => new Map(new Ledger(out).all<R>(stage).map((e) => [e.unit.url, e]));

/** Bare and hand manifests of the corpus projects, laid out under `dir`. */
async function corpusManifests(dir: string): Promise<{ bare: string; hand: string }> {
  const names = args.projects.split(',');
  const root = join(dir, 'corpus');
  await materializeCorpus(names, root);
  const bare = join(dir, 'bare.jsonl');
  const hand = join(dir, 'hand.jsonl');
  writeFileSync(bare, names.map((n) => JSON.stringify({ repo: join(root, n) })).join('\n') + '\n');
  writeFileSync(
    hand,
    names.map((n) => JSON.stringify({ repo: join(root, n), env: { apt: CORPUS[n].apt, pytest_args: CORPUS[n].pytestArgs } })).join('\n') + '\n',
  );
  return { bare, hand };
}

const s1 = (x: number | null | undefined) => (x === null || x === undefined ? '-' : x.toFixed(1));

const dir = resolve(args.dir);
if (args.fresh) rmSync(dir, { recursive: true, force: true });
mkdirSync(dir, { recursive: true });
const manifests = args.manifest ? { bare: resolve(args.manifest), hand: args.hand ? resolve(args.hand) : null } : await corpusManifests(dir);
const outs = { bare: join(dir, 'out-bare'), again: join(dir, 'out-again'), hand: args['hand-out'] ? resolve(args['hand-out']) : join(dir, 'out-hand') };

const wall = { bare: run(manifests.bare, outs.bare, 'clone,resolve,build,validate'), again: 0, hand: 0 };
// The same evidence again, in a folder of its own: resolve answers from its cache, no build repairs again.
wall.again = run(manifests.bare, outs.again, 'clone,resolve,build');
if (manifests.hand && !args['hand-out']) wall.hand = run(manifests.hand, outs.hand, 'clone,resolve,build,validate');

const resolved = entries<ResolveRecord>(outs.bare, 'resolve');
const built = entries<BuildRecord>(outs.bare, 'build');
const validated = entries<ValidateRecord>(outs.bare, 'validate');
const again = entries<ResolveRecord>(outs.again, 'resolve');
const againBuilt = entries<BuildRecord>(outs.again, 'build');
const hand = entries<ValidateRecord>(outs.hand, 'validate');

const rows: (string | number)[][] = [];
const added: number[] = [];
const cachedResolve: number[] = [];
let ok = 0;
let atLeast90 = 0;
let compared = 0;
for (const [url, r] of resolved) {
  const b = built.get(url);
  const v = validated.get(url);
  const attempts = b?.record?.attempts ?? [];
  const repairS = attempts.slice(1).reduce((s, a) => s + a.seconds, 0);
  added.push(r.seconds + repairS);
  const a = again.get(url);
  if (a) cachedResolve.push(a.seconds);
  if (v?.status === 'ok') ok++;
  const passed = v?.record?.passed ?? 0;
  const handPassed = hand.get(url)?.status === 'ok' ? (hand.get(url)?.record?.passed ?? null) : null;
  if (handPassed) {
    compared++;
    if (passed >= 0.9 * handPassed) atLeast90++;
  }
  rows.push([
    r.unit.repo.replace(/^https:\/\/github\.com\//, ''),
    r.record?.python ?? '-',
    b?.record?.env_source ?? b?.status ?? '-',
    s1(r.seconds),
    s1(attempts[0]?.seconds ?? b?.seconds),
    attempts.length > 1 ? `${attempts.length - 1} (${s1(repairS)} s)` : '0',
    s1(v?.seconds),
    v?.status === 'ok' ? 'ok' : (v?.reason ?? 'not run').slice(0, 60),
    passed,
    handPassed ?? '-',
    a ? `${a.record?.cached ? 'cached' : 'resolved'} ${a.seconds.toFixed(2)} s, ${againBuilt.get(url)?.record?.attempts?.length ?? '-'} try` : '-',
  ]);
}

const n = resolved.size;
process.stdout.write(
  [
    `resolution + repair added per repository: median ${s1(median(added))} s (goal: at most 30 s on 2 cores); max ${s1(Math.max(...added))} s`,
    `cached (same evidence, a second folder): resolve median ${cachedResolve.length ? median(cachedResolve).toFixed(2) : '-'} s (goal: under 1 s); ${[...again.values()].filter((e) => e.record?.cached).length} of ${again.size} answered from the repaired-environment cache`,
    `validated: ${ok} of ${n} bare lines${compared ? `; ${atLeast90} of ${compared} reach 90% of the passing tests of their hand-written environment` : ''}`,
    `wall: bare run ${s1(wall.bare)} s, second folder ${s1(wall.again)} s${wall.hand ? `, hand-written run ${s1(wall.hand)} s` : ''}`,
    '',
    table([['repository', 'python', 'env', 'resolve s', 'build s', 'repairs', 'validate s', 'validate', 'passed', 'hand passed', 'second folder'], ...rows]),
  ].join('\n') + '\n',
);
