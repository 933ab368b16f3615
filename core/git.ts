/** git as a subprocess: never prompts, always bounded in time, errors carry git's own words. */
import { execFile as execFileCb, spawn } from 'node:child_process';
import { promisify } from 'node:util';

const execFile = promisify(execFileCb);

/** Fixed identity and dates for commits we make, so their SHAs are reproducible. */
export const FIXED_COMMIT_ENV = {
  GIT_AUTHOR_NAME: 'Worldline',
  GIT_AUTHOR_EMAIL: 'worldline@localhost',
  GIT_AUTHOR_DATE: '2000-01-01T00:00:00Z',
  GIT_COMMITTER_NAME: 'Worldline',
  GIT_COMMITTER_EMAIL: 'worldline@localhost',
  GIT_COMMITTER_DATE: '2000-01-01T00:00:00Z',
};

export class GitError extends Error {}

export async function git(args: string[], opts: { cwd?: string; env?: Record<string, string>; timeoutMs?: number } = {}): Promise<string> {
  try {
    const { stdout } = await execFile('git', ['-c', 'commit.gpgsign=false', '-c', 'core.hooksPath=/dev/null', ...args], {
      cwd: opts.cwd,
      env: { ...process.env, GIT_TERMINAL_PROMPT: '0', GIT_ASKPASS: 'true', GIT_SSH_COMMAND: 'ssh -oBatchMode=yes', ...opts.env },
      timeout: opts.timeoutMs ?? 600_000,
      maxBuffer: 256 << 20,
    });
    return stdout;
  } catch (e) {
    const err = e as { stderr?: string; killed?: boolean; message: string };
    if (err.killed) throw new GitError(`git ${args[0]} timed out after ${Math.round((opts.timeoutMs ?? 600_000) / 1000)} s`);
    const words = (err.stderr ?? '').trim().split('\n').filter(Boolean).slice(0, 3).join(' | ');
    throw new GitError(`git ${args[0]} failed: ${words || err.message}`);
  }
}

/** Extracts a commit's tree (no .git) into `dest` via `git archive | tar -x`, but for the paths in `leaveOut`. */
export function archiveTo(gitDir: string, commit: string, dest: string, leaveOut: string[] = []): Promise<void> {
  const pathspec = leaveOut.length ? ['--', '.', ...leaveOut.map((p) => `:(exclude,literal)${p}`)] : [];
  return new Promise((resolve, reject) => {
    const archive = spawn('git', ['--git-dir', gitDir, 'archive', '--format=tar', commit, ...pathspec], { stdio: ['ignore', 'pipe', 'pipe'] });
    const tar = spawn('tar', ['-x', '-C', dest], { stdio: ['pipe', 'ignore', 'pipe'] });
    archive.stdout.pipe(tar.stdin);
    let stderr = '';
    archive.stderr.on('data', (d) => (stderr += d));
    tar.stderr.on('data', (d) => (stderr += d));
    let pending = 2;
    let failure: string | null = null;
    const done = (name: string) => (code: number | null) => {
      if (code !== 0) failure ??= `${name} exited ${code}: ${stderr.trim()}`;
      if (--pending === 0) failure ? reject(new GitError(failure)) : resolve();
    };
    archive.on('close', done('git archive'));
    tar.on('close', done('tar'));
  });
}

/**
 * The commit's files whose contents the repository does not hold: a partial clone's
 * (`--filter=blob:limit=...`) or a mirror's that left its largest files out. git archive stops at
 * the first of them; the rest of the tree is still the commit's.
 */
export async function missingFiles(gitDir: string, commit: string): Promise<string[]> {
  const listed = await git(['--git-dir', gitDir, 'rev-list', '--objects', '--no-walk', '--missing=print', commit]);
  const missing = new Set(listed.split('\n').flatMap((l) => (l.startsWith('?') ? [l.slice(1).trim()] : [])));
  if (!missing.size) return [];
  const tree = await git(['--git-dir', gitDir, 'ls-tree', '-r', '-z', '--full-tree', commit]);
  return tree.split('\0').flatMap((entry) => {
    const [meta, path] = entry.split('\t');
    const [, type, sha] = (meta ?? '').split(' ');
    return type === 'blob' && missing.has(sha) ? [path] : [];
  });
}
