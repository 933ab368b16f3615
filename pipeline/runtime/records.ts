/**
 * What each stage records for a unit in the ledger, in one map: `requireRecord(ctx, 'build')` is a
 * BuildRecord, and a stage reads an earlier stage's result through this map, never by importing
 * that stage. Bulky outputs (per-test rows, traces, tasks) live in part files (layout.ts), not here.
 */
import type { PythonVersion, UnitEnv } from './manifest.js';

export interface CloneRecord {
  commit: string;
  /** Relative to the output folder. */
  checkout: string;
  license: string;
  license_file: string | null;
  size_bytes: number;
  file_count: number;
  py_file_count: number;
  src_layout: boolean;
  /** Files of the commit whose contents the repository lacks (a partial clone's largest), left out of the checkout. */
  missing_files?: string[];
}

/** The project's own install, worked out from its files (tracers/worldline_install.py carries it out). */
export interface InstallPlan {
  name: string;
  version: string;
  /** The folder on sys.path for its packages (`/repo/src` for a src layout). */
  root: string;
  version_files: { path: string; text: string }[];
  entry_points: Record<string, Record<string, string>>;
  /** Install through the project's build backend (pip and the backend are in the image); else write the metadata. */
  backend: boolean;
}

/** Where a unit's environment came from, how it was found, and with what evidence. */
export interface ResolveRecord {
  /** `manifest`: the line's own env, used as written; `inferred`: worked out from the repository's files. */
  source: 'manifest' | 'inferred';
  /**
   * The inferred environment (null for a manifest's own: the manifest holds it, and its variables,
   * which may hold secrets, stay out of the ledger).
   */
  env: UnitEnv | null;
  python: PythonVersion;
  /** What a repaired environment is kept by (envs/repair/cache.ts): the resolution's key (evidence, Debian indexes, rules) with the pip index (null for a manifest env). */
  key: string | null;
  /** A resolution of the same evidence was taken from the machine's cache. */
  cached: boolean;
  /** The files read, and the notes on what was seen and not understood. */
  evidence_files: string[];
  notes: string[];
  /** Each Debian package, which requirement asked for it (file:line) and how it was found. */
  packages: { package: string; version: string; via: string; asked: string[] }[];
  /** Requirements no package of the chosen suite satisfies, with why. */
  unresolved: string[];
  install: InstallPlan | null;
  /**
   * With a Python index (--pip-index other than none): its mode, the upload cut-off the lock was
   * resolved as of (the commit's date unless --exclude-newer), and why each base tried before the
   * chosen one did not lock. The lock itself is env.lock.
   */
  index?: {
    mode: string;
    exclude_newer: string;
    exclude_newer_from: 'commit' | 'option';
    tried: string[];
    /** Distributions left out of the lock, and why (not on the index at the cut-off; no wheel and no sdist that locks). */
    left_out?: string[];
    /** Distributions with no wheel at the cut-off taken as their sdists (`name version`): built in the build container, offline. */
    from_sdist?: string[];
    /** Debian packages left out because the lock has every project they were asked for (the lock's versions were resolved together). */
    instead_of_debian?: string[];
    /** Debian packages taken from the index instead: compiled against a Debian package the lock shadows (python3-torchvision under the index's torch), each with why. */
    moved_to_index?: string[];
  };
}

/** One try at an image that collects: what stopped pytest's collection in it, and what was changed for the next try. */
export interface BuildAttempt {
  /** The problems a collect-only run showed (none on the last, successful try). */
  problems: string[];
  /** What the next try changed (packages added, a base, pytest arguments). */
  changes: string[];
  /** What the environment agent proposed that was not taken, and why (only with --env-policy openai). */
  refused?: string[];
  seconds: number;
}

export interface BuildRecord {
  image: string;
  image_id: string;
  base: string;
  python_version: string;
  pytest_version: string;
  pytest_timeout: boolean;
  /** An inferred environment as the image holds it, from here on the unit's (a repair may have changed the resolved one); absent for a manifest's own. */
  env?: UnitEnv;
  python?: PythonVersion;
  /** The Debian packages the image installed (a manifest's too). */
  apt?: string[];
  env_source?: 'manifest' | 'inferred' | 'repaired' | 'agent';
  /** Each build of an inferred environment and its collect-only check, in order (empty for a manifest env). */
  attempts?: BuildAttempt[];
  /** What pip installed from the package index (`name==version`, as `pip freeze` says): the constraints to pin. */
  pip_installed?: string[];
  /** How env.lock entered the image: the index mode, its files, how many were downloaded for this build and how many the host's cache had. */
  index?: {
    mode: string;
    files: number;
    downloaded: number;
    downloaded_bytes?: number;
    cached: number;
    /** The image of the lock's heavy files this one starts from (pipeline/sandbox/stack_images.ts), their count, and whether this build made it. */
    stack?: string;
    stack_files?: number;
    stack_built?: boolean;
    /** The image of the packages step and the lock's other files (pipeline/sandbox/lock_images.ts) this one starts from, and whether this build made it. */
    lock_image?: string;
    lock_image_built?: boolean;
    /** Sdists of the lock that did not build in this image (a C extension for older Pythons): left out, each named. */
    sdists_not_built?: string[];
  };
  /** How the project itself went in (null: a manifest env, or nothing to install). */
  install?: { method: 'backend' | 'metadata'; why: string | null } | null;
}

export interface SuiteCounts {
  collected: number;
  passed: number;
  failed: number;
  error: number;
  skipped: number;
  xfailed: number;
  xpassed: number;
  missing: number;
  flaky: number;
  /** Test ids not there in every run (an id that embeds the time, say): not flaky, never traced. */
  unstable_ids: number;
  /** Tests that passed in every run: what later stages may trace and grade with. */
  stable_passed: number;
}

export interface ValidateRecord extends SuiteCounts {
  image_id: string;
  python_version: string;
  pytest_version: string;
  runs: number;
  exit_codes: number[];
  traceable: boolean;
  /** Modules that did not collect in the first run (a suite run with --continue-on-collection-errors goes on without them). */
  collect_errors?: number;
  /**
   * Collected tests the suite timeout or the memory limit stopped before they finished: the unit
   * keeps the tests that finished in every run (its rows), and the stages after validate run only
   * those. Absent: none.
   */
  unfinished?: number;
  /** The suite under plain `python3 -m pytest` in the same image, test by test against ours (null: --no-plain-parity). */
  plain?: PlainParity | null;
}

/** Our per-test outcomes against plain pytest's (pipeline/sandbox/plain_parity.ts). */
export interface PlainParity {
  /** Plain runs made: one, and a second when the first disagreed with ours anywhere. */
  plain_runs: number;
  plain_exit_codes: number[];
  /** Tests both sides ran (flaky ones aside), and how many of them had the same outcome. */
  compared: number;
  equal: number;
  mismatches: number;
  /** The first mismatches: the test, our outcome, plain pytest's. */
  mismatched: { node_id: string; ours: string; plain: string }[];
  /** Tests whose outcome differed between the two plain runs (or between ours): flaky, not mismatched. */
  plain_flaky: number;
  /** Ids only our runs had, and only plain pytest had (the first of each, and their counts). */
  ours_only: string[];
  ours_only_count: number;
  plain_only: string[];
  plain_only_count: number;
  /** Why plain pytest could not be compared (it wrote no report), or null. */
  problem: string | null;
}

export interface TraceStageRecord {
  tests_traced: number;
  tests_with_line_events: number;
  episodes: number;
  line_events: number;
  mean_line_events_per_test: number;
  truncated_tests: number;
  truncation_rate: number;
  tracer_errors: number;
  /**
   * Tests where a repr ran past the tracer's wall-time safety net, and those classes: their values
   * are markers, so these traces depend on the machine's load (the unit is flagged, not silently different).
   */
  slow_repr_tests: number;
  slow_reprs: string[];
  /** Bytes of episode JSON the tracer wrote, after the output caps. */
  episode_bytes: number;
  /** Episodes cut before the caps, and the tests whose episodes are a seeded sample (at most 20 named). */
  episodes_built: number;
  sampled_tests: number;
  sampled: string[];
  /** The caps in force: test episodes, test bytes, unit episodes, unit bytes (0: none). */
  caps: number[];
  /** With --determinism-sample: the share of episodes that differ when the suite is traced again (null: not sampled). */
  determinism_diff: number | null;
  /** Non-flaky tests whose outcome under the tracer differs from validate's first run. */
  parity_mismatches: number;
  mismatched: string[];
  /**
   * Episodes of those tests, not kept: the trace changed what the test did (a `__repr__` with side
   * effects, run by the tracer to show a value), so it is the trace of a run that did not happen untraced.
   */
  parity_dropped_episodes: number;
  tracer_version: string;
  python_version: string;
}

/** What `describe` did with a unit's episodes (rows in the trace_descriptions part file). */
export interface DescribeRecord {
  /** The unit's trace episodes, and how many of them the seeded share chose and described. */
  episodes: number;
  described: number;
  kept: number;
  /** Chosen, but the trace has no final outcome to check a description against (cut by a cap): not described. */
  without_outcome: number;
  describer: 'template' | 'model';
  /** Descriptions not kept, by the kind of reason (no stated final outcome, wrong final outcome, server error). */
  rejected: Record<string, number>;
}

/** What became of one issue-fix candidate (or a code-changing commit that was no candidate). */
export interface CandidateFate {
  fix_commit: string;
  /** 'together', 'paired' or 'pull_request'; null for a skipped commit. */
  shape: string | null;
  fate: 'kept' | 'dropped' | 'skipped';
  reason: string | null;
  /** Seconds spent on it (patches, the container run, the oracle's rollout when it drops it). */
  seconds: number;
  fix_confidence: number | null;
}

export interface ForageRecord {
  issue_candidates: number;
  /** Every candidate's fate, newest first; skipped commits too. */
  candidates: CandidateFate[];
  issue_tasks: number;
  issues_dropped: number;
  task_trace_rows: number;
  policy: string;
  rollouts: number;
  resolved: number;
  mutation_tries: number;
  mutations_applied: number;
  mutations_without_site: number;
  mutations_survived: number;
  /** Mutant checks whose tests changed /repo, with the files the driver put back (at most 20 each). */
  mutations_tree_restored?: { index: number; files: string[] }[];
  mutation_tasks: number;
  tasks_by_operator: Record<string, number>;
  /** Tests a budget stopped under the tracer around a fix (a looping task state), with why. */
  trace_cuts?: TraceCut[];
  /** The per-test timeout the mutant check earned from validate's durations. */
  mutant_test_timeout_s?: number;
  /** The unit's forage wall seconds by phase of the work (see task_seconds). */
  seconds_by_phase?: Record<string, number>;
  /** Each task's wall seconds by phase: rollout, grading, and its trace container's phases. */
  task_seconds?: TaskCost[];
  /** The most tasks that were in flight at once (--task-concurrency bounds it; tasks kept from an earlier run do not count). */
  tasks_in_flight_max?: number;
}

/** A test a budget stopped under the tracer around a fix, and why: what was cut from its trace. */
export interface TraceCut {
  task_id: string;
  phase: 'before' | 'after';
  node_id: string;
  reason: string;
}

/** What one task cost, in wall seconds, by phase of the work. */
export interface TaskCost {
  task_id: string;
  kind: string;
  /** The policy's turns in the agent's container (its start included). */
  rollout: number;
  grading: number;
  /** The trace container's create, start, wait and removal: its wall minus its script's. */
  container: number;
  patch_apply: number;
  /** pytest's start-up, collection and exit in the traces: each phase's wall minus pytest's seconds in its tests. */
  pytest_startup: number;
  /** The tracer's work in the tests' set-up and teardown, outside their calls: mostly building and writing episodes. */
  tracer_around_tests: number;
  /** The tests' calls under the tracer. */
  traced_tests: number;
}

export interface StageRecords {
  clone: CloneRecord;
  resolve: ResolveRecord;
  build: BuildRecord;
  validate: ValidateRecord;
  trace: TraceStageRecord;
  describe: DescribeRecord;
  forage: ForageRecord;
}
