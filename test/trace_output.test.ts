/**
 * The trace stage's output, end to end on real Docker: a property-based suite (Debian's
 * python3-hypothesis) traced twice from scratch gives identical traces, and a test above the
 * per-test cap is sampled the same way both times, with its bytes, the sampled test and the caps in
 * audit.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { cli, sql, tempDir } from './helpers.js';

const FILES: Record<string, string> = {
  'pyproject.toml': '[project]\nname = "props"\nversion = "0.1"\n',
  'props.py': [
    'def clamp(x, lo, hi):',
    '    if x < lo:',
    '        return lo',
    '    if x > hi:',
    '        return hi',
    '    return x',
    '',
    '',
    'def step(i):',
    '    j = i * 3',
    '    return j - 1',
    '',
  ].join('\n'),
  'tests/test_props.py': [
    'import random',
    'from hypothesis import given, strategies as st',
    'import props',
    '',
    '',
    '@given(st.integers(), st.integers(min_value=-9, max_value=0), st.integers(min_value=1, max_value=9))',
    'def test_clamp(x, lo, hi):',
    '    assert lo <= props.clamp(x, lo, hi) <= hi',
    '',
    '',
    'def test_many_steps():',
    '    assert [props.step(i) for i in range(40)][-1] == 116',
    '',
    '',
    'def test_random_walk():',
    '    assert props.clamp(random.randint(-50, 50), -10, 10) in range(-10, 11)',
    '',
  ].join('\n'),
};

// 30 episodes kept per test: test_clamp and test_many_steps make more and are sampled
const CAPS = '30,0,0,0';
// The props repository has no licence file: `--licenses '*'` keeps its rows (unknown licences are left out by default).
const RUN_ARGS = ['--stages', 'clone,build,validate,trace,shard', '--json', '--trace-caps', CAPS, '--licenses', '*'];

describe('trace output: reproducible, bounded, visible in audit', () => {
  const outs: string[] = [];

  beforeAll(async () => {
    const dir = tempDir('trace-output');
    const repo = join(dir, 'props');
    mkdirSync(join(repo, 'tests'), { recursive: true });
    for (const [name, text] of Object.entries(FILES)) writeFileSync(join(repo, name), text);
    const manifest = join(dir, 'manifest.jsonl');
    writeFileSync(manifest, `${JSON.stringify({ repo, python: '3.11', env: { apt: ['python3-hypothesis'] } })}\n`);
    for (const name of ['first', 'second']) {
      const out = join(dir, name);
      // the second run also traces its unit twice over (--determinism-sample)
      const twice = name === 'second' ? ['--determinism-sample', '1'] : [];
      const res = await cli(['run', '--manifest', manifest, '--out', out, ...RUN_ARGS, ...twice]);
      if (res.code !== 0) console.error(res.stdout, res.stderr);
      expect(res.code).toBe(0);
      outs.push(out);
    }
  }, 1_500_000);

  const traces = (out: string) =>
    sql<{ node_id: string; episode_index: number; text: string; test_sampled: string | null; test_episodes_built: bigint; test_episode_bytes: bigint }>(
      `select node_id, episode_index, text, test_sampled, test_episodes_built, test_episode_bytes from '${out}/dataset/traces/data/*.parquet' order by node_id, episode_index`,
    );

  it('gives identical traces from two runs from scratch, hypothesis and random included', async () => {
    const [a, b] = [await traces(outs[0]), await traces(outs[1])];
    const clamp = a.filter((t) => t.node_id.endsWith('::test_clamp'));
    expect(clamp.length).toBe(30);
    expect(a.filter((t) => t.node_id.endsWith('::test_random_walk')).length).toBeGreaterThan(0);
    expect(b).toEqual(a);
  });

  it('--determinism-sample traces a unit twice and records that no episode differed, in repos and audit', async () => {
    const [repo] = await sql<{ trace_determinism_diff: number | null }>(`select trace_determinism_diff from '${outs[1]}/dataset/repos/data/*.parquet'`);
    expect(repo.trace_determinism_diff).toBe(0);
    const [unsampled] = await sql<{ trace_determinism_diff: number | null }>(`select trace_determinism_diff from '${outs[0]}/dataset/repos/data/*.parquet'`);
    expect(unsampled.trace_determinism_diff).toBe(null);
    const res = await cli(['audit', join(outs[1], 'dataset'), '--json']);
    const det = (JSON.parse(res.stdout) as { traces: { output: { determinism: { share_differing: number }[] } } }).traces.output.determinism;
    expect(det.map((d) => d.share_differing)).toEqual([0]);
  });

  it('samples a test above the per-test cap, and records it per test and per unit', async () => {
    const rows = await traces(outs[0]);
    const many = rows.filter((t) => t.node_id.endsWith('::test_many_steps'));
    expect(many.length).toBe(30);
    expect(many[0].test_sampled).toBe('test_cap');
    expect(Number(many[0].test_episodes_built)).toBeGreaterThan(30);
    const walk = rows.filter((t) => t.node_id.endsWith('::test_random_walk'));
    expect(walk[0].test_sampled).toBe(null);
    const [repo] = await sql<{ trace_sampled_tests: bigint; trace_episode_bytes: bigint; trace_caps: number[] }>(
      `select trace_sampled_tests, trace_episode_bytes, trace_caps from '${outs[0]}/dataset/repos/data/*.parquet'`,
    );
    expect(Number(repo.trace_sampled_tests)).toBe(2);
    const bytes = new Map(rows.map((t) => [t.node_id, Number(t.test_episode_bytes)]));
    expect(Number(repo.trace_episode_bytes)).toBe([...bytes.values()].reduce((x, y) => x + y, 0));
  });

  it('shows bytes per test, the sampled tests and the caps in audit', async () => {
    const res = await cli(['audit', join(outs[0], 'dataset'), '--json']);
    expect(res.code).toBe(0);
    const output = (
      JSON.parse(res.stdout) as { traces: { output: { sampled_tests: number; sampled: { node_id: string }[]; caps: { caps: number[] }[]; bytes: number } } }
    ).traces.output;
    expect(output.sampled_tests).toBe(2);
    expect(output.sampled.map((s) => s.node_id.split('::')[1])).toEqual(['test_clamp', 'test_many_steps']);
    expect(output.caps.map((c) => c.caps.map(Number))).toEqual([[30, 0, 0, 0]]);
    expect(output.bytes).toBeGreaterThan(0);
  });
});
