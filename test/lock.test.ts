/**
 * core/lock.ts across processes: several processes taking the same lock many times never hold it
 * together, and no lock or claim folder is left. Each holder writes "in" and "out" lines to one
 * log; an "in" after an "in" is two holders at once (a release that removed a waiter's fresh claim
 * with its own folder would let a third process in beside it).
 */
import { spawn } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { packageRoot } from '../core/package.js';
import { tempDir } from './helpers.js';

const HOLDER = `
const { appendFileSync } = require('node:fs');
const { setTimeout: sleep } = require('node:timers/promises');
const [lockPath, log, rounds] = process.argv.slice(1);
import(${JSON.stringify(join(packageRoot, 'dist/core/lock.js'))}).then(async ({ withLock }) => {
  for (let i = 0; i < Number(rounds); i++) {
    await withLock(lockPath, async () => {
      appendFileSync(log, 'in ' + process.pid + '\\n');
      if (Math.random() < 0.5) await sleep(1);
      appendFileSync(log, 'out ' + process.pid + '\\n');
    });
  }
});
`;

describe('withLock across processes', () => {
  it('lets one process in at a time and leaves no lock or claim behind', async () => {
    const dir = tempDir('lock');
    const lockPath = join(dir, 'shared.lock');
    const log = join(dir, 'holders.log');
    const rounds = 300;
    const codes = await Promise.all(
      Array.from(
        { length: 4 },
        () =>
          new Promise<number | null>((resolve) => {
            const child = spawn(process.execPath, ['-e', HOLDER, lockPath, log, String(rounds)], { stdio: ['ignore', 'ignore', 'inherit'] });
            child.on('close', resolve);
          }),
      ),
    );
    expect(codes).toEqual([0, 0, 0, 0]);
    const lines = readFileSync(log, 'utf8').trim().split('\n');
    expect(lines).toHaveLength(4 * rounds * 2);
    for (let i = 0; i < lines.length; i += 2) {
      const [inWord, holder] = lines[i].split(' ');
      expect([inWord, lines[i + 1]]).toEqual(['in', `out ${holder}`]);
    }
    expect(readdirSync(dir).sort()).toEqual(['holders.log']);
  }, 120_000);
});
