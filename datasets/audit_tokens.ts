/**
 * The audit's token section: tokens per config, per repository and per kind (task kind, or a
 * trace's suite/before/after), and how much of a config's tokens its largest repository holds.
 * Summed inside DuckDB from the `<column>_tokens` columns the writer stored; a dataset written
 * without a tokenizer has none, and the section says so.
 */
import { SCHEMAS } from '../schemas/index.js';
import { tokenColumn } from '../schemas/schema.js';
import type { DatasetManifest } from './dataset_writer.js';

export interface TokenAudit {
  /** e.g. "o200k_base (gpt-tokenizer@4.0.0)"; null when the dataset has no token counts. */
  tokenizer: string | null;
  max_row_tokens: number | null;
  configs: {
    config: string;
    tokens: number;
    /** Rows the writer rejected for holding more than max_row_tokens. */
    rows_rejected: number;
    by_column: Record<string, number>;
    /** The largest repositories by tokens (top k), with their share of the config's tokens. */
    by_repo: { repo: string; tokens: number; share: number }[];
    top_repo_share: number | null;
    by_kind: { kind: string; tokens: number }[];
  }[];
}

/** What a row's "kind" is per config, for the by-kind split. */
const KIND: Record<string, string> = { tasks: 'kind', trajectories: 'kind', traces: `coalesce(phase, 'suite')` };

export async function tokenAudit(rows: <T>(sql: string) => Promise<T[]>, manifest: DatasetManifest, topK: number): Promise<TokenAudit> {
  const t = manifest.tokenizer;
  if (!t) return { tokenizer: null, max_row_tokens: null, configs: [] };
  const configs: TokenAudit['configs'] = [];
  for (const [name, schema] of Object.entries(SCHEMAS)) {
    const info = manifest.configs[name];
    if (!schema.text?.length || !info?.tokens) continue;
    const sum = schema.text.map((c) => `coalesce("${tokenColumn(c)}", 0)`).join(' + ');
    const [total] = await rows<{ tokens: number }>(`select coalesce(sum(${sum}), 0)::bigint as tokens from ${name}`);
    const byRepo = (
      await rows<{ repo: string; tokens: number }>(
        `select repo, coalesce(sum(${sum}), 0)::bigint as tokens from ${name} group by repo order by tokens desc, repo limit ${topK}`,
      )
    ).map((r) => ({ ...r, share: total.tokens ? r.tokens / total.tokens : 0 }));
    configs.push({
      config: name,
      tokens: total.tokens,
      rows_rejected: info.rows_rejected_tokens ?? 0,
      by_column: Object.fromEntries(
        (
          await rows<{ column: string; n: number }>(
            schema.text.map((c) => `select '${c}' as column, coalesce(sum("${tokenColumn(c)}"), 0)::bigint as n from ${name}`).join(' union all '),
          )
        ).map((r) => [r.column, r.n]),
      ),
      by_repo: byRepo,
      top_repo_share: total.tokens && byRepo.length ? byRepo[0].share : null,
      by_kind: KIND[name]
        ? await rows(`select ${KIND[name]} as kind, coalesce(sum(${sum}), 0)::bigint as tokens from ${name} group by all order by tokens desc, kind`)
        : [],
    });
  }
  return { tokenizer: `${t.name} (${t.source})`, max_row_tokens: t.max_row_tokens, configs };
}
