/** Decontamination of trace-script programs by token 13-gram overlap with a benchmark file. */
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { packageRoot } from '../core/package.js';
import { BenchmarkNgrams, codeTokens } from '../datasets/ngram_overlap.js';
import { cli, tempDir } from './helpers.js';

const SCRIPT = join(packageRoot, 'examples/scripts/max_subarray.py');

/** The same solution as a benchmark would ship it: other comments, other layout. */
const KADANE = [
  'def solve(nums):  # Kadane',
  '    best = cur = nums[0]',
  '    for x in nums[1:]:',
  '        cur = max(x,   cur + x)',
  '        best = max(best, cur)',
  '    return best',
  '',
  'def main():',
  '    n = int(input())',
  '    nums = list(map(int, input().split()))',
  '    assert len(nums) == n',
  '    print(solve(nums))',
  'main()',
].join('\n');

const OTHER = 'def add(a, b):\n    return a + b\n\nprint(sum(add(i, i) for i in range(int(input()))))\n';

function benchmark(records: object[]): string {
  const file = join(tempDir('ngram'), 'bench.jsonl');
  writeFileSync(file, records.map((r) => JSON.stringify(r)).join('\n') + '\n');
  return file;
}

describe('n-gram overlap with a benchmark', () => {
  it('tokenizes code without comments or layout', () => {
    expect(codeTokens('x = f(a,b)  # note\n')).toEqual(['x', '=', 'f', '(', 'a', ',', 'b', ')']);
  });

  it('finds a reformatted copy of a solution and names its record; an unrelated program overlaps nothing', () => {
    const b = new BenchmarkNgrams(
      benchmark([
        { task_id: 'other/1', code: OTHER },
        { task_id: 'kadane/1', prompt: 'Maximum subarray', code: KADANE },
      ]),
    );
    const copy = b.check(readFileSync(SCRIPT, 'utf8'));
    expect(copy).toMatchObject({ overlap: 1, document: 'kadane/1', contaminated: true });
    expect(copy.ngrams).toBeGreaterThan(50);
    expect(b.check('import sys\nfor line in sys.stdin:\n    print(line.strip()[::-1], end="\\n")\n')).toMatchObject({
      overlap: 0,
      document: null,
      contaminated: false,
    });
  });

  it('names the line of a benchmark file that is not JSON', () => {
    const file = join(tempDir('ngram'), 'bad.jsonl');
    writeFileSync(file, '{"code": "x"}\n{oops\n');
    expect(() => new BenchmarkNgrams(file)).toThrow(`${file}:2: not JSON`);
  });

  it('trace-script refuses a contaminated program before running anything', async () => {
    const file = benchmark([{ task_id: 'kadane/1', code: KADANE }]);
    const res = await cli(['trace-script', SCRIPT, '--stdin', join(packageRoot, 'examples/scripts/max_subarray.in1'), '--decontaminate-against', file]);
    expect(res.code).toBe(1);
    expect(res.stdout).toBe('');
    expect(res.stderr).toMatch(
      /max_subarray\.py: 100\.0% of its \d+ 13-grams are in .*bench\.jsonl \(1 documents; most in kadane\/1\): contaminated, not traced/,
    );
  });
});
