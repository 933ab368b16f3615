/**
 * `npm run bench:dedup`: near-duplicate removal (datasets/near_dedup.ts) over about 1 GB of
 * trace-shaped rows, against the exact dedup it adds to (a sha256 of the text into a set, what the
 * writer's spill does per row). One row in ten is a copy of an earlier row with one word in a
 * hundred changed (an address, a timing): the planted near duplicates, which exact dedup misses.
 *
 *   node dist/bench/dedup.js [--mb 1024] [--threshold 0.8] [--shingle 5]
 *
 * Rows are generated in memory batch by batch (never all held), so the peak RSS is the dedup's
 * band keys plus one batch.
 */
import { createHash } from 'node:crypto';
import { table } from '../core/table.js';
import { NearDedup } from '../datasets/near_dedup.js';

const WORDS = [
  'self',
  'key',
  'value',
  'result',
  'items',
  'seq',
  'func',
  'acc',
  'return',
  'for',
  'in',
  'if',
  'not',
  'None',
  '=',
  '+',
  '<|frame_sep|>',
  '<|line_sep|>',
  '<|call_sep|>',
  '..',
];

function arg(name: string, fallback: string): string {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 && process.argv[i + 1] !== undefined ? process.argv[i + 1] : fallback;
}

/** A deterministic trace-like text of about `bytes` characters for row `i`. */
function rowText(i: number, bytes: number): string {
  let x = (i * 2654435761) | 0;
  const parts: string[] = [];
  let n = 0;
  while (n < bytes) {
    x = (Math.imul(x ^ (x >>> 15), 0x2c1b3c6d) + 0x6d2b79f5) | 0;
    const w = x & 31;
    // Two words in three are vocabulary, the rest values: numbers and reprs unique to the row.
    const word = w < 20 ? WORDS[w] : `"${(x >>> 8).toString(36)}"`;
    parts.push(word);
    n += word.length + 1;
  }
  return parts.join(' ');
}

const perturb = (text: string, tag: number) => {
  let k = 0;
  return text.replace(/\S+/g, (w) => (++k % 100 === 0 ? `0x${tag.toString(16)}${k}` : w));
};

function cpuSince(c: NodeJS.CpuUsage): number {
  const d = process.cpuUsage(c);
  return (d.user + d.system) / 1e6;
}

function main(): void {
  const mb = Number(arg('mb', '1024'));
  const threshold = Number(arg('threshold', '0.8'));
  const shingleSize = Number(arg('shingle', '5'));
  const rowBytes = 4096;
  const rows = Math.ceil((mb * 1e6) / rowBytes);
  const near = new NearDedup({ threshold, shingleSize });
  const exact = new Set<string>();
  let nearS = 0;
  let exactS = 0;
  // CPU time as well as wall time: on a shared, loaded machine the wall clock mostly measures waiting.
  let nearCpu = 0;
  let exactCpu = 0;
  let planted = 0;
  let plantedFound = 0;
  let exactRemoved = 0;
  let bytes = 0;
  let peak = 0;
  const recent: string[] = [];
  for (let i = 0; i < rows; i++) {
    let text: string;
    const isPlanted = i % 10 === 9 && recent.length > 0;
    if (isPlanted) {
      text = perturb(recent[(i * 7) % recent.length], i);
      planted++;
    } else text = rowText(i, rowBytes);
    if (recent.length < 1000) recent.push(text);
    else recent[i % 1000] = text;
    bytes += text.length;
    let t = performance.now();
    let c = process.cpuUsage();
    const key = createHash('sha256').update(text).digest('hex').slice(0, 32);
    if (exact.has(key)) exactRemoved++;
    else exact.add(key);
    exactS += performance.now() - t;
    exactCpu += cpuSince(c);
    t = performance.now();
    c = process.cpuUsage();
    if (near.isDuplicate(text) && isPlanted) plantedFound++;
    nearS += performance.now() - t;
    nearCpu += cpuSince(c);
    if (i % 5000 === 0) peak = Math.max(peak, process.memoryUsage().rss);
  }
  peak = Math.max(peak, process.memoryUsage().rss);
  nearS /= 1000;
  exactS /= 1000;
  const rate = (s: number) => Math.round(rows / s);
  const mbs = (s: number) => (bytes / 1e6 / s).toFixed(1);
  process.stdout.write(
    `${rows} rows, ${(bytes / 1e6).toFixed(0)} MB of text (${rowBytes} B a row), ${planted} planted near duplicates; ` +
      `MinHash ${near.settings.permutations} permutations, ${near.bands} bands x ${near.rows} rows, threshold ${threshold}, ${shingleSize}-word shingles\n\n`,
  );
  process.stdout.write(
    `${table([
      ['dedup', 'wall s', 'cpu s', 'rows/s (cpu)', 'MB/s (cpu)', 'removed', 'planted found', 'cpu vs exact'],
      ['exact (sha256 set)', exactS.toFixed(1), exactCpu.toFixed(1), rate(exactCpu), mbs(exactCpu), exactRemoved, `${exactRemoved}/${planted}`, '1.0x'],
      [
        'near (MinHash-LSH)',
        nearS.toFixed(1),
        nearCpu.toFixed(1),
        rate(nearCpu),
        mbs(nearCpu),
        near.removed,
        `${plantedFound}/${planted}`,
        `${(nearCpu / exactCpu).toFixed(1)}x`,
      ],
    ])}\n\npeak RSS ${(peak / 1e6).toFixed(0)} MB (band keys of ${near.seen - near.removed} kept rows x ${near.bands} bands, plus the exact set)\n`,
  );
}

main();
