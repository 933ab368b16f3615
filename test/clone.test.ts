/** The clone stage's key: unpinned local sources are cloned again when their content changes. */
import { execFileSync } from 'node:child_process';
import { cpSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { packageRoot } from '../core/package.js';
import { cli, tempDir } from './helpers.js';

interface CloneRun {
  units: { ran: string[] }[];
}

describe('clone', () => {
  it('clones a local folder, repository or bare repository again after it changed, and only then', async () => {
    const dir = tempDir('clone-key');
    const folder = join(dir, 'textstats');
    cpSync(join(packageRoot, 'examples', 'repos', 'textstats'), folder, { recursive: true });
    const repo = join(dir, 'repo');
    cpSync(folder, repo, { recursive: true });
    const gitIn = (...args: string[]) => execFileSync('git', ['-C', repo, '-c', 'user.name=t', '-c', 'user.email=t@localhost', ...args]);
    gitIn('init', '-q');
    gitIn('add', '-A');
    gitIn('commit', '-qm', 'first');
    // A bare repository (a mirror, `git clone --bare`): git's files at its top, no work tree.
    const bare = join(dir, 'bare.git');
    execFileSync('git', ['clone', '-q', '--bare', repo, bare]);
    const manifest = join(dir, 'manifest.jsonl');
    writeFileSync(manifest, [folder, repo, bare].map((r) => JSON.stringify({ repo: r })).join('\n') + '\n');
    const out = join(dir, 'out');
    const clone = async () => {
      const res = await cli(['clone', '--manifest', manifest, '--out', out, '--json']);
      expect(res.code, res.stderr).toBe(0);
      return (JSON.parse(res.stdout) as CloneRun).units.map((u) => u.ran.includes('clone'));
    };
    expect(await clone()).toEqual([true, true, true]);
    expect(await clone()).toEqual([false, false, false]);
    writeFileSync(join(folder, 'NOTES.txt'), 'edited between runs\n');
    expect(await clone()).toEqual([true, false, false]);
    writeFileSync(join(repo, 'NOTES.txt'), 'committed between runs\n');
    gitIn('add', '-A');
    gitIn('commit', '-qm', 'second');
    expect(await clone()).toEqual([false, true, false]);
    gitIn('push', '-q', bare, 'HEAD');
    expect(await clone()).toEqual([false, false, true]);
    expect(await clone()).toEqual([false, false, false]);
    // Pinned to a commit: read as the repository it is, not as a plain folder of git's files.
    const first = execFileSync('git', ['--git-dir', bare, 'rev-parse', 'HEAD~1'], { encoding: 'utf8' }).trim();
    const pinned = join(dir, 'pinned.jsonl');
    writeFileSync(pinned, `${JSON.stringify({ repo: bare, commit: first })}\n`);
    const res = await cli(['clone', '--manifest', pinned, '--out', join(dir, 'out-pinned'), '--json']);
    expect(res.code, res.stdout).toBe(0);
  }, 120_000);
  it('refuses a folder whose .git is a file pointing at another repository on the host', async () => {
    const dir = tempDir('git-file');
    const elsewhere = join(dir, 'private');
    cpSync(join(packageRoot, 'examples', 'repos', 'calc'), elsewhere, { recursive: true });
    execFileSync('git', ['-C', elsewhere, 'init', '-q']);
    execFileSync('git', ['-C', elsewhere, '-c', 'user.name=t', '-c', 'user.email=t@localhost', 'commit', '-q', '--allow-empty', '-m', 'private history']);
    const folder = join(dir, 'innocent');
    cpSync(join(packageRoot, 'examples', 'repos', 'textstats'), folder, { recursive: true });
    writeFileSync(join(folder, '.git'), `gitdir: ${join(elsewhere, '.git')}\n`);
    const manifest = join(dir, 'manifest.jsonl');
    writeFileSync(manifest, `${JSON.stringify({ repo: folder })}\n`);
    const res = await cli(['clone', '--manifest', manifest, '--out', join(dir, 'out'), '--json']);
    expect(res.code).toBe(1);
    const unit = (JSON.parse(res.stdout) as { units: { status: string; reason: string }[] }).units[0];
    expect(unit.status).toBe('failed');
    expect(unit.reason).toMatch(/innocent\/\.git is not a folder \(a pointer to a repository elsewhere\); refused/);
  });
});
