/**
 * Token counts: the o200k BPE from gpt-tokenizer (counts cross-checked once against js-tiktoken,
 * written down below), every text column's count in its rows (read back by DuckDB), the totals
 * in manifest.json and the card, the audit's tokens per config, repository and kind, and the
 * `--max-row-tokens` cap.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { type DatasetManifest, writeDataset } from '../datasets/dataset_writer.js';
import { readManifestJson } from '../datasets/reader.js';
import { loadTokenizer, type TokenCounter } from '../datasets/tokens.js';
import { verifyDataset } from '../datasets/verify.js';
import { reposSchema, tasksSchema, testsSchema, tracesSchema, trajectoriesSchema } from '../schemas/index.js';
import { type KnownRows, knownRows } from './fixtures/known_dataset.js';
import { cli, sql, tempDir } from './helpers.js';

const sources = (rows: KnownRows) => [
  { schema: reposSchema, rows: rows.repos },
  { schema: testsSchema, rows: rows.tests },
  { schema: tracesSchema, rows: rows.traces },
  { schema: tasksSchema, rows: rows.tasks },
  { schema: trajectoriesSchema, rows: rows.trajectories },
];

/** Every string of a chat message list, each counted: what `messages_tokens` holds. */
const messageTokens = (tok: TokenCounter, messages: KnownRows['trajectories'][number]['messages']) =>
  messages.reduce(
    (s, m) =>
      s +
      [m.role, m.content, m.name, m.tool_call_id, ...m.tool_calls.flatMap((c) => [c.id, c.type, c.function.name, c.function.arguments])]
        .filter((x): x is string => !!x)
        .reduce((n, x) => n + tok.count(x), 0),
    0,
  );

describe('token counts', () => {
  let tok: TokenCounter;
  let rows: KnownRows;
  let dir: string;
  let manifest: DatasetManifest;

  beforeAll(async () => {
    tok = await loadTokenizer('o200k_base');
    rows = knownRows();
    dir = join(tempDir('tokens'), 'dataset');
    manifest = await writeDataset(dir, sources(rows), { tokenizer: 'o200k_base', rowGroupRows: 16 });
  });

  it('counts with o200k_base as tiktoken does, special-token text as plain text', async () => {
    expect(tok).toMatchObject({ name: 'o200k_base', source: 'gpt-tokenizer@4.0.0' });
    // Counts js-tiktoken 1.0.21 gives for the same strings.
    expect(tok.count('hello world')).toBe(2);
    expect(tok.count('def add(a, b):\n    return a + b\n')).toBe(12);
    expect(tok.count('x = "<|endoftext|>"')).toBe(9);
    expect(tok.count('<|trace_context_start|>\n<|frame_sep|><|call_sep|>{"total": 6}')).toBe(23);
    await expect(loadTokenizer('gpt2-ish')).rejects.toThrow(/unknown tokenizer "gpt2-ish" \(tokenizers: o200k_base, /);
  });

  it("stores each text column's count in its rows, and the per-config totals in manifest.json and the card", async () => {
    const traces = await sql<{ node_id: string; function: string; text: string; text_tokens: bigint }>(
      `select node_id, function, text, text_tokens from '${dir}/traces/data/*.parquet'`,
    );
    expect(traces).toHaveLength(rows.traces.length);
    for (const t of traces) expect(Number(t.text_tokens)).toBe(tok.count(t.text));
    const traceTotal = rows.traces.reduce((s, t) => s + tok.count(t.text), 0);
    expect(traceTotal).toBeGreaterThan(rows.traces.length);
    expect(manifest.configs.traces.tokens).toEqual({ text: traceTotal });

    const tasks = await sql<{ problem_statement_tokens: bigint; patch_tokens: bigint; test_patch_tokens: bigint }>(
      `select sum(problem_statement_tokens) as problem_statement_tokens, sum(patch_tokens) as patch_tokens, sum(test_patch_tokens) as test_patch_tokens from '${dir}/tasks/data/*.parquet'`,
    );
    const sum = (f: (t: KnownRows['tasks'][number]) => string) => rows.tasks.reduce((s, t) => s + tok.count(f(t)), 0);
    expect(tasks[0]).toEqual({
      problem_statement_tokens: BigInt(sum((t) => t.problem_statement)),
      patch_tokens: BigInt(sum((t) => t.patch)),
      test_patch_tokens: BigInt(sum((t) => t.test_patch)),
    });

    const [traj] = await sql<{ n: bigint }>(`select sum(messages_tokens) as n from '${dir}/trajectories/data/*.parquet'`);
    expect(Number(traj.n)).toBe(rows.trajectories.reduce((s, t) => s + messageTokens(tok, t.messages), 0));
    expect(manifest.configs.trajectories.tokens).toEqual({ messages: Number(traj.n) });

    // Configs without free text get no count columns.
    const testCols = await sql<{ name: string }>(`select name from parquet_schema('${dir}/tests/data/*.parquet') where name like '%_tokens'`);
    expect(testCols).toEqual([]);
    expect(manifest.configs.tests.tokens).toEqual({});
    expect(manifest.tokenizer).toEqual({ name: 'o200k_base', source: 'gpt-tokenizer@4.0.0', max_row_tokens: null });

    const card = readFileSync(join(dir, 'README.md'), 'utf8');
    expect(card).toContain('## Tokens');
    expect(card).toContain('Counted with o200k_base (gpt-tokenizer@4.0.0)');
    expect(card).toContain(`| traces | ${traceTotal} | text: ${traceTotal} |`);
    // The card's features list the count columns, so `datasets` loads them with the right type.
    expect(card).toMatch(/- name: text_tokens\n\s+dtype: int64/);
    expect(await verifyDataset(dir)).toMatchObject({ ok: true });
  });

  it('audits tokens per config, repository and kind, with the largest repository share', async () => {
    const res = await cli(['audit', dir, '--json']);
    expect(res.code, res.stderr).toBe(0);
    const audit = JSON.parse(res.stdout) as {
      tokens: {
        tokenizer: string;
        configs: {
          config: string;
          tokens: number;
          by_repo: { repo: string; tokens: number; share: number }[];
          top_repo_share: number;
          by_kind: { kind: string; tokens: number }[];
        }[];
      };
    };
    expect(audit.tokens.tokenizer).toBe('o200k_base (gpt-tokenizer@4.0.0)');
    expect(audit.tokens.configs.map((c) => c.config)).toEqual(['traces', 'tasks', 'trajectories']);
    const traces = audit.tokens.configs.find((c) => c.config === 'traces')!;
    const byRepo = new Map<string, number>();
    for (const t of rows.traces) byRepo.set(t.repo, (byRepo.get(t.repo) ?? 0) + tok.count(t.text));
    const expected = [...byRepo.entries()].sort((a, b) => b[1] - a[1] || a[0].localeCompare(b[0]));
    expect(traces.by_repo.map((r) => [r.repo, r.tokens])).toEqual(expected);
    expect(traces.top_repo_share).toBeCloseTo(expected[0][1] / traces.tokens, 12);
    // Kinds of trace: suite episodes and those before/after a fix.
    const phase = (p: string) => rows.traces.filter((t) => (t.phase ?? 'suite') === p).reduce((s, t) => s + tok.count(t.text), 0);
    expect(Object.fromEntries(traces.by_kind.map((k) => [k.kind, k.tokens]))).toEqual({
      suite: phase('suite'),
      before: phase('before'),
      after: phase('after'),
    });
    const tasks = audit.tokens.configs.find((c) => c.config === 'tasks')!;
    const kindTokens = (k: string) =>
      rows.tasks.filter((t) => t.kind === k).reduce((s, t) => s + tok.count(t.problem_statement) + tok.count(t.patch) + tok.count(t.test_patch), 0);
    expect(Object.fromEntries(tasks.by_kind.map((k) => [k.kind, k.tokens]))).toEqual({
      issue_fix: kindTokens('issue_fix'),
      mutation_fix: kindTokens('mutation_fix'),
    });
    const text = await cli(['audit', dir]);
    expect(text.stdout).toMatch(/== tokens ==\ntokenizer: o200k_base \(gpt-tokenizer@4\.0\.0\)/);
  });

  it('rejects and counts rows over --max-row-tokens, and a dataset without a tokenizer has no counts', async () => {
    const sizes = rows.traces.map((t) => tok.count(t.text)).sort((a, b) => a - b);
    const cap = sizes[Math.floor(sizes.length / 2)];
    const over = sizes.filter((n) => n > cap).length;
    expect(over).toBeGreaterThan(0);
    const capped = join(tempDir('tokens-cap'), 'dataset');
    const m = await writeDataset(capped, sources(rows), { tokenizer: 'o200k_base', maxRowTokens: cap });
    expect(m.configs.traces).toMatchObject({ rows: rows.traces.length - over, rows_rejected_tokens: over });
    expect(m.rejected.find((r) => r.kind === 'tokens')?.reason).toMatch(new RegExp(`^row of \\d+ o200k_base tokens is over the ${cap}-token cap$`));
    const [max] = await sql<{ n: bigint }>(`select max(text_tokens) as n from '${capped}/traces/data/*.parquet'`);
    expect(Number(max.n)).toBe(cap);
    expect(readFileSync(join(capped, 'README.md'), 'utf8')).toContain(`Rows over ${cap} tokens were rejected`);

    const plain = join(tempDir('tokens-none'), 'dataset');
    // Rows read back from the counted dataset carry counts; written without a tokenizer they lose them.
    const m2 = await writeDataset(plain, [{ schema: tracesSchema, rows: rows.traces.map((t) => ({ ...t, text_tokens: 5 })) }]);
    expect(m2.tokenizer).toBeUndefined();
    expect(m2.configs.traces.rows_rejected_invalid).toBe(0);
    expect(await sql(`select name from parquet_schema('${plain}/traces/data/*.parquet') where name like '%_tokens'`)).toEqual([]);
    expect(readManifestJson(plain).configs.traces.tokens).toBeUndefined();

    const usage = await cli(['shard', '--out', tempDir('tokens-cli'), '--tokenizer', 'none', '--max-row-tokens', '100']);
    expect(usage.code).toBe(2);
    expect(usage.stderr).toContain('--max-row-tokens needs a tokenizer');
  });
});
