/**
 * What a dataset may contain: repositories under allowed licenses only, none from a benchmark's
 * repositories, and text with its secrets redacted. A unit left out is a recorded outcome (its
 * repos row says `excluded` and why), never a silent gap.
 */
import { licenseAllowed, PERMISSIVE_LICENSES } from '../core/license.js';
import { BenchmarkRepos } from './benchmarks.js';

export interface ContentPolicy {
  /** Replace secrets and personal data with typed placeholders (datasets/secrets.ts). */
  redact: boolean;
  /** SPDX ids allowed (`unknown` must be named to keep unlicensed repositories; `*` allows any). */
  licenses: string[];
  /** Leave out units whose repository is in a benchmark (benchmark_repos.json). */
  excludeBenchmarks: boolean;
  /** Exact values to redact wherever they appear, with their placeholder kind (secret env.vars of the manifest). */
  secretValues?: Map<string, string>;
}

export const DEFAULT_CONTENT_POLICY: ContentPolicy = { redact: true, licenses: PERMISSIVE_LICENSES, excludeBenchmarks: true };

export interface UnitSource {
  /** Named in the summary's list of units left out. */
  unit_id?: string;
  repo: string;
  url: string;
  license: string;
}

/** What the card and manifest record of the policy and of the units it left out. */
export interface ExclusionSummary {
  licenses: string[];
  exclude_benchmarks: boolean;
  benchmark_sources: { name: string; source: string; repos: number }[];
  /** Units left out because of their license, by license. */
  license_excluded: Record<string, number>;
  /** Units left out because their repository is a benchmark's, by benchmark. */
  benchmark_excluded: Record<string, number>;
  /** Every unit left out, with the reason (what `run` and `status` show). */
  units?: ExcludedUnit[];
}

export interface ExcludedUnit {
  unit_id: string;
  repo: string;
  reason: string;
  /** What left it out: its license (not in `--licenses`) or its repository (a benchmark's). */
  by: 'license' | 'benchmark';
  license: string;
}

export class UnitFilter {
  private readonly benchmarks = new BenchmarkRepos();
  private readonly summary: ExclusionSummary;

  constructor(private readonly policy: ContentPolicy) {
    this.summary = {
      licenses: policy.licenses,
      exclude_benchmarks: policy.excludeBenchmarks,
      benchmark_sources: policy.excludeBenchmarks ? this.benchmarks.sources : [],
      license_excluded: {},
      benchmark_excluded: {},
      units: [],
    };
  }

  /** Why the unit is left out, or null when it stays; counted once per call. */
  reason(unit: UnitSource): string | null {
    const bench = this.policy.excludeBenchmarks ? this.benchmarks.match(unit.url, unit.repo) : null;
    if (bench) {
      this.summary.benchmark_excluded[bench.benchmark] = (this.summary.benchmark_excluded[bench.benchmark] ?? 0) + 1;
      return this.left(unit, 'benchmark', `benchmark repository: ${bench.repo} is in ${bench.benchmark} (--no-exclude-benchmarks keeps it)`);
    }
    if (!this.policy.licenses.includes('*') && !licenseAllowed(unit.license, this.policy.licenses)) {
      this.summary.license_excluded[unit.license] = (this.summary.license_excluded[unit.license] ?? 0) + 1;
      return this.left(unit, 'license', `license ${unit.license} is not in --licenses (${this.policy.licenses.join(', ')})`);
    }
    return null;
  }

  private left(unit: UnitSource, by: ExcludedUnit['by'], reason: string): string {
    if (unit.unit_id) this.summary.units!.push({ unit_id: unit.unit_id, repo: unit.repo, reason, by, license: unit.license });
    return reason;
  }

  result(): ExclusionSummary {
    return this.summary;
  }
}

/**
 * What to tell a person whose content policy left units out: the option that keeps them (one
 * `--licenses` naming every license they need, and/or `--no-exclude-benchmarks`).
 */
export function keepOptions(excluded: ExcludedUnit[], policy: Pick<ContentPolicy, 'licenses'>): string[] {
  const licenses = [...new Set(excluded.filter((u) => u.by === 'license').map((u) => u.license))];
  return [
    ...(licenses.length ? [`--licenses ${[...policy.licenses, ...licenses].join(',')}`] : []),
    ...(excluded.some((u) => u.by === 'benchmark') ? ['--no-exclude-benchmarks'] : []),
  ];
}
