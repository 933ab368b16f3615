import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { inject } from 'vitest';
import { packageRoot } from '../core/package.js';

export { query as sql } from '../datasets/duckdb.js';

export interface CliResult {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** The built CLI as a separate process (a queue worker), its output collected as it comes. */
export function cliProcess(args: string[], env: Record<string, string> = {}): { child: ChildProcess; done: Promise<CliResult>; output: () => CliResult } {
  const child = spawn(process.execPath, [join(packageRoot, 'dist/bin/worldline.js'), ...args], {
    env: { ...process.env, WORLDLINE_MIRRORS: join(inject('workRoot'), 'mirrors'), WORLDLINE_RESOLUTIONS: join(inject('workRoot'), 'resolutions'), ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  child.stdout?.on('data', (d) => (stdout += d));
  child.stderr?.on('data', (d) => (stderr += d));
  const done = new Promise<CliResult>((resolve) => child.on('close', (code) => resolve({ code, stdout, stderr })));
  return { child, done, output: () => ({ code: child.exitCode, stdout, stderr }) };
}

/** Runs the built CLI as a user would (npm test builds it first). */
export function cli(args: string[], env: Record<string, string> = {}): Promise<CliResult> {
  return cliProcess(args, env).done;
}

export function tempDir(prefix: string): string {
  return mkdtempSync(join(inject('workRoot'), `${prefix}-`));
}

/** A git repository at `path` holding `files` in one commit on main (hand-written examples); its path. */
/** Writes `files` (relative path -> text) under `path`; returns `path`. */
export function writeTree(path: string, files: Record<string, string>): string {
  for (const [file, text] of Object.entries(files)) {
    mkdirSync(dirname(join(path, file)), { recursive: true });
    writeFileSync(join(path, file), text);
  }
  return path;
}

export function gitRepo(path: string, files: Record<string, string>, message = 'example'): string {
  writeTree(path, files);
  execFileSync('git', ['init', '-q', '-b', 'main', path]);
  execFileSync('git', ['-C', path, 'add', '.']);
  execFileSync('git', ['-C', path, '-c', 'user.name=t', '-c', 'user.email=t@t', 'commit', '-qm', message]);
  return path;
}
