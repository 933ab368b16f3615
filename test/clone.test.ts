/** The clone stage's key: unpinned local sources are cloned again when their content changes. */
import { execFileSync } from 'node:child_process';
import { cpSync, existsSync, mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
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
  it("checks out a commit whose repository lacks some files' contents (a partial clone's largest), without them, saying which", async () => {
    const dir = tempDir('clone-missing');
    const repo = join(dir, 'repo');
    cpSync(join(packageRoot, 'examples', 'repos', 'textstats'), repo, { recursive: true });
    mkdirSync(join(repo, 'data'));
    writeFileSync(join(repo, 'data', 'weights v1.bin'), 'not in the mirror\n');
    const gitIn = (...args: string[]) => execFileSync('git', ['-C', repo, '-c', 'user.name=t', '-c', 'user.email=t@localhost', ...args], { encoding: 'utf8' });
    gitIn('init', '-q');
    gitIn('add', '-A');
    gitIn('commit', '-qm', 'with weights');
    const bare = join(dir, 'bare.git');
    execFileSync('git', ['clone', '-q', '--bare', '--no-local', repo, bare]);
    // The blob's object is gone, as a snapshot that left its largest files out has none.
    const blob = gitIn('rev-parse', 'HEAD:data/weights v1.bin').trim();
    // Loose objects, from a pack moved out of the repository (unpack-objects skips what it already has).
    const packs = join(bare, 'objects', 'pack');
    const pack = readFileSync(join(packs, readdirSync(packs).find((f) => f.endsWith('.pack'))!));
    rmSync(packs, { recursive: true });
    execFileSync('git', ['--git-dir', bare, 'unpack-objects', '-q'], { input: pack });
    rmSync(join(bare, 'objects', blob.slice(0, 2), blob.slice(2)));
    const manifest = join(dir, 'manifest.jsonl');
    writeFileSync(manifest, `${JSON.stringify({ repo: bare })}\n`);
    const out = join(dir, 'out');
    const res = await cli(['clone', '--manifest', manifest, '--out', out, '--json']);
    expect(res.code, `${res.stdout}\n${res.stderr}`).toBe(0);
    const ledger = join(out, 'ledger', 'clone');
    const record = JSON.parse(readFileSync(join(ledger, readdirSync(ledger)[0]), 'utf8')).record;
    expect(record.missing_files).toEqual(['data/weights v1.bin']);
    const checkout = join(out, record.checkout);
    expect(existsSync(join(checkout, 'data', 'weights v1.bin'))).toBe(false);
    expect(existsSync(join(checkout, 'textstats'))).toBe(true);
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
