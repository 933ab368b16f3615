/**
 * `npm run bench:issue-fix -- OUT [OUT ...]`: how well issue-fix mining told real fixes from the
 * rest, on real history, against labels a person set by hand (bench/fixtures/issue_fix_labels.json:
 * per repository and unit commit, each candidate's fix commit, `fix` or `not_fix`, and why, read
 * from its FAIL_TO_PASS failures and its diff).
 *
 * It reads the forage ledger of one or more finished runs (`worldline run ... --policy oracle`)
 * and prints, per repository and in all: the real fixes among the candidates tried, how many were
 * kept (recall; also over the fixes a test can verify, where a fix has no test that fails before
 * it), kept tasks that are not fixes, the share the oracle resolved, and seconds per candidate.
 * A tried candidate without a label is listed, so the labels can be completed, and counts nowhere.
 *
 *   node dist/bench/issue_fix.js out-a out-b [--labels bench/fixtures/issue_fix_labels.json]
 */
import { readFileSync } from 'node:fs';
import { table } from '../core/table.js';
import { Ledger } from '../pipeline/runtime/ledger.js';
import type { CandidateFate, CloneRecord, ForageRecord } from '../pipeline/runtime/records.js';

interface Label {
  commit: string;
  label: 'fix' | 'not_fix';
  /** False for a real fix no test can show (no test of its own fails before it): it can never be a verified task. */
  verifiable?: boolean;
  /** The only Pythons (`3.9`) where a test of its own can show it; on the others it counts as unverifiable. */
  verifiable_on?: string[];
  why: string;
}

interface RepoLabels {
  repo: string;
  url: string;
  unit_commit: string;
  labels: Label[];
}

const ORACLE_DROP = /^the oracle did not resolve it/;

function args(): { outs: string[]; labels: string } {
  const argv = process.argv.slice(2);
  const at = argv.indexOf('--labels');
  const labels = at >= 0 ? argv[at + 1] : 'bench/fixtures/issue_fix_labels.json';
  const outs = argv.filter((_, i) => at < 0 || (i !== at && i !== at + 1));
  if (!outs.length) throw new Error('usage: node dist/bench/issue_fix.js OUT [OUT ...] [--labels FILE]');
  return { outs, labels };
}

const pct = (n: number, d: number) => (d ? `${n}/${d} (${Math.round((100 * n) / d)}%)` : '-');

interface Counts {
  tried: number;
  skipped: number;
  fixes: number;
  verifiable: number;
  kept: number;
  keptFixes: number;
  keptVerifiable: number;
  keptNotFix: number;
  oracleDropped: number;
  seconds: number;
}

const row = (name: string, c: Counts): (string | number)[] => [
  name,
  c.tried,
  c.skipped,
  c.fixes,
  c.kept,
  pct(c.keptFixes, c.fixes),
  pct(c.keptVerifiable, c.verifiable),
  pct(c.keptNotFix, c.kept),
  pct(c.kept, c.kept + c.oracleDropped),
  c.tried ? (c.seconds / c.tried).toFixed(1) : '-',
];

function main(): void {
  const { outs, labels: labelsFile } = args();
  const labelled: RepoLabels[] = JSON.parse(readFileSync(labelsFile, 'utf8'));
  const rows: (string | number)[][] = [
    [
      'repository (unit commit)',
      'tried',
      'skipped',
      'real fixes',
      'kept',
      'recall',
      'recall, verifiable fixes',
      'kept not fixes',
      'oracle resolved',
      's per candidate',
    ],
  ];
  const total: Counts = {
    tried: 0,
    skipped: 0,
    fixes: 0,
    verifiable: 0,
    kept: 0,
    keptFixes: 0,
    keptVerifiable: 0,
    keptNotFix: 0,
    oracleDropped: 0,
    seconds: 0,
  };
  const unlabelled: string[] = [];
  const misses: string[] = [];
  // A unit mined in several runs (a wider window in a later one) counts once: the run that tried the most candidates.
  const units = new Map<string, { fates: CandidateFate[]; clone: CloneRecord; repo: RepoLabels; python: string }>();
  for (const out of outs) {
    const ledger = new Ledger(out);
    for (const entry of ledger.all<ForageRecord>('forage')) {
      const clone = ledger.get<CloneRecord>('clone', entry.unit_id)?.record;
      const repo = labelled.find((r) => r.repo === entry.unit.repo && clone?.commit.startsWith(r.unit_commit));
      if (!entry.record || !clone || !repo) continue;
      const seen = units.get(entry.unit_id);
      if (!seen || seen.fates.length < entry.record.candidates.length)
        units.set(entry.unit_id, { fates: entry.record.candidates, clone, repo, python: entry.unit.python });
    }
  }
  for (const { fates, clone, repo, python } of units.values()) {
    const labelOf = (f: CandidateFate) => repo.labels.find((l) => f.fix_commit.startsWith(l.commit));
    const canVerify = (f: CandidateFate) => {
      const l = labelOf(f);
      return l?.verifiable !== false && (!l?.verifiable_on || l.verifiable_on.includes(python));
    };
    const tried = fates.filter((f) => f.fate !== 'skipped');
    const kept = tried.filter((f) => f.fate === 'kept');
    for (const f of tried.filter((f) => !labelOf(f))) unlabelled.push(`${repo.repo} ${f.fix_commit.slice(0, 7)} (${f.fate})`);
    const fixes = tried.filter((f) => labelOf(f)?.label === 'fix');
    const verifiable = fixes.filter(canVerify);
    const keptFixes = kept.filter((f) => labelOf(f)?.label === 'fix');
    const keptVerifiable = keptFixes.filter(canVerify);
    const keptNotFix = kept.filter((f) => labelOf(f)?.label === 'not_fix');
    const oracleDropped = tried.filter((f) => ORACLE_DROP.test(f.reason ?? ''));
    const seconds = tried.reduce((s, f) => s + f.seconds, 0);
    for (const f of fixes.filter((f) => f.fate !== 'kept'))
      misses.push(`missed fix ${repo.repo} ${f.fix_commit.slice(0, 7)}: ${(f.reason ?? '').slice(0, 160)}`);
    for (const f of keptNotFix) misses.push(`kept not fix ${repo.repo} ${f.fix_commit.slice(0, 7)}: ${labelOf(f)!.why}`);
    const counts: Counts = {
      tried: tried.length,
      skipped: fates.length - tried.length,
      fixes: fixes.length,
      verifiable: verifiable.length,
      kept: kept.length,
      keptFixes: keptFixes.length,
      keptVerifiable: keptVerifiable.length,
      keptNotFix: keptNotFix.length,
      oracleDropped: oracleDropped.length,
      seconds,
    };
    rows.push(row(`${repo.repo} (${clone.commit.slice(0, 7)}, py${python})`, counts));
    for (const k of Object.keys(total) as (keyof Counts)[]) total[k] += counts[k];
  }
  if (rows.length === 1) throw new Error(`no forage ledger entry in ${outs.join(', ')} matches a repository and unit commit of ${labelsFile}`);
  rows.push(row('all', total));
  console.log(table(rows));
  console.log('\ngoals: recall >= 80%, kept not fixes <= 10%, oracle resolved 100%');
  for (const m of misses) console.log(m);
  if (unlabelled.length) console.log(`\nunlabelled candidates (add them to ${labelsFile}):\n${unlabelled.join('\n')}`);
}

main();
