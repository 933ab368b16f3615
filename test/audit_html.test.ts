/**
 * The --html report in headless Chromium (Debian's `chromium`, driven by playwright-core): it
 * loads offline with no request but its own file and no console error, the charts draw, and
 * every number a chart shows (data attributes, labels, tooltips) equals the --json figures.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { type Browser, chromium } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { AuditReport } from '../datasets/audit.js';
import { auditHtml } from '../datasets/audit_html.js';
import { writeDataset } from '../datasets/dataset_writer.js';
import { reposSchema } from '../schemas/index.js';
import { knownRows, writeKnownDataset } from './fixtures/known_dataset.js';
import { cli, tempDir } from './helpers.js';

const CHROMIUM = '/usr/bin/chromium';
const RATE_FIELDS = new Set(['rate', 'share', 'share_of_tasks', 'truncation_rate', 'target']);
const pct = (s: number) => `${(s * 100).toFixed(1)}%`;

interface MarkSeen {
  series: string;
  key: string | null;
  field: string;
  value: string;
  tag: string;
  width: number;
  height: number;
  tooltip: string | null;
  label: string | null;
}

interface PageResult {
  requests: string[];
  errors: string[];
  data: AuditReport;
  marks: MarkSeen[];
  svgs: number;
  png: Buffer;
  mixWidths: { issue: number; mutation: number };
}

/** The figure a mark names: `series` is a dotted path into the report, `key` picks a list's row. */
function lookup(report: AuditReport, m: MarkSeen): unknown {
  let node: unknown = report;
  for (const part of m.series.split('.')) node = (node as Record<string, unknown>)[part];
  if (m.key !== null) {
    const [field, value] = m.key.split(/=(.*)/s);
    node = (node as Record<string, unknown>[]).find((row) => String(row[field]) === value);
  }
  return (node as Record<string, unknown>)[m.field];
}

async function openReport(browser: Browser, html: string): Promise<PageResult> {
  const url = pathToFileURL(html).href;
  const context = await browser.newContext({ viewport: { width: 900, height: 900 } });
  const requests: string[] = [];
  const errors: string[] = [];
  // Anything but the report itself is refused, and recorded.
  await context.route('**/*', (route) => (route.request().url() === url ? route.continue() : route.abort()));
  const page = await context.newPage();
  page.on('request', (r) => requests.push(r.url()));
  page.on('console', (m) => {
    if (m.type() === 'error') errors.push(m.text());
  });
  page.on('pageerror', (e) => errors.push(e.message));
  await page.goto(url, { waitUntil: 'load' });
  const seen = await page.evaluate(() => {
    const marks = [...document.querySelectorAll('.mark')].map((el) => {
      const box = el.getBoundingClientRect();
      const series = el.getAttribute('data-series')!;
      const key = el.getAttribute('data-key');
      const label = [...document.querySelectorAll('[data-value-label]')].find(
        (l) => l.getAttribute('data-value-label') === `${series}|${key ?? ''}|${el.getAttribute('data-field')}`,
      );
      return {
        series,
        key,
        field: el.getAttribute('data-field')!,
        value: el.getAttribute('data-value')!,
        tag: el.tagName.toLowerCase(),
        width: box.width,
        height: box.height,
        tooltip: el.querySelector('title')?.textContent ?? null,
        label: label?.textContent ?? null,
      };
    });
    const mixBar = (field: string) => document.querySelector(`rect[data-series="mix.tasks"][data-field="${field}"]`)?.getBoundingClientRect().width ?? 0;
    return {
      data: JSON.parse(document.getElementById('audit-data')!.textContent!),
      marks,
      svgs: document.querySelectorAll('svg').length,
      mixWidths: { issue: mixBar('share'), mutation: mixBar('mutation_fix') },
    };
  });
  const png = await page.screenshot({ fullPage: true, type: 'png' });
  await context.close();
  return { requests, errors, png, ...seen };
}

function pngSize(png: Buffer): { width: number; height: number } {
  expect(png.subarray(0, 8).toString('hex')).toBe('89504e470d0a1a0a');
  expect(png.subarray(12, 16).toString('ascii')).toBe('IHDR');
  return { width: png.readUInt32BE(16), height: png.readUInt32BE(20) };
}

describe('the audit --html report in headless Chromium', () => {
  let browser: Browser;
  let dir: string;

  beforeAll(async () => {
    browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox'] });
    dir = tempDir('audit-html');
  });

  afterAll(async () => {
    await browser?.close();
  });

  it('draws every chart offline, and each number it shows equals the --json figures', async () => {
    const out = join(dir, 'known');
    await writeKnownDataset(out, { ledger: true });
    const html = join(dir, 'known.html');
    const written = await cli(['audit', join(out, 'dataset'), '--top', '2', '--html', html]);
    expect(written.code, written.stderr).toBe(0);
    const json = await cli(['audit', join(out, 'dataset'), '--top', '2', '--json']);
    const report = JSON.parse(json.stdout) as AuditReport;

    const page = await openReport(browser, html);
    expect(page.requests).toEqual([pathToFileURL(html).href]);
    expect(page.errors).toEqual([]);
    const { width, height } = pngSize(page.png);
    expect(width).toBe(900);
    expect(height).toBeGreaterThan(2000);
    expect(page.png.length).toBeGreaterThan(50_000);
    expect(page.data).toEqual(report);

    // Every list a chart draws has one mark per row, each at its figure.
    const count = (series: string, field: string) => page.marks.filter((m) => m.series === series && m.field === field).length;
    expect(count('mix.by_repo', 'share')).toBe(report.mix.by_repo.length);
    expect(count('mix.by_repo', 'share_of_tasks')).toBe(report.mix.by_repo.length);
    expect(count('mix.by_operator', 'tasks')).toBe(report.mix.by_operator.length);
    expect(count('outcomes.by_kind', 'rate')).toBe(2);
    expect(count('outcomes.by_operator', 'rate')).toBe(3);
    expect(count('outcomes.by_repo', 'rate')).toBe(3);
    expect(count('outcomes.exit_status', 'count')).toBe(3);
    expect(count('outcomes.turns.histogram', 'count')).toBe(report.outcomes.turns.histogram.length);
    expect(count('outcomes.tokens.histogram', 'count')).toBe(report.outcomes.tokens.histogram.length);
    expect(count('traces.frame_count.histogram', 'count')).toBe(report.traces.frame_count.histogram.length);
    expect(count('traces.by_repo', 'episodes')).toBe(3);
    expect(count('traces.by_repo', 'truncation_rate')).toBe(3);
    for (const [i, c] of report.dominance.configs.entries()) expect(count(`dominance.configs.${i}.top`, 'share')).toBe(c.top.length);
    expect(count('mix', 'target')).toBe(2);

    for (const m of page.marks) {
      const figure = lookup(report, m);
      expect(Number(m.value), `${m.series} ${m.key} ${m.field}`).toBe(figure);
      const shown = RATE_FIELDS.has(m.field) ? pct(figure as number) : String(figure);
      if (m.tooltip !== null) expect(m.tooltip, `${m.series} ${m.key}`).toContain(shown);
      if (m.label !== null) expect(m.label, `${m.series} ${m.key}`).toBe(shown);
      // Drawn: bars have an area, except histogram bins with nothing in them.
      if (m.tag === 'rect' && !(m.field === 'count' && figure === 0)) expect(m.width * m.height, `${m.series} ${m.key}`).toBeGreaterThan(0);
    }
    // The mix bar splits at the issue-fix share.
    expect(page.mixWidths.issue / (page.mixWidths.issue + page.mixWidths.mutation)).toBeCloseTo(report.mix.tasks.share!, 2);
    expect(page.svgs).toBeGreaterThanOrEqual(15);
    expect(readFileSync(html, 'utf8')).not.toMatch(/(src|href)=["']?(https?:)?\/\//);
  }, 120_000);

  it('draws the first 30 rows of a long list and says how many there are', async () => {
    const out = join(dir, 'long');
    await writeKnownDataset(out);
    const report = JSON.parse((await cli(['audit', join(out, 'dataset'), '--json'])).stdout) as AuditReport;
    const repos = Array.from({ length: 45 }, (_, i) => ({ ...report.mix.by_repo[0], repo: `repo${String(i).padStart(2, '0')}` }));
    const html = auditHtml({ ...report, mix: { ...report.mix, by_repo: repos } });
    const drawn = [...html.matchAll(/data-series="mix\.by_repo" data-key="repo=(repo\d+)" data-field="share"/g)].map((m) => m[1]);
    expect(drawn).toEqual(repos.slice(0, 30).map((r) => r.repo));
    expect(html).toContain('The first 30 of 45 shown.');
  });

  it('renders a dataset without tasks, traces or trajectories without errors', async () => {
    const out = join(dir, 'empty');
    await writeDataset(join(out, 'dataset'), [{ schema: reposSchema, rows: knownRows().repos }]);
    const html = join(dir, 'empty.html');
    expect((await cli(['audit', join(out, 'dataset'), '--html', html])).code).toBe(0);
    const page = await openReport(browser, html);
    expect(page.requests).toEqual([pathToFileURL(html).href]);
    expect(page.errors).toEqual([]);
    expect(page.data.mix.status).toBe('NO_TASKS');
    // Only the repos config has rows: its dominance bars are the only marks.
    expect(new Set(page.marks.map((m) => m.series))).toEqual(new Set(['dominance.configs.0.top']));
    expect(page.marks.length).toBe(4);
    expect(readFileSync(html, 'utf8')).toContain('NO TASKS: the dataset has no issue-fix or mutation-fix tasks');
  }, 120_000);
});
