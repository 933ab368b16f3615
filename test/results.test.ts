/**
 * Result files come back from a work folder that untrusted code could write as root: a test may
 * swap any of them for a symlink to a host file, a FIFO, or gigabytes. The readers refuse all of
 * that (checked on the real file system), and a real test that swaps its pytest log for a link to
 * a host secret fails its unit with the reason while the secret reaches no output.
 */
import { execFileSync } from 'node:child_process';
import { lstatSync, mkdirSync, readdirSync, readFileSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { LOG_TAIL, ResultRefused, readLogTail, readResult, resultLines } from '../pipeline/sandbox/results.js';
import { cli, tempDir } from './helpers.js';

describe('reading a work folder a container wrote', () => {
  it('reads plain files and refuses links, special files, escapes and oversize files', () => {
    const dir = tempDir('results');
    const work = join(dir, 'work');
    mkdirSync(join(work, 'sub'), { recursive: true });
    const secret = join(dir, 'host-secret');
    writeFileSync(secret, 'OPENAI_API_KEY=sk-host-only\n');
    writeFileSync(join(work, 'exit-1'), '0\n');
    writeFileSync(join(work, 'sub', 'report.jsonl'), '{"ok":1}\n');
    symlinkSync(secret, join(work, 'report-1.jsonl'));
    symlinkSync(dir, join(work, 'linked'));
    execFileSync('mkfifo', [join(work, 'fifo')]);
    writeFileSync(join(work, 'big'), 'x'.repeat(1000));

    expect(readResult(work, 'exit-1')).toBe('0\n');
    expect(readResult(work, 'sub/report.jsonl')).toBe('{"ok":1}\n');
    expect(readResult(work, 'absent')).toBeNull();
    expect(() => readResult(work, 'report-1.jsonl')).toThrow(/report-1\.jsonl is a symlink; refused/);
    expect(() => readResult(work, 'linked/host-secret')).toThrow(/not a plain folder/);
    expect(() => readResult(work, '../host-secret')).toThrow(/leaves its work folder/);
    expect(() => readResult(work, '/etc/passwd')).toThrow(ResultRefused);
    // A FIFO would block a plain read forever; it is refused at once.
    expect(() => readResult(work, 'fifo')).toThrow(/not a regular file/);
    expect(() => readResult(work, 'big', 999)).toThrow(/1000 bytes, over the 999-byte cap/);
    expect(() => readLogTail(work, 'report-1.jsonl')).toThrow(ResultRefused);
  });

  it('streams the lines of a large result, refusing one past the line cap (an unterminated gigabyte ended the process)', async () => {
    const work = tempDir('result-lines');
    const lines = async (rel: string, cap?: number) => {
      const got: string[] = [];
      for await (const l of resultLines(work, rel, cap)) got.push(l);
      return got;
    };
    writeFileSync(join(work, 'traces.jsonl'), '{"a":"é"}\n\n{"b":2}\n{"torn"');
    expect(await lines('traces.jsonl')).toEqual(['{"a":"é"}', '', '{"b":2}', '{"torn"']);
    expect(await lines('absent')).toEqual([]);
    writeFileSync(join(work, 'long'), `short\n${'x'.repeat(100)}\nafter\n`);
    await expect(lines('long', 99)).rejects.toThrow(/result file long has a line longer than 99 bytes; refused/);
    expect(await lines('long', 100)).toEqual(['short', 'x'.repeat(100), 'after']);
    // A sparse gigabyte with no newline: refused after the cap, not read to its end.
    execFileSync('truncate', ['-s', '1G', join(work, 'padded')]);
    const started = Date.now();
    await expect(lines('padded')).rejects.toThrow(ResultRefused);
    expect(Date.now() - started).toBeLessThan(10_000);
    symlinkSync('/etc/passwd', join(work, 'linked.jsonl'));
    await expect(lines('linked.jsonl')).rejects.toThrow(/is a symlink; refused/);
  });

  it('keeps only the tail of a huge log', () => {
    const work = tempDir('log-tail');
    writeFileSync(join(work, 'output-1.log'), `${'a'.repeat(3 * LOG_TAIL)}THE END\n`);
    const text = readLogTail(work, 'output-1.log') as string;
    expect(text.startsWith(`[worldline: the first ${2 * LOG_TAIL + 'THE END\n'.length} bytes of this log are left out]\n`)).toBe(true);
    expect(text.endsWith('THE END\n')).toBe(true);
    expect(text.length).toBeLessThan(LOG_TAIL + 100);
  });

  it('a test that swaps its pytest log for a link to a host secret fails its unit, and the secret is read nowhere', async () => {
    const dir = tempDir('swap-log');
    const secretFile = join(dir, 'host-secret.txt');
    const secret = `SECRET-${Date.now()}-only-on-the-host`;
    writeFileSync(secretFile, `${secret}\n`);
    const repo = join(dir, 'swapper');
    mkdirSync(join(repo, 'tests'), { recursive: true });
    writeFileSync(join(repo, 'swapper.py'), 'def double(x):\n    return 2 * x\n');
    // The log is the shell's redirect target; the test replaces the name with a link the host would follow.
    writeFileSync(
      join(repo, 'tests', 'test_swap.py'),
      [
        'import glob',
        'import os',
        'from swapper import double',
        '',
        'def test_double():',
        '    assert double(2) == 4',
        '',
        'def test_swap_the_log():',
        // The plugin hides its own paths from the tests, but the work folder's place is no secret.
        "    for log in glob.glob('/worldline/out/output-*.log'):",
        '        os.remove(log)',
        "        os.symlink(os.environ['HOST_SECRET_PATH'], log)",
        '',
      ].join('\n'),
    );
    const manifest = join(dir, 'manifest.jsonl');
    writeFileSync(manifest, `${JSON.stringify({ repo, env: { vars: { HOST_SECRET_PATH: secretFile } } })}\n`);
    const out = join(dir, 'out');
    const res = await cli(['run', '--manifest', manifest, '--out', out, '--stages', 'clone,build,validate', '--validate-runs', '1', '--json']);
    expect(res.code, res.stderr).toBe(1);
    const run = JSON.parse(res.stdout) as { units: { status: string; stage: string; reason: string }[] };
    expect(run.units[0]).toMatchObject({ status: 'failed', stage: 'validate' });
    expect(run.units[0].reason).toMatch(/output-1\.log is a symlink; refused/);
    // Nothing Worldline wrote holds the secret (logs, ledger, parts): only the host file itself does.
    const written: string[] = [];
    const walk = (d: string) => {
      for (const name of readdirSync(d)) {
        const p = join(d, name);
        // Links are not followed: a link the test left is not something Worldline read or wrote.
        const st = lstatSync(p, { throwIfNoEntry: false });
        if (st?.isDirectory()) walk(p);
        else if (st?.isFile()) written.push(p);
      }
    };
    walk(out);
    expect(written.length).toBeGreaterThan(0);
    for (const f of written) expect(readFileSync(f, 'utf8').includes(secret), f).toBe(false);
    expect(res.stdout + res.stderr).not.toContain(secret);
  }, 300_000);
});
