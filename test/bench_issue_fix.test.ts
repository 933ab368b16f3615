/**
 * `npm run bench:issue-fix` over ledgers written by the real Ledger: recall (all fixes, and the
 * fixes a test can verify), kept tasks that are not fixes, oracle-resolved and seconds per
 * candidate, from candidate fates against hand labels; a unit mined twice counts once (its wider
 * window), and a candidate without a label is listed.
 */
import { execFileSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { packageRoot } from '../core/package.js';
import { Ledger, type StageName } from '../pipeline/runtime/ledger.js';
import type { CandidateFate } from '../pipeline/runtime/records.js';
import { tempDir } from './helpers.js';

const UNIT = 'lib-0123abcd';
const COMMIT = 'c0ffee0000000000000000000000000000000000';

function writeRun(out: string, fates: CandidateFate[]): void {
  const ledger = new Ledger(out);
  const put = (stage: StageName, record: unknown) =>
    ledger.put({
      stage,
      unit_id: UNIT,
      unit: { repo: 'lib', url: '/src/lib', ref: COMMIT, python: '3.11' },
      key: stage,
      status: 'ok',
      reason: null,
      record,
      seconds: 1,
      finished_at: '2026-12-01T00:00:00Z',
    });
  put('clone', { commit: COMMIT });
  put('forage', { candidates: fates });
}

const fate = (fix_commit: string, f: CandidateFate['fate'], reason: string | null, seconds: number): CandidateFate => ({
  fix_commit: `${fix_commit}${'0'.repeat(33)}`,
  shape: f === 'skipped' ? null : 'together',
  fate: f,
  reason,
  seconds,
  fix_confidence: f === 'kept' ? 0.8 : null,
});

describe('bench:issue-fix', () => {
  it('scores candidate fates against hand labels', () => {
    const dir = tempDir('bench-issue-fix');
    const narrow = [fate('aaaaaaa', 'kept', null, 10)];
    const wide = [
      fate('aaaaaaa', 'kept', null, 10),
      fate('bbbbbbb', 'kept', null, 20),
      fate('ccccccc', 'dropped', 'no test fails before the fix and passes after it', 30),
      fate('ddddddd', 'dropped', 'not shown to be a fix: confidence 0.6 below 0.7', 40),
      fate('eeeeeee', 'dropped', 'the oracle did not resolve it (max_turns after 9 of 9 turns)', 50),
      fate('fffffff', 'skipped', 'a release or version bump ("Release 1.0")', 0),
      fate('9999999', 'dropped', 'no test fails before the fix and passes after it', 50),
    ];
    writeRun(join(dir, 'narrow'), narrow);
    writeRun(join(dir, 'wide'), wide);
    const labels = join(dir, 'labels.json');
    writeFileSync(
      labels,
      JSON.stringify([
        {
          repo: 'lib',
          url: 'https://example.org/lib',
          unit_commit: COMMIT.slice(0, 12),
          labels: [
            { commit: 'aaaaaaa', label: 'fix', why: 'a wrong value' },
            { commit: 'bbbbbbb', label: 'not_fix', why: 'a feature titled fix' },
            { commit: 'ccccccc', label: 'fix', verifiable: false, why: 'no test fails before it' },
            { commit: 'ddddddd', label: 'fix', verifiable_on: ['3.9'], why: 'a guard with no fix word' },
            { commit: 'eeeeeee', label: 'not_fix', why: 'a refactor' },
          ],
        },
      ]),
    );
    const stdout = execFileSync(process.execPath, [join(packageRoot, 'dist/bench/issue_fix.js'), join(dir, 'narrow'), join(dir, 'wide'), '--labels', labels], {
      encoding: 'utf8',
    });
    const rows = stdout.split('\n').map((l) => l.split(/\s{2,}/));
    const lib = rows.find((r) => r[0] === 'lib (c0ffee0, py3.11)');
    // The wider run counts, once: 6 tried (the skipped release apart), 3 labelled fixes of which 1 kept;
    // ddddddd's test can show it only on 3.9, so on this 3.11 unit aaaaaaa is the one verifiable fix.
    expect(lib).toEqual(['lib (c0ffee0, py3.11)', '6', '1', '3', '2', '1/3 (33%)', '1/1 (100%)', '1/2 (50%)', '2/3 (67%)', '33.3']);
    expect(rows.find((r) => r[0] === 'all')?.slice(1)).toEqual(lib?.slice(1));
    expect(stdout).toContain('missed fix lib ddddddd: not shown to be a fix');
    expect(stdout).toContain('kept not fix lib bbbbbbb: a feature titled fix');
    expect(stdout).toMatch(/unlabelled candidates[^\n]*\nlib 9999999 \(dropped\)/);
  });
});
