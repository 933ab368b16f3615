import type { ContentPolicy } from '../../datasets/content_policy.js';
import type { DatasetLayout } from '../../datasets/dataset_writer.js';

/** Every knob of a pipeline run, with the defaults the CLI shows. */
/** What one test and one unit may write (tracers/worldline_tracer/caps.py). */
export interface TraceCaps {
  testEpisodes: number;
  testBytes: number;
  unitEpisodes: number;
  unitBytes: number;
}

export interface PipelineOptions {
  out: string;
  /** How `shard` lays the dataset out. */
  layout?: DatasetLayout;
  /** What `shard` keeps and redacts (datasets/content_policy.ts). */
  content?: ContentPolicy;
  /** The run's issue-fix share of tasks, applied when sharding (datasets/mix.ts). */
  issueFixShare?: number;
  concurrency: number;
  retryFailed: boolean;
  /** Wall seconds a unit may spend across its stages in one run; then its remaining work is skipped. */
  unitBudgetS?: number;
  /** A user-named base image instead of our debootstrap ones. */
  baseImage?: string;
  /**
   * Where a bare line's requirements Debian cannot meet come from (pipeline/envs/index/): `auto`
   * (this host's pip configuration), an index URL, a folder of wheels; absent or `none`: Debian alone.
   */
  pipIndex?: string;
  /**
   * With an index, which Python requirements it gives: `missing`, those Debian cannot meet (Debian's
   * package where one meets the requirement); `all`, every one, as of the cut-off (Debian's package
   * only for a distribution the index has no wheel of, and for what is no Python package).
   */
  indexFor: 'missing' | 'all';
  /** The index's upload cut-off (RFC 3339) instead of each commit's date. */
  excludeNewer?: string;
  /** Who repairs an inferred environment the rules cannot: the rules alone, or also a model (the openai server). */
  envPolicy: 'rules' | 'openai';
  buildTimeoutS: number;
  validateRuns: number;
  /** Validate also runs each suite as plain `python3 -m pytest` (no code of ours) and records where outcomes differ. */
  plainParity: boolean;
  /** Per-test timeout (pytest-timeout); 0 turns it off. */
  testTimeoutS: number;
  /** Wall timeout of one whole suite run. */
  suiteTimeoutS: number;
  memoryMb: number;
  /** Each container's work folder disk budget, MB (`--work-disk`). */
  workDiskMb: number;
  cpus: number;
  pids: number;
  /** Probability that an episode steps into a callee (seeded, reproducible). */
  traceStepIn: number;
  traceSeed: number;
  /** Test phases traced: call, and optionally setup and teardown. */
  tracePhases: string[];
  /** Raw events per test before its trace is cut and marked truncated. */
  traceMaxEvents: number;
  /** Output caps: episodes and bytes (episode JSON) per test and per unit; past them a seeded sample (0: no cap). */
  traceCaps: TraceCaps;
  /** The units on the first N manifest lines are traced twice, and the share of episodes that differ recorded. */
  determinismSample: number;
  /** Timeouts are multiplied by this under the tracer, so slowness never flips an outcome. */
  traceSlowdown: number;
  /** Share of each unit's trace episodes the describe stage describes (chosen by a hash seeded with traceSeed). */
  describeShare: number;
  /** Descriptions come from the openai server (`openai`) instead of the template describer. */
  describeModel: boolean;
  /** Seed of every choice forage makes (candidates, sites). */
  forageSeed: number;
  /** Mutation candidates (function x operator) tried per unit. */
  mutationTries: number;
  /** Mutation-fix tasks kept per unit at most. */
  mutationsPerUnit: number;
  /** Tasks of one unit worked at once in forage (each in its own containers; rows do not depend on it). */
  taskConcurrency: number;
  /** Per-test timeout while running a mutant (mutants may loop forever). */
  mutantTestTimeoutS: number;
  /** Who works the tasks: oracle (the gold fix through the real tools), openai, replay, or none. */
  policy: 'oracle' | 'openai' | 'replay' | 'none';
  /** The openai policy's server and sampling; the key comes from OPENAI_API_KEY. */
  openai?: { baseURL: string; model: string; temperature?: number; topP?: number; maxTokens?: number; seed?: number; maxRetries?: number; timeoutMs?: number };
  /** The replay policy's recordings: a trajectories dataset folder. */
  replayFrom?: string;
  /** An issue export (JSON Lines: number, title, body) for issue-fix problem statements. */
  issuesFile?: string;
  /** Issue-fix candidates mined per repository at most (0: no mining). */
  issueCandidates: number;
  /** Issue-fix statements without a linked issue are written by the model in `openai` (else from the failing tests). */
  statementModel: boolean;
  maxTurns: number;
  maxTokens: number;
  maxWallS: number;
  /** Per bash call inside a rollout. */
  bashTimeoutS: number;
  /** Older commits to trace per repository (0: only the manifest's). */
  historyCommits: number;
  /** Candidates tried to find them (0: ten per wanted commit, at most 40, as CWM). */
  historyTries: number;
  /** Static sharding of units across machines (Slurm arrays, Kubernetes indexed jobs). */
  rank: number;
  worldSize: number;
  /** Gigabytes of env images of finished units kept on this host (least recently used go first); undefined: no limit. */
  imageBudgetGb?: number;
  /** With worldSize > 1, this rank also writes the dataset (otherwise `worldline shard` does, once). */
  shardRank: boolean;
}

export const DEFAULTS: Omit<PipelineOptions, 'out'> = {
  concurrency: 2,
  retryFailed: false,
  buildTimeoutS: 1800,
  validateRuns: 2,
  plainParity: true,
  envPolicy: 'rules',
  indexFor: 'missing',
  testTimeoutS: 300,
  suiteTimeoutS: 1800,
  memoryMb: 4096,
  workDiskMb: 4096,
  cpus: 2,
  pids: 1024,
  traceStepIn: 0.5,
  traceSeed: 0,
  tracePhases: ['call'],
  traceMaxEvents: 100_000,
  determinismSample: 0,
  traceCaps: { testEpisodes: 1000, testBytes: 8 << 20, unitEpisodes: 50_000, unitBytes: 256 << 20 },
  traceSlowdown: 20,
  describeShare: 0.1,
  describeModel: false,
  forageSeed: 0,
  mutationTries: 40,
  mutationsPerUnit: 10,
  taskConcurrency: 2,
  mutantTestTimeoutS: 20,
  policy: 'oracle',
  issueCandidates: 20,
  statementModel: false,
  maxTurns: 30,
  maxTokens: 131_072,
  maxWallS: 600,
  bashTimeoutS: 120,
  historyCommits: 0,
  historyTries: 0,
  rank: 0,
  worldSize: 1,
  shardRank: false,
};
