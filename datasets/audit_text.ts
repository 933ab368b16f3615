/** The audit as aligned terminal tables, section by section. */
import { table } from '../core/table.js';
import type { AuditReport, Distribution, KindSplit, ResolvedRate } from './audit.js';

const pct = (s: number | null) => (s === null ? 'n/a' : `${(s * 100).toFixed(1)}%`);
const num = (n: number | null) => (n === null ? 'n/a' : Number.isInteger(n) ? String(n) : n.toFixed(1));

const counts = (c: Record<string, number>) =>
  Object.entries(c)
    .sort((a, b) => a[0].localeCompare(b[0]))
    .map(([k, n]) => `${k} ${n}`)
    .join(', ') || 'none';

function contentLines(c: AuditReport['content']): string[] {
  if (!c) return ['not recorded (a dataset written before content safety was)'];
  return [
    c.redaction ? `redacted: ${counts(c.redaction.total)} (${c.redaction.rules} rules)` : 'redaction: OFF (the dataset may contain secrets and personal data)',
    ...(c.redaction
      ? [
          table([
            ['config', 'rows redacted', 'placeholders'],
            ...Object.entries(c.redaction.by_config).map(([k, b]) => [k, b.rows_redacted, counts(b.by_kind)]),
          ]),
        ]
      : []),
    `licenses kept: ${c.exclusions.licenses.join(', ')}; excluded by license: ${counts(c.exclusions.license_excluded)}`,
    c.exclusions.exclude_benchmarks ? `benchmark repositories excluded: ${counts(c.exclusions.benchmark_excluded)}` : 'benchmark decontamination: OFF',
    ...(c.excluded_units.length ? ['', table([['units', 'excluded because'], ...c.excluded_units.map((e) => [e.units, e.reason.slice(0, 120)])])] : []),
  ];
}

function section(title: string, ...body: string[]): string {
  return [`== ${title} ==`, ...body].join('\n');
}

/** A table, or a line saying there is nothing to show. */
function rowsOr(header: (string | number)[], rows: (string | number)[][], empty: string): string {
  return rows.length ? table([header, ...rows]) : empty;
}

const splitCells = (s: KindSplit) => [s.issue_fix, s.mutation_fix, s.total, pct(s.share)];
const rateCells = (r: ResolvedRate) => [r.trajectories, r.resolved, pct(r.rate)];
const model = (m: string | null) => m ?? '-';

function distribution(name: string, d: Distribution): string {
  if (!d.count) return `${name}: none`;
  const widest = Math.max(...d.histogram.map((b) => b.count));
  const bar = (n: number) => '#'.repeat(Math.round((n / widest) * 40)) || (n ? '.' : '');
  return [
    `${name}: n=${d.count} min=${num(d.min)} median=${num(d.median)} p90=${num(d.p90)} max=${num(d.max)} mean=${num(d.mean)}`,
    table(d.histogram.map((b) => [`  ${b.lo === b.hi ? b.lo : `${b.lo}-${b.hi}`}`, b.count, bar(b.count)])),
  ].join('\n');
}

export function formatAudit(r: AuditReport): string {
  const m = r.mix;
  const o = r.outcomes;
  const t = r.traces;
  const parts = [
    `dataset: ${r.dataset}`,
    table([['config', 'rows'], ...Object.entries(r.configs).map(([c, n]) => [c, n])]),
    '',
    section(
      'task mix',
      m.verdict,
      '',
      table([
        ['', 'issue_fix', 'mutation_fix', 'total', 'issue-fix share'],
        ['tasks', ...splitCells(m.tasks)],
        ['trajectories', ...splitCells(m.trajectories)],
      ]),
      '',
      rowsOr(
        ['repo', 'issue_fix', 'mutation_fix', 'total', 'issue-fix share', 'share of tasks'],
        m.by_repo.map((x) => [x.repo, ...splitCells(x), pct(x.share_of_tasks)]),
        'no tasks',
      ),
      '',
      rowsOr(
        ['operator', 'tasks', 'share of mutations'],
        m.by_operator.map((x) => [x.operator, x.tasks, pct(x.share_of_mutations)]),
        'no mutation-fix tasks',
      ),
      '',
      rowsOr(
        ['policy', 'model', 'issue_fix', 'mutation_fix', 'trajectories', 'issue-fix share'],
        m.by_policy.map((x) => [x.policy, model(x.model), ...splitCells(x)]),
        'no trajectories',
      ),
    ),
    '',
    section(
      'outcomes',
      `resolved: ${o.resolved} of ${o.trajectories} trajectories (${pct(o.rate)})`,
      '',
      rowsOr(
        ['kind', 'trajectories', 'resolved', 'rate'],
        o.by_kind.map((x) => [x.kind, ...rateCells(x)]),
        'no trajectories',
      ),
      '',
      rowsOr(
        ['operator', 'trajectories', 'resolved', 'rate'],
        o.by_operator.map((x) => [x.operator, ...rateCells(x)]),
        'no mutation-fix trajectories',
      ),
      '',
      rowsOr(
        ['repo', 'trajectories', 'resolved', 'rate'],
        o.by_repo.map((x) => [x.repo, ...rateCells(x)]),
        'no trajectories',
      ),
      '',
      rowsOr(
        ['policy', 'model', 'trajectories', 'resolved', 'rate'],
        o.by_policy.map((x) => [x.policy, model(x.model), ...rateCells(x)]),
        'no trajectories',
      ),
      '',
      rowsOr(
        ['exit status', 'trajectories'],
        o.exit_status.map((x) => [x.exit_status, x.count]),
        'no exit statuses',
      ),
      '',
      distribution('turns', o.turns),
      '',
      distribution('tokens (prompt + completion)', o.tokens),
      '',
      o.replay.trajectories ? `replays: ${o.replay.exact} of ${o.replay.trajectories} exactly as recorded (${pct(o.replay.share)})` : 'replays: none',
    ),
    '',
    section(
      'traces',
      `${t.episodes} episodes over ${t.tests} tests; truncated: ${t.truncated} episodes (${pct(t.truncation_rate)}), ${t.truncated_tests} tests`,
      '',
      rowsOr(
        ['repo', 'episodes', 'tests', 'truncated', 'truncation rate', 'fix episodes'],
        t.by_repo.map((x) => [x.repo, x.episodes, x.tests, x.truncated, pct(x.truncation_rate), x.fix_episodes]),
        'no traces',
      ),
      '',
      rowsOr(
        ['python', 'episodes'],
        t.python_versions.map((x) => [x.python_version, x.episodes]),
        'no python versions',
      ),
      '',
      `before/after-fix traces: ${t.fix_pairs.pairs} tasks with both, ${t.fix_pairs.before_only} before only, ${t.fix_pairs.after_only} after only (${t.fix_pairs.before_episodes} + ${t.fix_pairs.after_episodes} episodes); ${t.fix_pairs.tasks_without_traces} tasks without traces`,
      '',
      distribution('frames per episode', t.frame_count),
      '',
      `output of suite tests: ${t.output.bytes} bytes of episode JSON; ${t.output.sampled_tests} tests sampled past a cap; caps (test episodes, test bytes, unit episodes, unit bytes; 0: none): ${
        t.output.caps.map((c) => `${c.caps.join(', ')} (${c.units} units)`).join('; ') || 'not recorded'
      }`,
      '',
      rowsOr(
        ['repo', 'bytes', 'episodes', 'tests', 'sampled tests'],
        t.output.by_repo.map((x) => [x.repo, x.bytes, x.episodes, x.tests, x.sampled_tests]),
        'no suite traces',
      ),
      '',
      rowsOr(
        ['sampled test', 'repo', 'cap', 'episodes kept', 'built', 'bytes'],
        t.output.sampled.map((x) => [x.node_id, x.repo, x.sampled, x.episodes, x.built, x.bytes]),
        'no test was sampled',
      ),
      '',
      rowsOr(
        ['traced twice: repo', 'unit', 'episodes differing'],
        t.output.determinism.map((x) => [x.repo, x.unit_id, pct(x.share_differing)]),
        'no unit traced twice (--determinism-sample)',
      ),
      '',
      distribution('episode bytes per test', t.output.bytes_per_test),
      '',
      distribution('episodes per test', t.output.episodes_per_test),
    ),
    '',
    section(
      'trace descriptions',
      `${r.descriptions.described} described, ${r.descriptions.kept} kept (stated final outcome matches the trace)`,
      '',
      rowsOr(
        ['describer', 'model', 'described', 'kept'],
        r.descriptions.by_describer.map((x) => [x.describer, model(x.model), x.described, x.kept]),
        'no descriptions',
      ),
      '',
      rowsOr(
        ['not kept because', 'descriptions'],
        r.descriptions.rejected.map((x) => [x.reason, x.count]),
        'none rejected',
      ),
    ),
    '',
    section(
      'tests',
      `${r.tests.tests} tests, ${r.tests.flaky} flaky (${pct(r.tests.flaky_rate)}), ${r.tests.unstable_ids} unstable ids`,
      `against plain python3 -m pytest in the same image: ${r.tests.plain.mismatches} of ${r.tests.plain.compared} compared tests differ`,
      ...r.tests.plain.by_repo.map((x) => `  ${x.repo}  ${x.mismatches} of ${x.compared} differ (worldline status names them)`),
      '',
      rowsOr(
        ['repo', 'tests', 'flaky', 'flaky rate'],
        r.tests.by_repo.map((x) => [x.repo, x.tests, x.flaky, pct(x.flaky_rate)]),
        'no tests',
      ),
      '',
      rowsOr(
        ['outcome (first run)', 'tests'],
        r.tests.outcomes.map((x) => [x.outcome, x.count]),
        'no outcomes',
      ),
      ...(r.tests.flaky_tests.length ? ['', 'flaky:', ...r.tests.flaky_tests.map((f) => `  ${f.repo}  ${f.node_id}  ${f.run_outcomes.join(',')}`)] : []),
    ),
    '',
    section(
      `dominance (top ${r.dominance.top_k} repositories)`,
      table([
        ['config', 'rows', 'repos', `top-${r.dominance.top_k} share`, 'gini', 'largest'],
        ...r.dominance.configs.map((c) => [
          c.config,
          c.rows,
          c.repos,
          pct(c.top_k_share),
          c.gini === null ? 'n/a' : c.gini.toFixed(3),
          c.top.map((x) => `${x.repo} ${pct(x.share)}`).join(', '),
        ]),
      ]),
      '',
      rowsOr(
        ['license', 'units', 'repos'],
        r.dominance.licenses.map((x) => [x.license, x.units, x.repos]),
        'no repositories',
      ),
    ),
    '',
    section('content safety', ...contentLines(r.content)),
    '',
    section(
      'near duplicates',
      r.near_duplicates
        ? `removed (MinHash-LSH, Jaccard >= ${r.near_duplicates.threshold}, ${r.near_duplicates.shingle_size}-word shingles): ${Object.entries(
            r.near_duplicates.removed,
          )
            .map(([c, n]) => `${c} ${n}`)
            .join(', ')}`
        : 'not removed (the dataset was written without --near-dedup)',
    ),
    '',
    section(
      'tokens',
      r.tokens.tokenizer
        ? [
            `tokenizer: ${r.tokens.tokenizer}${r.tokens.max_row_tokens === null ? '' : `, rows over ${r.tokens.max_row_tokens} tokens rejected`}`,
            table([
              ['config', 'tokens', 'rejected rows', 'top repo share', 'by kind', 'largest'],
              ...r.tokens.configs.map((c) => [
                c.config,
                c.tokens,
                c.rows_rejected,
                pct(c.top_repo_share),
                c.by_kind.map((k) => `${k.kind} ${k.tokens}`).join(', ') || '-',
                c.by_repo.map((x) => `${x.repo} ${pct(x.share)}`).join(', '),
              ]),
            ]),
          ].join('\n')
        : 'no token counts (the dataset was written without a tokenizer)',
    ),
    '',
    section(
      'run health',
      `units: ${r.units.units} (${r.units.status.map((s) => `${s.count} ${s.status}`).join(', ') || 'none'})`,
      `environments: ${r.units.env_sources.map((e) => `${e.count} ${e.source}`).join(', ') || 'none'}`,
      ...(r.units.failure_kinds.length ? [`failing because of: ${r.units.failure_kinds.map((k) => `${k.kind} (${k.count})`).join(', ')}`] : []),
      ...(r.units.failures.length
        ? ['', table([['failed stage', 'units', 'reason'], ...r.units.failures.map((f) => [f.stage, f.units, f.reason.slice(0, 120)])])]
        : []),
      '',
      r.run
        ? [
            `ledger: ${r.run.out}${r.run.manifest_errors ? ` (${r.run.manifest_errors} manifest line(s) rejected)` : ''}`,
            table([['stage', 'ok', 'failed'], ...Object.entries(r.run.stages).map(([st, n]) => [st, n.ok, n.failed])]),
            ...(r.run.candidates && (r.run.candidates.tried || r.run.candidates.skipped)
              ? [
                  '',
                  `issue candidates: ${r.run.candidates.tried} tried, ${r.run.candidates.kept} kept, ${r.run.candidates.dropped} dropped, ${r.run.candidates.skipped} commits skipped; ${r.run.candidates.seconds_per_candidate ?? 0} s per candidate`,
                  table([['fate', 'candidates', 'reason'], ...r.run.candidates.reasons.map((x) => [x.fate, x.count, x.reason.slice(0, 120)])]),
                ]
              : []),
            ...(r.run.failures.length
              ? ['', table([['stage', 'units', 'reason'], ...r.run.failures.map((f) => [f.stage, f.units, f.reason.slice(0, 120)])])]
              : []),
          ].join('\n')
        : 'no run ledger beside the dataset',
    ),
  ];
  return parts.join('\n');
}
