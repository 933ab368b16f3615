import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { packageRoot } from '../core/package.js';
import { parseEpisode, renderEpisode } from '../datasets/cwm_format.js';
import { cli } from './helpers.js';

const dir = join(packageRoot, 'examples', 'scripts');

interface Result {
  input: string;
  stdout: string;
  status: string;
  python: string;
  episodes: { function: string; text: string }[];
}

describe('worldline trace-script', () => {
  it('traces a small solution on two inputs in a sandbox, on 3.11 and 3.13', async () => {
    for (const python of ['3.11', '3.13']) {
      const res = await cli([
        'trace-script',
        join(dir, 'max_subarray.py'),
        '--stdin',
        join(dir, 'max_subarray.in1'),
        '--stdin',
        join(dir, 'max_subarray.in2'),
        '--python',
        python,
      ]);
      expect(res.code, res.stderr).toBe(0);
      const results = res.stdout
        .trim()
        .split('\n')
        .map((l) => JSON.parse(l) as Result);
      expect(results.map((r) => [r.stdout, r.status])).toEqual([
        ['4\n', 'ok'],
        ['6\n', 'ok'],
      ]);
      expect(results[0].python.startsWith(python)).toBe(true);
      for (const [r, answer] of [
        [results[0], '4'],
        [results[1], '6'],
      ] as const) {
        expect(r.episodes.map((e) => e.function)).toEqual(['main', 'solve']);
        const solve = parseEpisode(r.episodes[1].text);
        expect(solve.context.split('\n')[0]).toBe('def solve(nums):  # << START_OF_TRACE');
        const last = solve.frames.at(-1)!;
        expect(last).toEqual({ kind: 'return', source: '    return best\n', value: answer });
        expect(solve.frames.filter((f) => f.source === '        cur = max(x, cur + x)\n').length).toBe(r === results[0] ? 4 : 2);
        expect(renderEpisode(solve.context, solve.frames)).toBe(r.episodes[1].text);
      }
    }
  }, 300_000);
});
