/**
 * Progress of `run`: under a pseudo-terminal (`script`) the bars render; through a pipe every
 * stderr line is a JSON event and the last one carries the totals. Clone only, on hand-written
 * repositories (no Docker needed: what is tested is the display, not the stages). Then, on real
 * Docker, the count inside a long stage: tests traced of all, as bars and as JSON lines.
 */
import { execFileSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { packageRoot } from '../core/package.js';
import { shQuote } from '../core/shell.js';
import { cli, gitRepo, tempDir } from './helpers.js';

/** What a terminal showed while `worldline ARGS` ran: `script` gives the command a pseudo-terminal. */
function onTerminal(args: string[]): string {
  const cmd = [process.execPath, join(packageRoot, 'dist/bin/worldline.js'), ...args];
  try {
    return execFileSync('script', ['-qec', cmd.map(shQuote).join(' '), '/dev/null'], { encoding: 'utf8', env: { ...process.env, COLUMNS: '160' } });
  } catch (e) {
    return (e as { stdout: string }).stdout;
  }
}

describe('run progress', () => {
  let manifest: string;
  let dir: string;

  beforeAll(() => {
    dir = tempDir('progress');
    const lines = ['alpha', 'beta', 'gamma'].map((name) => JSON.stringify({ repo: gitRepo(join(dir, name), { [`${name}.py`]: 'def f():\n    return 1\n' }) }));
    // A unit whose commit does not exist: a failure the totals count.
    lines.push(JSON.stringify({ repo: join(dir, 'alpha'), commit: '2'.repeat(40) }));
    manifest = join(dir, 'manifest.jsonl');
    writeFileSync(manifest, lines.join('\n') + '\n');
  });

  it('off a terminal: one JSON line per event, ending with the totals', async () => {
    const res = await cli(['run', '--manifest', manifest, '--out', join(dir, 'json'), '--stages', 'clone']);
    expect(res.code).toBe(1);
    const events = res.stderr
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as { event: string; stage?: string; status?: string });
    expect(events[0]).toMatchObject({ event: 'start', units: 4, stages: ['clone'] });
    expect(events.filter((e) => e.event === 'stage')).toHaveLength(4);
    expect(
      events
        .filter((e) => e.event === 'unit')
        .map((e) => e.status)
        .sort(),
    ).toEqual(['failed', 'ok', 'ok', 'ok']);
    expect(events.at(-1)).toMatchObject({ event: 'totals', units: 4, ok: 3, failed: 1, retried: 0, dead: 0 });
    // The report on stdout is unchanged.
    expect(res.stdout).toContain('3 of 4 units ok');
  });

  it('on a terminal: live bars per stage and a line per slot', () => {
    const shown = onTerminal(['run', '--manifest', manifest, '--out', join(dir, 'tty'), '--stages', 'clone']);
    expect(shown).toMatch(/clone {4}[█░]+ 4\/4 units \| ETA/);
    expect(shown).toMatch(/slot 0: \S+ clone/);
    expect(shown).not.toContain('"event"');
    expect(shown).toContain('3 of 4 units ok');
  });
});

describe('progress inside a long stage', () => {
  let manifest: string;
  let dir: string;

  beforeAll(() => {
    dir = tempDir('progress-steps');
    // Each test takes a while, so the live count has ticks to show between the first and the last.
    const tests = [1, 2, 3].map((i) => `def test_${i}():\n    time.sleep(1.5)\n    assert steps.f(${i}) == ${i}\n`).join('\n');
    const repo = gitRepo(join(dir, 'steps'), { 'steps.py': 'def f(x):\n    return x\n', 'test_steps.py': `import time\nimport steps\n\n${tests}` });
    manifest = join(dir, 'manifest.jsonl');
    writeFileSync(manifest, JSON.stringify({ repo }) + '\n');
  });

  it('off a terminal: JSON lines say how many of the tests the trace stage has traced', async () => {
    const res = await cli(['run', '--manifest', manifest, '--out', join(dir, 'json'), '--stages', 'clone,build,validate,trace']);
    if (res.code !== 0) console.error(res.stderr);
    expect(res.code).toBe(0);
    const steps = res.stderr
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as { event: string; stage?: string; done?: number; total?: number; of?: string })
      .filter((e) => e.event === 'steps');
    expect(steps.length).toBeGreaterThan(0);
    expect(steps.every((e) => e.stage === 'trace' && e.total === 3 && e.of === 'tests')).toBe(true);
    expect(steps.at(-1)).toMatchObject({ done: 3, total: 3 });
  }, 900_000);

  it('on a terminal: the slot line shows n of N tests', () => {
    const shown = onTerminal(['run', '--manifest', manifest, '--out', join(dir, 'tty'), '--stages', 'clone,build,validate,trace']);
    expect(shown).toMatch(/slot 0: \S+ trace \d of 3 tests/);
    expect(shown).toContain('1 of 1 units ok');
  }, 900_000);
});
