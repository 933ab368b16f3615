/** What each CLI command does, apart from argument parsing (bin/ stays thin). */

import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { sha256 } from '../core/hashing.js';
import { table } from '../core/table.js';
import { machineJson, terminalSafe } from '../core/terminal.js';
import { type ContentPolicy, DEFAULT_CONTENT_POLICY, type ExcludedUnit, keepOptions } from '../datasets/content_policy.js';
import type { DatasetManifest } from '../datasets/dataset_writer.js';
import { type MixPlan, mixSummary } from '../datasets/mix.js';
import { installCommand } from './envs/plan/install_plan.js';
import { runStages, type UnitSummary, unitsForRank } from './runtime/executor.js';
import { runHistory } from './runtime/history.js';
import { outIdentity, stopSignal } from './runtime/job_scope.js';
import { outLayout } from './runtime/layout.js';
import { Ledger } from './runtime/ledger.js';
import { removeDeadTemps } from './runtime/leftovers.js';
import { type Manifest, ManifestUnreadable, readManifest } from './runtime/manifest.js';
import type { PipelineOptions } from './runtime/options.js';
import { envSecrets } from './runtime/part_redaction.js';
import type { Progress } from './runtime/progress.js';
import type { BuildRecord, CloneRecord, ResolveRecord } from './runtime/records.js';
import type { Stage } from './runtime/stage.js';
import { recordManifestErrors } from './runtime/status.js';
import { assertDockerUp, removeOrphanContainers } from './sandbox/engine.js';
import { ImageBudget } from './sandbox/image_budget.js';
import { buildStage } from './stages/build.js';
import { cloneStage } from './stages/clone.js';
import { describeStage } from './stages/describe.js';
import { forageStage } from './stages/forage.js';
import { resolveStage } from './stages/resolve.js';
import { shardOutput } from './stages/shard.js';
import { traceStage } from './stages/trace.js';
import { validateStage } from './stages/validate.js';
import { throwIfStopped } from './stop.js';

export const UNIT_STAGES: Record<string, Stage> = {
  clone: cloneStage as Stage,
  resolve: resolveStage as Stage,
  build: buildStage as Stage,
  validate: validateStage as Stage,
  trace: traceStage as Stage,
  describe: describeStage as Stage,
  forage: forageStage as Stage,
};
export const ALL_STAGES = [...Object.keys(UNIT_STAGES), 'shard'];

export interface PipelineRun {
  units: UnitSummary[];
  history: UnitSummary[];
  manifestErrors: number;
  dataset: string | null;
  configs: DatasetManifest['configs'] | null;
  mix: MixPlan | null;
  /** Units the content policy left out of the dataset (their stages may all have succeeded), with the reason. */
  excluded: ExcludedUnit[];
  /** Wall seconds per stage this run spent (units answered from the ledger not counted). */
  stageSeconds: Record<string, { units: number; seconds: number }>;
  exitCode: 0 | 1;
}

/** What each stage cost in this run, from the ledger entries of the units it ran now. */
function stageSecondsOf(out: string, units: UnitSummary[]): PipelineRun['stageSeconds'] {
  const ledger = new Ledger(out);
  const by: PipelineRun['stageSeconds'] = {};
  for (const u of units)
    for (const stage of u.ran) {
      const s = by[stage] ?? { units: 0, seconds: 0 };
      by[stage] = s;
      s.units += 1;
      s.seconds += ledger.get(stage, u.unit.id)?.seconds ?? 0;
    }
  return by;
}

export class UsageError extends Error {}

/**
 * Before a run or worker starts on `out`: the temporary files and, when it runs containers, the
 * containers that killed processes of this host left there (the latter may still be running and
 * writing into work folders). Only that folder's: another folder's runs are none of its business.
 */
export async function cleanUpAfterKilled(out: string, stages: Stage[] | null, log: (m: string) => void): Promise<void> {
  const temps = removeDeadTemps(out);
  if (temps) log(`removed ${temps} temporary file(s) left by a killed run`);
  if (stages && !stages.some((s) => s.name !== 'clone' && s.name !== 'resolve')) return;
  await requireDocker();
  const orphans = await removeOrphanContainers(outIdentity(out));
  if (orphans) log(`removed ${orphans} container(s) left by a killed run`);
}

/** Something a command needs outside Worldline (the Docker Engine, Redis) does not answer: exit 3, not a unit's failure. */
export class EnvironmentUnavailable extends Error {}

/** The Docker Engine answers, or EnvironmentUnavailable says where it was looked for and how to start it. */
export async function requireDocker(): Promise<void> {
  try {
    await assertDockerUp();
  } catch (e) {
    throw new EnvironmentUnavailable((e as Error).message);
  }
}

/**
 * The units a dataset just written left out under its content policy, and, when that left the
 * dataset without a row but the excluded units' own `repos` rows, a warning naming the options
 * that would keep them (a run must never look fine and publish nothing).
 */
export function policyExclusions(written: Pick<DatasetManifest, 'configs' | 'content'>, policy: Pick<ContentPolicy, 'licenses'>) {
  const excluded = written.content?.exclusions.units ?? [];
  const empty = Object.entries(written.configs).every(([config, c]) => config === 'repos' || c.rows === 0);
  if (!excluded.length || !empty) return { excluded, warning: null };
  const why = [...new Set(excluded.map((u) => (u.by === 'license' ? `license ${u.license}` : 'a benchmark repository')))].join(', ');
  return {
    excluded,
    warning: `the dataset is empty: the content policy left out ${excluded.length} unit(s) (${why}); ${keepOptions(excluded, policy).join(' and ')} would keep them`,
  };
}

/** The manifest of a run or an enqueue, its errors recorded in the output folder and logged; the stage names checked. */
export function openManifest(manifestFile: string, stageNames: string[], out: string, log: (m: string) => void): Manifest {
  for (const s of stageNames) if (!ALL_STAGES.includes(s)) throw new UsageError(`unknown stage "${s}" (stages: ${ALL_STAGES.join(', ')})`);
  let manifest: Manifest;
  try {
    manifest = readManifest(manifestFile);
  } catch (e) {
    throw e instanceof ManifestUnreadable ? new UsageError(e.message) : e;
  }
  recordManifestErrors(out, manifest.errors);
  for (const e of manifest.errors) log(`manifest ${e.file}:${e.line}: ${e.message}`);
  return manifest;
}

/**
 * The unit stages among `stageNames`, in pipeline order; `resolve` goes with `build`, which builds
 * the environment resolve records (a manifest's own env passes through it unchanged).
 */
export const unitStages = (stageNames: string[]): Stage[] =>
  ALL_STAGES.filter((s) => s !== 'shard' && (stageNames.includes(s) || (s === 'resolve' && stageNames.includes('build')))).map((s) => UNIT_STAGES[s]);

export async function runPipeline(
  manifestFile: string,
  stageNames: string[],
  options: PipelineOptions,
  log: (m: string) => void,
  progress?: Progress,
): Promise<PipelineRun> {
  const manifest = openManifest(manifestFile, stageNames, options.out, log);
  const mine = (() => {
    try {
      return unitsForRank(manifest.units, options.rank, options.worldSize);
    } catch (e) {
      throw new UsageError((e as Error).message);
    }
  })();
  const stages = unitStages(stageNames);
  await cleanUpAfterKilled(options.out, stages, log);
  progress?.start(
    mine.length,
    stages.map((s) => s.name),
    Math.min(options.concurrency, mine.length),
  );
  const budget = options.imageBudgetGb === undefined ? null : new ImageBudget(options.imageBudgetGb * 1e9, log);
  const ledger = new Ledger(options.out);
  const units = await runStages(
    mine,
    stages,
    options,
    log,
    (e) => progress?.event(e),
    async (unit) => budget?.unitDone(ledger, unit.id),
  );
  // Older commits are extra data: their failures are recorded but do not fail the run.
  const history = options.historyCommits > 0 ? await runHistory(units, stages, options, log) : [];
  if (stopSignal().aborted) {
    progress?.end();
    const finished = units.filter((u) => u.status === 'ok').length;
    throwIfStopped(`${finished} of ${units.length} unit(s) finished, the others' work in flight not recorded; the same command again goes on`);
  }
  let dataset: string | null = null;
  let configs: DatasetManifest['configs'] | null = null;
  let mix: MixPlan | null = null;
  let excluded: ExcludedUnit[] = [];
  const stageSeconds = stageSecondsOf(options.out, [...units, ...history]);
  // Static ranks each see only their share: one of them writes the dataset only when told to
  // (`--shard`), or `worldline shard` runs once after them all.
  const shardHere = stageNames.includes('shard') && (options.worldSize === 1 || options.shardRank);
  if (stageNames.includes('shard') && !shardHere)
    log(`rank ${options.rank}: not sharding (one of ${options.worldSize} ranks; run worldline shard after all, or pass --shard)`);
  if (shardHere) {
    const started = Date.now();
    const policy = { ...(options.content ?? DEFAULT_CONTENT_POLICY), secretValues: envSecrets(manifest.units) };
    const sharded = await shardOutput(
      options.out,
      { manifest: resolve(manifestFile), manifest_sha256: sha256(readFileSync(manifestFile)) },
      options.layout,
      options.issueFixShare,
      policy,
    ).catch((e: unknown) => {
      progress?.end();
      throwIfStopped('every unit finished; the dataset was not written (the published version is as it was): `worldline shard` writes it');
      throw e;
    });
    configs = sharded.configs;
    mix = sharded.mix;
    if (mix.warning) log(`warning: ${mix.warning}`);
    const left = policyExclusions(sharded, policy);
    excluded = left.excluded;
    if (left.warning) log(`warning: ${left.warning}`);
    dataset = outLayout.dataset(options.out);
    stageSeconds.shard = { units: 0, seconds: (Date.now() - started) / 1000 };
  }
  progress?.end();
  const failed = units.some((u) => u.status === 'failed') || manifest.errors.length > 0;
  return { units, history, manifestErrors: manifest.errors.length, dataset, configs, mix, excluded, stageSeconds, exitCode: failed ? 1 : 0 };
}

/** One line on the task mix a shard kept, for run and shard output. */
export function mixLine(mix: MixPlan): string {
  const pct = (s: number | null) => (s === null ? 'n/a' : `${(s * 100).toFixed(1)}%`);
  const { after, before } = mix;
  return `tasks: ${after.issue_fix} issue-fix + ${after.mutation_fix} mutation-fix = ${pct(after.share)} issue-fix (target ${pct(mix.target)}${mix.dropped.length ? `; dropped ${mix.dropped.length} of ${before.issue_fix + before.mutation_fix}` : ''})${mix.reached ? '' : ' [as near as these tasks allow]'}`;
}

const unitJson = (u: UnitSummary, excluded?: ExcludedUnit) => ({
  unit_id: u.unit.id,
  repo: u.unit.repo,
  commit: u.unit.commit ?? null,
  history_of: u.unit.historyOf ?? null,
  status: u.status,
  stage: u.stage,
  reason: u.reason,
  ran: u.ran,
  /** Why the content policy left it out of the dataset, when it did. */
  excluded: excluded?.reason ?? null,
});

const excludedBy = (run: Pick<PipelineRun, 'excluded'>) => {
  const byId = new Map(run.excluded.map((e) => [e.unit_id, e]));
  return (unitId: string) => byId.get(unitId);
};

/** The run as `--json` prints it. */
export function runJson(run: PipelineRun): Record<string, unknown> {
  const excluded = excludedBy(run);
  return {
    exit_code: run.exitCode,
    manifest_errors: run.manifestErrors,
    dataset: run.dataset,
    mix: run.mix && mixSummary(run.mix),
    units: run.units.map((u) => unitJson(u, excluded(u.unit.id))),
    history: run.history.map((u) => unitJson(u, excluded(u.unit.id))),
    stage_seconds: run.stageSeconds,
  };
}

/** What `shard` wrote: rows and shards per config, the task mix, then the units the content policy left out. */
export function formatShard(configs: DatasetManifest['configs'], mix: MixPlan, excluded: ExcludedUnit[] = []): string {
  return [
    ...Object.entries(configs).map(([c, v]) => `${c}: ${v.rows} rows in ${v.shards} shard(s)`),
    mixLine(mix),
    ...(excluded.length ? ['', table([['excluded unit', 'reason'], ...excluded.map((e) => [e.unit_id, e.reason])])] : []),
  ].join('\n');
}

export function formatRun(run: PipelineRun): string {
  const excluded = excludedBy(run);
  // A unit whose stages succeeded but whose rows the content policy kept out says so, with why.
  const rows = run.units.map((u) => [
    u.unit.id,
    u.status === 'ok' && excluded(u.unit.id) ? 'excluded' : u.status,
    u.status === 'failed' ? (u.stage ?? '') : '',
    u.ran.length ? u.ran.join(',') : '(cached)',
    (u.reason ?? excluded(u.unit.id)?.reason ?? '').slice(0, 160),
  ]);
  const parts = [table([['unit', 'status', 'failed at', 'ran now', 'reason'], ...rows])];
  if (run.history.length) {
    parts.push(
      '',
      table([
        ['older commit', 'status', 'of', 'reason'],
        ...run.history.map((h) => [h.unit.id, h.status, h.unit.historyOf ?? '', (h.reason ?? '').slice(0, 120)]),
      ]),
    );
  }
  const ok = run.units.filter((u) => u.status === 'ok').length;
  const left = run.units.filter((u) => u.status === 'ok' && excluded(u.unit.id)).length;
  parts.push(
    '',
    `${ok} of ${run.units.length} units ok${left ? `; ${left} of them excluded from the dataset by the content policy` : ''}${run.manifestErrors ? `; ${run.manifestErrors} manifest line(s) rejected` : ''}`,
  );
  if (run.configs) {
    parts.push('', table([['config', 'rows', 'shards'], ...Object.entries(run.configs).map(([c, v]) => [c, v.rows, v.shards])]));
  }
  if (run.mix && run.mix.before.issue_fix + run.mix.before.mutation_fix > 0) parts.push(mixLine(run.mix));
  if (run.dataset) parts.push(`dataset: ${run.dataset}`);
  const stages = Object.entries(run.stageSeconds);
  if (stages.length) {
    const total = stages.reduce((t, [, s]) => t + s.seconds, 0);
    parts.push(
      '',
      table([
        ['stage', 'units run', 'seconds', 'per unit'],
        ...stages.map(([name, s]) => [name, s.units || '', s.seconds.toFixed(1), s.units ? (s.seconds / s.units).toFixed(1) : '']),
        ['total', '', total.toFixed(1), ''],
      ]),
    );
  }
  return parts.join('\n');
}

/** A unit's manifest line with the environment it has now, its provenance before it as `#` lines. */
function resolvedLine(u: UnitSummary, ledger: Ledger): string {
  const { unit } = u;
  const resolved = ledger.get<ResolveRecord>('resolve', unit.id);
  const build = ledger.get<BuildRecord>('build', unit.id)?.record;
  const clone = ledger.get<CloneRecord>('clone', unit.id)?.record;
  const head = `# ${unit.repo}${clone ? ` @ ${clone.commit.slice(0, 12)}` : ''}`;
  if (!resolved?.record)
    return `${terminalSafe(`${head}: not resolved: ${u.reason ?? 'no resolve record'}`)}\n# ${machineJson({ repo: unit.location, ...(unit.commit ? { commit: unit.commit } : {}) })}`;
  const r = resolved.record;
  const env = build?.env ?? r.env ?? unit.env;
  const python = build?.python ?? r.python;
  const comments = [
    `${head}: ${build?.env_source ?? r.source}, python ${python}${r.cached ? ' (as repaired before, for the same evidence)' : ''}`,
    ...r.packages.map((p) => `#   ${p.package} ${p.version} (${p.via}) <- ${p.asked.join('; ')}`),
    ...r.unresolved.map((x) => `#   unresolved: ${x}`),
    ...(r.install
      ? [`#   installs ${r.install.name} ${r.install.version} from ${r.install.root} (${r.install.backend ? 'its build backend' : 'its metadata'})`]
      : []),
    ...(build?.attempts ?? []).flatMap((a) => a.changes.map((c) => `#   repaired: ${c}`)),
    ...r.notes.map((n) => `#   note: ${n}`),
  ];
  // As a manifest's own env, it is built as written: the project's install goes in as a setup step.
  const setup = r.install && r.source === 'inferred' ? [...env.setup, installCommand(r.install)] : env.setup;
  const line = { repo: unit.location, commit: clone?.commit ?? unit.commit, python, env: { ...env, setup } };
  // A comment holds text of the repository's (a reason, a note): escaped, a newline in it starts no manifest line of its own.
  return [...comments.map((c) => terminalSafe(c)), machineJson(line)].join('\n');
}

/**
 * `worldline resolve`: every manifest line as a line with the environment its unit has now (its
 * own, inferred, or as a build repaired it), for a person to review, pin and run again; clones and
 * resolves what has not been, runs no container. A manifest `env` comes back as written.
 */
export async function resolveManifest(
  manifestFile: string,
  options: PipelineOptions,
  log: (m: string) => void,
  progress?: Progress,
): Promise<{ text: string; exitCode: 0 | 1 }> {
  const run = await runPipeline(manifestFile, ['clone', 'resolve'], options, log, progress);
  const ledger = new Ledger(options.out);
  return { text: run.units.map((u) => resolvedLine(u, ledger)).join('\n') + '\n', exitCode: run.exitCode };
}
