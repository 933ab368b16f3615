/**
 * A user-supplied Hugging Face tokenizer.json: GPT-2's r50k_base and cl100k_base (whose split
 * pattern has a case-insensitive group JavaScript cannot parse as written) converted to
 * tokenizer.json files as transformers converts tiktoken files, then counted over the corpus's
 * Python files: every count equals the encoding's own. Unsupported files are refused by name.
 */
import { readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import cl100k from 'gpt-tokenizer/bpeRanks/cl100k_base';
import r50k from 'gpt-tokenizer/bpeRanks/r50k_base';
import { countTokens as cl100kCount } from 'gpt-tokenizer/encoding/cl100k_base';
import { countTokens as r50kCount } from 'gpt-tokenizer/encoding/r50k_base';
import { beforeAll, describe, expect, inject, it } from 'vitest';
import { writeDataset } from '../datasets/dataset_writer.js';
import { tokenizerFromJson } from '../datasets/tokenizer_json.js';
import { loadTokenizer } from '../datasets/tokens.js';
import { tracesSchema } from '../schemas/index.js';
import { knownRows } from './fixtures/known_dataset.js';
import { writeTokenizerJson } from './fixtures/tiktoken_to_hf.js';
import { sql, tempDir } from './helpers.js';

const R50K_SPLIT = String.raw`'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+`;
const CL100K_SPLIT = String.raw`(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`;
const PLAIN = { disallowedSpecial: new Set<string>() };

function corpusTexts(): string[] {
  const out: string[] = [];
  const walk = (dir: string) => {
    for (const name of readdirSync(dir).sort()) {
      const p = join(dir, name);
      if (name === '.git') continue;
      if (statSync(p).isDirectory()) walk(p);
      else if (name.endsWith('.py')) out.push(readFileSync(p, 'utf8'));
    }
  };
  walk(inject('corpusRoot'));
  return out;
}

describe('tokenizer.json', () => {
  let dir: string;
  let texts: string[];

  beforeAll(() => {
    dir = tempDir('tokenizer-json');
    writeTokenizerJson(join(dir, 'r50k.json'), r50k, R50K_SPLIT);
    writeTokenizerJson(join(dir, 'cl100k.json'), cl100k, CL100K_SPLIT);
    texts = [...corpusTexts(), 'naïve café, 日本語, 🙂 and <|endoftext|> as text', "IT'S 'LL 'Re"];
    expect(texts.length).toBeGreaterThan(50);
  }, 300_000);

  it('counts exactly as the encodings it was converted from, over the corpus', () => {
    for (const [file, count] of [
      ['r50k.json', (t: string) => r50kCount(t, PLAIN)],
      ['cl100k.json', (t: string) => cl100kCount(t, PLAIN)],
    ] as const) {
      const tok = tokenizerFromJson(join(dir, file));
      expect(tok.source).toMatch(new RegExp(`^${file.replace('.', '\\.')} sha256:[0-9a-f]{16}, \\d+ ranks$`));
      const mismatched = texts.filter((t) => tok.count(t) !== count(t));
      expect(mismatched.length, file).toBe(0);
      expect(texts.reduce((s, t) => s + tok.count(t), 0)).toBeGreaterThan(100_000);
    }
  });

  it('writes a dataset counted with it, named in the manifest', async () => {
    const file = join(dir, 'r50k.json');
    const out = join(dir, 'dataset');
    const rows = knownRows().traces;
    const m = await writeDataset(out, [{ schema: tracesSchema, rows }], { tokenizer: file });
    expect(m.tokenizer).toMatchObject({ name: file, source: expect.stringMatching(/^r50k\.json sha256:/) });
    const [sum] = await sql<{ n: bigint }>(`select sum(text_tokens) as n from '${out}/traces/data/*.parquet'`);
    expect(Number(sum.n)).toBe(rows.reduce((s, r) => s + r50kCount(r.text, PLAIN), 0));
    expect((await loadTokenizer(file)).count('hello world')).toBe(2);
  });

  it('refuses what it cannot count, naming the file and the field', () => {
    const write = (name: string, json: unknown) => {
      const f = join(dir, name);
      writeFileSync(f, typeof json === 'string' ? json : JSON.stringify(json));
      return f;
    };
    const wp = write('wordpiece.json', { model: { type: 'WordPiece' }, pre_tokenizer: { type: 'BertPreTokenizer' } });
    expect(() => tokenizerFromJson(wp)).toThrow(`${wp}: model.type is "WordPiece"; only byte-level BPE tokenizers are supported`);
    const meta = write('metaspace.json', { model: { type: 'BPE', merges: [] }, pre_tokenizer: { type: 'Metaspace' } });
    expect(() => tokenizerFromJson(meta)).toThrow(`${meta}: pre_tokenizer has no ByteLevel step`);
    const norm = write('lower.json', { normalizer: { type: 'Lowercase' }, model: { type: 'BPE', merges: [] }, pre_tokenizer: { type: 'ByteLevel' } });
    expect(() => tokenizerFromJson(norm)).toThrow(`${norm}: normalizer.type Lowercase is not supported`);
    const broken = write('broken.json', '{"model": ');
    expect(() => tokenizerFromJson(broken)).toThrow(new RegExp(`^${broken}: cannot read a tokenizer.json`));
  });
});
