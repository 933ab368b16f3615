import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { evenSample } from '../pipeline/runtime/history.js';
import { buildHistoryRepo } from './fixtures/history_repo.js';
import { cli, sql, tempDir } from './helpers.js';

describe('--commits K: tracing older commits', () => {
  it('samples evenly, newest first', () => {
    expect(evenSample([1, 2, 3], 5)).toEqual([1, 2, 3]);
    expect(evenSample([0, 1, 2, 3, 4, 5, 6, 7, 8, 9], 3)).toEqual([0, 3, 6]);
  });

  it('traces up to K older commits of a repository with real history, each recorded against its head', async () => {
    const dir = tempDir('history');
    const shas = buildHistoryRepo(join(dir, 'slugs'));
    const manifest = join(dir, 'manifest.jsonl');
    writeFileSync(manifest, JSON.stringify({ repo: join(dir, 'slugs'), commit: shas[4] }) + '\n');
    const out = join(dir, 'out');
    const res = await cli([
      'run',
      '--manifest',
      manifest,
      '--out',
      out,
      '--stages',
      'clone,build,validate,trace,shard',
      '--json',
      '--commits',
      '2',
      '--validate-runs',
      '1',
    ]);
    expect(res.code, res.stderr).toBe(0);
    const run = JSON.parse(res.stdout) as { units: { unit_id: string }[]; history: { commit: string; status: string; history_of: string }[] };
    const head = run.units[0].unit_id;
    // Newest first over the first-parent history below the head: commits 4 and 3.
    expect(run.history.map((h) => [h.commit, h.status, h.history_of])).toEqual([
      [shas[3], 'ok', head],
      [shas[2], 'ok', head],
    ]);
    const repos = await sql<{ commit: string; history_of: string | null; passed: bigint }>(
      `select commit, history_of, passed from '${out}/dataset/repos/data/*.parquet' order by passed desc, commit`,
    );
    expect(repos).toEqual(
      [
        { commit: shas[4], history_of: null, passed: 6n },
        { commit: shas[3], history_of: head, passed: 5n },
        { commit: shas[2], history_of: head, passed: 5n },
      ].sort((a, b) => Number(b.passed - a.passed) || a.commit.localeCompare(b.commit)),
    );
    const traces = await sql<{ commit: string; n: bigint }>(
      `select commit, count(distinct node_id) as n from '${out}/dataset/traces/data/*.parquet' group by commit order by n desc, commit`,
    );
    expect(new Set(traces.map((t) => t.commit))).toEqual(new Set([shas[4], shas[3], shas[2]]));
    const buggy = await sql<{ text: string }>(
      `select text from '${out}/dataset/traces/data/*.parquet' where commit = '${shas[2]}' and function = 'unique_slug' limit 1`,
    );
    expect(buggy[0].text).toContain('<|line_sep|>');
    const again = await cli([
      'run',
      '--manifest',
      manifest,
      '--out',
      out,
      '--stages',
      'clone,build,validate,trace,shard',
      '--json',
      '--commits',
      '2',
      '--validate-runs',
      '1',
    ]);
    expect((JSON.parse(again.stdout) as { history: { ran: string[] }[] }).history.map((h) => h.ran)).toEqual([[], []]);
  }, 300_000);
});
