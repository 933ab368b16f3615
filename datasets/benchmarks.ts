/**
 * Benchmark decontamination by repository: the evaluation sets' repositories ship as data
 * (`benchmark_repos.json`, each list with its source), and a unit matches when its URL or its
 * manifest name, normalized, is one of them.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { packageRoot } from '../core/package.js';

interface BenchmarkList {
  name: string;
  source: string;
  repos: string[];
}

export interface BenchmarkMatch {
  benchmark: string;
  repo: string;
}

const lists = (): BenchmarkList[] =>
  (JSON.parse(readFileSync(join(packageRoot, 'datasets', 'benchmark_repos.json'), 'utf8')) as { benchmarks: BenchmarkList[] }).benchmarks;

/**
 * `owner/name` of a GitHub-style location, lower case: https and ssh URLs, `git@host:owner/name`,
 * with or without `.git`, `www.` or a trailing slash, and bare `owner/name`; null for anything
 * else (a local path names no upstream).
 */
export function normalizeRepo(location: string): string | null {
  let s = location.trim().toLowerCase();
  s = s.replace(/^git\+/, '').replace(/^[a-z]+:\/\//, '');
  s = s.replace(/^[^@/]+@([^:/]+):/, '$1/');
  s = s.replace(/^[^@/]+@/, '');
  s = s.replace(/^www\./, '');
  s = s.replace(/\/+$/, '').replace(/\.git$/, '');
  const m = /^(?:github\.com\/)?([a-z0-9_.-]+)\/([a-z0-9_.-]+)$/.exec(s);
  return m ? `${m[1]}/${m[2]}` : null;
}

export class BenchmarkRepos {
  private readonly byRepo = new Map<string, string>();
  readonly sources: { name: string; source: string; repos: number }[];

  constructor() {
    const all = lists();
    for (const l of all) for (const r of l.repos) if (!this.byRepo.has(r.toLowerCase())) this.byRepo.set(r.toLowerCase(), l.name);
    this.sources = all.map((l) => ({ name: l.name, source: l.source, repos: l.repos.length }));
  }

  /** The benchmark a unit's repository belongs to, by its URL or its manifest name. */
  match(...locations: (string | null | undefined)[]): BenchmarkMatch | null {
    for (const loc of locations) {
      const repo = loc ? normalizeRepo(loc) : null;
      const benchmark = repo ? this.byRepo.get(repo) : undefined;
      if (repo && benchmark) return { benchmark, repo };
    }
    return null;
  }
}
