/**
 * The audit as one self-contained HTML file: charts drawn as inline SVG here (no chart library,
 * no script, no fonts, nothing fetched; a Content-Security-Policy forbids it), and the same
 * figures `--json` prints embedded as `<script type="application/json" id="audit-data">`.
 *
 * Every drawn mark is checkable against that JSON: it carries `data-series` (the figure's path in
 * the report, e.g. `outcomes.by_kind`), `data-key` (`field=value` picking the row of a list),
 * `data-field` and `data-value` (the exact number), and a `<title>` tooltip with the value as shown;
 * a bar's printed value is the text whose `data-value-label` is `series|key|field`.
 */
import type { AuditReport, Distribution } from './audit.js';

const esc = (s: unknown) => String(s).replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
const pct = (s: number | null) => (s === null ? 'n/a' : `${(s * 100).toFixed(1)}%`);

const WIDTH = 720;
const LABEL = 190;
const BAR = 18;
const GAP = 6;
const MAX_BARS = 30;
const COLORS = { issue: '#2f6fb0', mutation: '#e08a2c', bar: '#4a8f5c', target: '#c0392b', hist: '#6a5acd', other: '#b8b8b8' };

interface Mark {
  series: string;
  key?: [string, string | number];
  field: string;
  value: number;
}

function markAttrs(m: Mark): string {
  const key = m.key ? ` data-key="${esc(`${m.key[0]}=${m.key[1]}`)}"` : '';
  return `class="mark" data-series="${esc(m.series)}"${key} data-field="${esc(m.field)}" data-value="${esc(m.value)}"`;
}

function svg(height: number, body: string, label: string): string {
  return `<svg xmlns="http://www.w3.org/2000/svg" width="${WIDTH}" height="${height}" viewBox="0 0 ${WIDTH} ${height}" role="img" aria-label="${esc(label)}">${body}</svg>`;
}

function figure(title: string, chart: string, note = ''): string {
  return `<figure><figcaption>${esc(title)}</figcaption>${chart}${note ? `<p class="note">${esc(note)}</p>` : ''}</figure>`;
}

const empty = (title: string, what: string) => figure(title, `<p class="empty">${esc(what)}</p>`);

interface BarRow {
  label: string;
  value: number;
  shown: string;
  tooltip: string;
  mark: Mark;
}

/**
 * Horizontal bars scaled to `max` (1 for rates and shares, the largest value for counts); the
 * first MAX_BARS rows (lists come largest first), the rest being in the tables and the JSON.
 */
function barChart(title: string, allRows: BarRow[], max: number, opts: { target?: Mark; emptyText?: string } = {}): string {
  if (!allRows.length) return empty(title, opts.emptyText ?? 'nothing to show');
  const rows = allRows.slice(0, MAX_BARS);
  const note = allRows.length > rows.length ? `The first ${rows.length} of ${allRows.length} shown.` : '';
  const span = WIDTH - LABEL - 70;
  const x = (v: number) => LABEL + (max > 0 ? (v / max) * span : 0);
  const height = rows.length * (BAR + GAP) + GAP + (opts.target ? 14 : 0);
  const bars = rows.map((r, i) => {
    const y = GAP + i * (BAR + GAP);
    return (
      `<text x="${LABEL - 6}" y="${y + BAR - 5}" text-anchor="end" class="label">${esc(r.label)}</text>` +
      `<rect ${markAttrs(r.mark)} x="${LABEL}" y="${y}" width="${Math.max(1, x(r.value) - LABEL).toFixed(1)}" height="${BAR}" fill="${COLORS.bar}"><title>${esc(r.tooltip)}</title></rect>` +
      `<text x="${(x(r.value) + 4).toFixed(1)}" y="${y + BAR - 5}" class="value" data-value-label="${esc(`${r.mark.series}|${r.mark.key?.join('=') ?? ''}|${r.mark.field}`)}">${esc(r.shown)}</text>`
    );
  });
  let target = '';
  if (opts.target) {
    const tx = x(opts.target.value).toFixed(1);
    target =
      `<line ${markAttrs(opts.target)} x1="${tx}" x2="${tx}" y1="0" y2="${height - 12}" stroke="${COLORS.target}" stroke-width="2" stroke-dasharray="4 3"><title>target ${esc(pct(opts.target.value))}</title></line>` +
      `<text x="${tx}" y="${height - 2}" text-anchor="middle" class="value">target ${esc(pct(opts.target.value))}</text>`;
  }
  return figure(title, svg(height, bars.join('') + target, title), note);
}

/** One stacked bar per row: issue-fix then mutation-fix, with the target share marked. */
function mixChart(r: AuditReport): string {
  const m = r.mix;
  const rows = [
    { label: 'tasks', split: m.tasks, series: 'mix.tasks' },
    { label: 'trajectories', split: m.trajectories, series: 'mix.trajectories' },
  ].filter((x) => x.split.share !== null);
  if (!rows.length) return empty('Task mix against its target', 'no tasks');
  const span = WIDTH - LABEL - 70;
  const height = rows.length * (BAR + GAP) + GAP + 16;
  const tx = (LABEL + m.target * span).toFixed(1);
  const body = rows.map((row, i) => {
    const y = GAP + i * (BAR + GAP);
    const s = row.split.share!;
    const w = s * span;
    return (
      `<text x="${LABEL - 6}" y="${y + BAR - 5}" text-anchor="end" class="label">${row.label}</text>` +
      `<rect ${markAttrs({ series: row.series, field: 'share', value: s })} x="${LABEL}" y="${y}" width="${w.toFixed(1)}" height="${BAR}" fill="${COLORS.issue}"><title>${esc(`${row.label}: ${pct(s)} issue-fix (${row.split.issue_fix} of ${row.split.issue_fix + row.split.mutation_fix})`)}</title></rect>` +
      `<rect ${markAttrs({ series: row.series, field: 'mutation_fix', value: row.split.mutation_fix })} x="${(LABEL + w).toFixed(1)}" y="${y}" width="${(span - w).toFixed(1)}" height="${BAR}" fill="${COLORS.mutation}"><title>${esc(`${row.label}: ${row.split.mutation_fix} mutation-fix`)}</title></rect>` +
      `<text x="${LABEL + span + 4}" y="${y + BAR - 5}" class="value" data-value-label="${row.series}||share">${esc(pct(s))}</text>`
    );
  });
  const target =
    `<line ${markAttrs({ series: 'mix', field: 'target', value: m.target })} x1="${tx}" x2="${tx}" y1="0" y2="${height - 14}" stroke="${COLORS.target}" stroke-width="2"><title>target ${esc(pct(m.target))}</title></line>` +
    `<text x="${tx}" y="${height - 2}" text-anchor="middle" class="value">target ${esc(pct(m.target))}</text>`;
  const legend = `<p class="legend"><span style="background:${COLORS.issue}"></span>issue-fix <span style="background:${COLORS.mutation}"></span>mutation-fix</p>`;
  return figure('Task mix against its target', svg(height, body.join('') + target, 'task mix') + legend);
}

/** Vertical bars, one per bin, labelled at both ends of the range. */
function histogram(title: string, series: string, d: Distribution): string {
  if (!d.histogram.length) return empty(title, 'no values');
  const height = 170;
  const top = 16;
  const base = height - 30;
  const left = 40;
  const bw = (WIDTH - left - 10) / d.histogram.length;
  const widest = Math.max(...d.histogram.map((b) => b.count));
  const bars = d.histogram.map((b, i) => {
    const h = widest ? ((base - top) * b.count) / widest : 0;
    const range = b.lo === b.hi ? String(b.lo) : `${b.lo}-${b.hi}`;
    return (
      `<rect ${markAttrs({ series: `${series}.histogram`, key: ['lo', b.lo], field: 'count', value: b.count })} x="${(left + i * bw + 1).toFixed(1)}" y="${(base - h).toFixed(1)}" width="${Math.max(1, bw - 2).toFixed(1)}" height="${Math.max(h, b.count ? 1 : 0).toFixed(1)}" fill="${COLORS.hist}"><title>${esc(`${range}: ${b.count}`)}</title></rect>` +
      (b.count ? `<text x="${(left + (i + 0.5) * bw).toFixed(1)}" y="${(base - h - 3).toFixed(1)}" text-anchor="middle" class="small">${b.count}</text>` : '')
    );
  });
  const first = d.histogram[0];
  const last = d.histogram[d.histogram.length - 1];
  const axis =
    `<line x1="${left}" x2="${WIDTH - 10}" y1="${base}" y2="${base}" stroke="#555"/>` +
    `<text x="${left}" y="${base + 16}" class="small">${first.lo}</text><text x="${WIDTH - 10}" y="${base + 16}" text-anchor="end" class="small">${last.hi}</text>`;
  const stats = ['min', 'median', 'p90', 'max'] as const;
  const note = `n=${d.count}; ` + stats.map((s) => `${s} ${d[s]}`).join(', ');
  const statMarks = stats.map((s) => `<span ${markAttrs({ series, field: s, value: d[s]! })}>${s} ${esc(d[s])}</span>`).join(' · ');
  return figure(title, svg(height, bars.join('') + axis, title) + `<p class="stats" title="${esc(note)}">n=${d.count} · ${statMarks}</p>`);
}

function htmlTable(header: string[], rows: (string | number | null)[][]): string {
  if (!rows.length) return '<p class="empty">none</p>';
  return `<table><thead><tr>${header.map((h) => `<th>${esc(h)}</th>`).join('')}</tr></thead><tbody>${rows.map((r) => `<tr>${r.map((c) => `<td>${esc(c ?? '-')}</td>`).join('')}</tr>`).join('')}</tbody></table>`;
}

const rateRow = (series: string, keyField: string, key: string, x: { trajectories: number; resolved: number; rate: number | null }): BarRow => ({
  label: key,
  value: x.rate ?? 0,
  shown: pct(x.rate),
  tooltip: `${key}: ${pct(x.rate)} resolved (${x.resolved} of ${x.trajectories})`,
  mark: { series, key: [keyField, key], field: 'rate', value: x.rate ?? 0 },
});

const countRow = (series: string, keyField: string, key: string, field: string, n: number, what: string): BarRow => ({
  label: key,
  value: n,
  shown: String(n),
  tooltip: `${key}: ${n} ${what}`,
  mark: { series, key: [keyField, key], field, value: n },
});

const maxOf = (xs: number[]) => Math.max(0, ...xs);

function contentHtml(c: AuditReport['content']): string[] {
  if (!c) return ['<p class="empty">Not recorded (a dataset written before content safety was).</p>'];
  const e = c.exclusions;
  return [
    c.redaction
      ? htmlTable(
          ['config', 'rows redacted', 'placeholders by kind'],
          Object.entries(c.redaction.by_config).map(([k, b]) => [
            k,
            b.rows_redacted,
            Object.entries(b.by_kind)
              .map(([kind, n]) => `${kind} ${n}`)
              .join(', ') || 'none',
          ]),
        )
      : '<p class="verdict drift">Redaction was off: the dataset may contain secrets and personal data.</p>',
    `<p>Licenses kept: ${esc(e.licenses.join(', '))}. Benchmark decontamination: ${e.exclude_benchmarks ? 'on' : 'off'}.</p>`,
    htmlTable(
      ['units', 'excluded because'],
      c.excluded_units.map((x) => [x.units, x.reason]),
    ),
  ];
}

export function auditHtml(r: AuditReport): string {
  const m = r.mix;
  const o = r.outcomes;
  const t = r.traces;
  const data = JSON.stringify(r).replace(/</g, '\\u003c');
  const repoShare = m.by_repo.map((x) => ({
    label: x.repo,
    value: x.share ?? 0,
    shown: pct(x.share),
    tooltip: `${x.repo}: ${pct(x.share)} issue-fix (${x.issue_fix} of ${x.total}); ${pct(x.share_of_tasks)} of all tasks`,
    mark: { series: 'mix.by_repo', key: ['repo', x.repo] as [string, string], field: 'share', value: x.share ?? 0 },
  }));
  const repoOfTasks = m.by_repo.map((x) => ({
    label: x.repo,
    value: x.share_of_tasks,
    shown: pct(x.share_of_tasks),
    tooltip: `${x.repo}: ${x.total} tasks, ${pct(x.share_of_tasks)} of all`,
    mark: { series: 'mix.by_repo', key: ['repo', x.repo] as [string, string], field: 'share_of_tasks', value: x.share_of_tasks },
  }));
  const dominance = r.dominance.configs.map((c, ci) =>
    barChart(
      `${c.config}: share of rows of the ${r.dominance.top_k} largest repositories (top-${r.dominance.top_k} ${pct(c.top_k_share)}, Gini ${c.gini === null ? 'n/a' : c.gini.toFixed(3)})`,
      c.top.map((x) => ({
        label: x.repo,
        value: x.share,
        shown: pct(x.share),
        tooltip: `${x.repo}: ${x.rows} of ${c.rows} ${c.config} rows (${pct(x.share)})`,
        mark: { series: `dominance.configs.${ci}.top`, key: ['repo', x.repo] as [string, string], field: 'share', value: x.share },
      })),
      1,
      { emptyText: `no ${c.config} rows` },
    ),
  );
  const run = r.run;
  const body = [
    `<h1>Worldline dataset audit</h1><p class="path">${esc(r.dataset)}</p>`,
    `<p class="verdict ${m.status.toLowerCase()}" id="verdict">${esc(m.verdict)}</p>`,
    htmlTable(
      ['config', 'rows'],
      Object.entries(r.configs).map(([c, n]) => [c, n]),
    ),
    '<h2>Task mix</h2>',
    mixChart(r),
    barChart('Issue-fix share per repository', repoShare, 1, { target: { series: 'mix', field: 'target', value: m.target }, emptyText: 'no tasks' }),
    barChart("Each repository's share of the tasks", repoOfTasks, 1, { emptyText: 'no tasks' }),
    barChart(
      'Mutation-fix tasks per operator',
      m.by_operator.map((x) => countRow('mix.by_operator', 'operator', x.operator, 'tasks', x.tasks, 'tasks')),
      maxOf(m.by_operator.map((x) => x.tasks)),
      { emptyText: 'no mutation-fix tasks' },
    ),
    htmlTable(
      ['policy', 'model', 'issue_fix', 'mutation_fix', 'trajectories', 'issue-fix share'],
      m.by_policy.map((x) => [x.policy, x.model, x.issue_fix, x.mutation_fix, x.total, pct(x.share)]),
    ),
    '<h2>Outcomes</h2>',
    `<p>Resolved: ${o.resolved} of ${o.trajectories} trajectories (${pct(o.rate)}).</p>`,
    barChart(
      'Resolved rate by kind',
      o.by_kind.map((x) => rateRow('outcomes.by_kind', 'kind', x.kind, x)),
      1,
      { emptyText: 'no trajectories' },
    ),
    barChart(
      'Resolved rate by mutation operator',
      o.by_operator.map((x) => rateRow('outcomes.by_operator', 'operator', x.operator, x)),
      1,
      { emptyText: 'no mutation-fix trajectories' },
    ),
    barChart(
      'Resolved rate by repository',
      o.by_repo.map((x) => rateRow('outcomes.by_repo', 'repo', x.repo, x)),
      1,
      { emptyText: 'no trajectories' },
    ),
    htmlTable(
      ['policy', 'model', 'trajectories', 'resolved', 'rate'],
      o.by_policy.map((x) => [x.policy, x.model, x.trajectories, x.resolved, pct(x.rate)]),
    ),
    barChart(
      'Exit statuses',
      o.exit_status.map((x) => countRow('outcomes.exit_status', 'exit_status', x.exit_status, 'count', x.count, 'trajectories')),
      maxOf(o.exit_status.map((x) => x.count)),
      { emptyText: 'no trajectories' },
    ),
    histogram('Turns per trajectory', 'outcomes.turns', o.turns),
    histogram('Tokens per trajectory (prompt + completion)', 'outcomes.tokens', o.tokens),
    '<h2>Traces</h2>',
    `<p>${t.episodes} episodes over ${t.tests} tests; ${t.truncated} truncated episodes (${pct(t.truncation_rate)}), ${t.truncated_tests} truncated tests. Before/after-fix traces: ${t.fix_pairs.pairs} tasks with both, ${t.fix_pairs.before_only} before only, ${t.fix_pairs.after_only} after only; ${t.fix_pairs.tasks_without_traces} tasks without traces.</p>`,
    barChart(
      'Episodes per repository',
      t.by_repo.map((x) => countRow('traces.by_repo', 'repo', x.repo, 'episodes', x.episodes, 'episodes')),
      maxOf(t.by_repo.map((x) => x.episodes)),
      { emptyText: 'no traces' },
    ),
    barChart(
      'Truncation rate per repository',
      t.by_repo.map((x) => ({
        label: x.repo,
        value: x.truncation_rate ?? 0,
        shown: pct(x.truncation_rate),
        tooltip: `${x.repo}: ${x.truncated} of ${x.episodes} episodes truncated (${pct(x.truncation_rate)})`,
        mark: { series: 'traces.by_repo', key: ['repo', x.repo] as [string, string], field: 'truncation_rate', value: x.truncation_rate ?? 0 },
      })),
      1,
      { emptyText: 'no traces' },
    ),
    histogram('Frames per episode', 'traces.frame_count', t.frame_count),
    htmlTable(
      ['python', 'episodes'],
      t.python_versions.map((x) => [x.python_version, x.episodes]),
    ),
    '<h2>Tests</h2>',
    `<p>${r.tests.tests} tests, ${r.tests.flaky} flaky (${pct(r.tests.flaky_rate)}).</p>`,
    htmlTable(
      ['repo', 'tests', 'flaky', 'flaky rate'],
      r.tests.by_repo.map((x) => [x.repo, x.tests, x.flaky, pct(x.flaky_rate)]),
    ),
    htmlTable(
      ['flaky test', 'repo', 'outcomes per run'],
      r.tests.flaky_tests.map((x) => [x.node_id, x.repo, x.run_outcomes.join(', ')]),
    ),
    '<h2>Dominance</h2>',
    htmlTable(
      ['config', 'rows', 'repos', `top-${r.dominance.top_k} share`, 'Gini'],
      r.dominance.configs.map((c) => [c.config, c.rows, c.repos, pct(c.top_k_share), c.gini === null ? 'n/a' : c.gini.toFixed(3)]),
    ),
    ...dominance,
    htmlTable(
      ['license', 'units', 'repos'],
      r.dominance.licenses.map((x) => [x.license, x.units, x.repos]),
    ),
    '<h2>Content safety</h2>',
    ...contentHtml(r.content),
    '<h2>Run health</h2>',
    htmlTable(
      ['unit status', 'units'],
      r.units.status.map((x) => [x.status, x.count]),
    ),
    htmlTable(
      ['failed stage', 'units', 'reason'],
      r.units.failures.map((x) => [x.stage, x.units, x.reason]),
    ),
    run
      ? `<p>Ledger: ${esc(run.out)}</p>` +
        htmlTable(
          ['stage', 'ok', 'failed'],
          Object.entries(run.stages).map(([s, n]) => [s, n.ok, n.failed]),
        ) +
        htmlTable(
          ['stage', 'units', 'reason'],
          run.failures.map((f) => [f.stage, f.units, f.reason]),
        )
      : '<p class="empty">No run ledger beside the dataset.</p>',
  ];
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline'">
<title>Worldline audit</title>
<style>
body{font:14px/1.4 system-ui,sans-serif;margin:24px auto;max-width:780px;color:#222}
h1{font-size:22px;margin-bottom:0}h2{font-size:18px;margin-top:32px;border-bottom:1px solid #ddd}
.path{color:#666;margin-top:2px}.verdict{font-weight:bold;padding:6px 10px;border-radius:4px}
.verdict.ok{background:#e4f3e6}.verdict.drift{background:#fbe3e0}.verdict.closest{background:#fff4d6}.verdict.no_tasks{background:#eee}
figure{margin:16px 0}figcaption{font-weight:600;margin-bottom:4px}
svg text{font:12px system-ui,sans-serif;fill:#222}svg .small{font-size:10px}
table{border-collapse:collapse;margin:8px 0}td,th{border:1px solid #ddd;padding:2px 8px;text-align:left}
.note,.stats{color:#555;margin:2px 0}.empty{color:#888;font-style:italic}
.legend span{display:inline-block;width:10px;height:10px;margin:0 4px 0 10px}
</style></head><body>
${body.join('\n')}
<script type="application/json" id="audit-data">${data}</script>
</body></html>
`;
}
