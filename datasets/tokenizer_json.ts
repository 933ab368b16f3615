/**
 * A user's own tokenizer, from a Hugging Face `tokenizer.json`: byte-level BPE (GPT-2, Llama 3,
 * Qwen, DeepSeek and most code models), counted by gpt-tokenizer's BPE core. A merge's rank is
 * its place in `merges` (after the 256 single bytes), which is how tiktoken and Hugging Face's
 * byte-level BPE agree; the split pattern comes from the pre-tokenizer. Anything else (WordPiece,
 * Unigram, a normalizer other than NFC) is refused with the file and the field named.
 */
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { basename } from 'node:path';
import { BytePairEncodingCore } from 'gpt-tokenizer/BytePairEncodingCore';

/** GPT-2's pattern, which a ByteLevel pre-tokenizer with use_regex applies. */
const GPT2_SPLIT = String.raw`'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+`;

interface PreTokenizer {
  type: string;
  pretokenizers?: PreTokenizer[];
  pattern?: { Regex?: string; String?: string };
  use_regex?: boolean;
}

interface TokenizerJson {
  normalizer?: { type: string } | null;
  pre_tokenizer?: PreTokenizer | null;
  model?: { type?: string; merges?: (string | [string, string])[] };
}

/** GPT-2's byte <-> printable character table, inverted: which byte each vocabulary character stands for. */
function unicodeToByte(): Map<string, number> {
  const printable = (b: number) => (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255);
  const out = new Map<string, number>();
  let extra = 0;
  for (let b = 0; b < 256; b++) out.set(String.fromCharCode(printable(b) ? b : 256 + extra++), b);
  return out;
}

/** JavaScript's RegExp lacks `(?i:...)` before Node 23: spell a case-insensitive group out. */
function jsPattern(pattern: string): string {
  return pattern.replace(
    /\(\?i:((?:[^()\\]|\\.)*)\)/g,
    (_, body: string) => `(?:${body.replace(/[a-zA-Z]/g, (c) => `[${c.toLowerCase()}${c.toUpperCase()}]`)})`,
  );
}

/** A TokenCounter (tokens.ts, which loads this file: the type is spelled out to avoid a cycle). */
export function tokenizerFromJson(file: string): { name: string; source: string; count(text: string): number } {
  const fail = (why: string): never => {
    throw new Error(`${file}: ${why}`);
  };
  let json: TokenizerJson;
  let raw: Buffer;
  try {
    raw = readFileSync(file);
    json = JSON.parse(raw.toString('utf8')) as TokenizerJson;
  } catch (e) {
    return fail(`cannot read a tokenizer.json (${(e as Error).message})`);
  }
  if (json.model?.type !== 'BPE') fail(`model.type is ${JSON.stringify(json.model?.type)}; only byte-level BPE tokenizers are supported`);
  const normalizer = json.normalizer?.type ?? null;
  if (normalizer !== null && normalizer !== 'NFC') fail(`normalizer.type ${normalizer} is not supported (only none or NFC)`);
  const steps = json.pre_tokenizer?.type === 'Sequence' ? (json.pre_tokenizer.pretokenizers ?? []) : json.pre_tokenizer ? [json.pre_tokenizer] : [];
  if (!steps.some((p) => p.type === 'ByteLevel')) fail('pre_tokenizer has no ByteLevel step; only byte-level BPE tokenizers are supported');
  const splits = steps.filter((p) => p.type === 'Split').map((p) => p.pattern?.Regex ?? fail('pre_tokenizer Split without a Regex pattern is not supported'));
  const byteLevelRegex = steps.some((p) => p.type === 'ByteLevel' && p.use_regex !== false);
  const pattern = splits[0] ?? (byteLevelRegex ? GPT2_SPLIT : fail('pre_tokenizer has neither a Split pattern nor a ByteLevel regex'));
  let tokenSplitRegex: RegExp;
  try {
    tokenSplitRegex = new RegExp(jsPattern(pattern), 'gu');
  } catch (e) {
    return fail(`pre_tokenizer pattern is not a regular expression JavaScript accepts (${(e as Error).message})`);
  }
  const toByte = unicodeToByte();
  const bytesOf = (token: string) =>
    Array.from(token, (ch) => toByte.get(ch) ?? fail(`merges: ${JSON.stringify(token)} holds ${JSON.stringify(ch)}, not a byte-level character`));
  const decoder = new TextDecoder('utf-8', { fatal: true });
  // The rank table: every single byte, then each merge's result in merge order (first one wins).
  const ranks: (string | number[])[] = [];
  const seen = new Set<string>();
  const add = (bytes: number[]) => {
    const key = bytes.join(',');
    if (seen.has(key)) return;
    seen.add(key);
    let text: string | null = null;
    try {
      text = decoder.decode(Uint8Array.from(bytes));
    } catch {
      text = null;
    }
    ranks.push(text !== null && Buffer.from(text).equals(Buffer.from(bytes)) ? text : bytes);
  };
  for (let b = 0; b < 256; b++) add([b]);
  for (const [i, m] of (json.model?.merges ?? fail('model.merges is missing')).entries()) {
    const [left, right] = typeof m === 'string' ? m.split(' ') : m;
    if (left === undefined || right === undefined) fail(`model.merges[${i}] is not a pair`);
    add([...bytesOf(left), ...bytesOf(right)]);
  }
  const core = new BytePairEncodingCore({ bytePairRankDecoder: ranks, tokenSplitRegex });
  const none = new Set<string>();
  return {
    name: file,
    source: `${basename(file)} sha256:${createHash('sha256').update(raw).digest('hex').slice(0, 16)}, ${ranks.length} ranks`,
    count: (text) => core.countNative(normalizer === 'NFC' ? text.normalize('NFC') : text, none),
  };
}
