/**
 * Engine-wide resources on a fresh engine, as a new user's first run meets them: the build network
 * is made once however many builds start together (the engine's own duplicate check is a list and
 * a create, not atomic: four builds at once made four networks, and every later build failed with
 * `network worldline-build is ambiguous`); copies found at the start are repaired; a run stopped
 * in the middle of a build leaves nothing that fails the next one. Each case starts with no
 * Worldline network, as a fresh machine does, and its repositories carry a fresh nonce so every
 * run really builds. The units are bare lines whose requirements Debian meets, so their builds
 * install packages through the build network, the path a user's first run takes.
 */
import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { describe, expect, it } from 'vitest';
import { OUT_LABEL, outIdentity } from '../pipeline/runtime/job_scope.js';
import type { LedgerEntry } from '../pipeline/runtime/ledger.js';
import type { BuildRecord } from '../pipeline/runtime/records.js';
import { BUILD_NETWORK } from '../pipeline/sandbox/engine.js';
import { cli, cliProcess, gitRepo, tempDir } from './helpers.js';

/** Small Debian packages, one a unit: each build installs its own through the build network. */
const PACKAGES = [
  ['six', 'six'],
  ['idna', 'idna'],
  ['toolz', 'toolz'],
  ['certifi', 'certifi'],
] as const;

const docker = (args: string[]) => execFileSync('docker', args, { encoding: 'utf8' }).trim();

/** Ids of the networks named exactly as the build network (the engine's filter also matches substrings). */
function buildNetworks(): string[] {
  return docker(['network', 'ls', '--no-trunc', '--filter', `name=${BUILD_NETWORK}`, '--format', '{{.ID}} {{.Name}}'])
    .split('\n')
    .filter((l) => l.endsWith(` ${BUILD_NETWORK}`))
    .map((l) => l.split(' ')[0]);
}

/** As a fresh engine: no Worldline network (every copy of the name removed). */
function noBuildNetwork(): void {
  for (const id of buildNetworks()) docker(['network', 'rm', id]);
  expect(buildNetworks()).toEqual([]);
}

/**
 * Bare repositories, one per package: a requirements file naming it and a test importing it;
 * `undeclared` adds an import nothing declares, so the build's collect-only run fails and the
 * repair loop builds again with it.
 */
function manifestOf(dir: string, packages: readonly (readonly [string, string])[], undeclared?: string): string {
  const nonce = randomBytes(6).toString('hex');
  const lines = packages.map(([dist, module]) => {
    const repo = gitRepo(join(dir, `uses-${dist}`), {
      'requirements.txt': `${dist}\n`,
      'tests/test_uses.py': [
        `# ${nonce}: every run of this test builds afresh`,
        `import ${module}`,
        ...(undeclared ? [`import ${undeclared}  # declared nowhere: the build repairs it`] : []),
        '',
        '',
        'def test_imports():',
        `    assert ${module}.__name__ == ${JSON.stringify(module)}`,
        '',
      ].join('\n'),
    });
    return JSON.stringify({ repo });
  });
  const manifest = join(dir, 'manifest.jsonl');
  writeFileSync(manifest, `${lines.join('\n')}\n`);
  return manifest;
}

function builds(out: string): LedgerEntry<BuildRecord>[] {
  const folder = join(out, 'ledger', 'build');
  return readdirSync(folder)
    .filter((n) => n.endsWith('.json'))
    .map((n) => JSON.parse(readFileSync(join(folder, n), 'utf8')) as LedgerEntry<BuildRecord>);
}

const buildArgs = (manifest: string, out: string, concurrency: number) => [
  'run',
  '--manifest',
  manifest,
  '--out',
  out,
  '--stages',
  'clone,build',
  '--concurrency',
  String(concurrency),
];

/** Waits until a phase-2 build container (no network: what the repository controls) of `out`'s run runs; false when the run ended first. */
async function untilSetupRuns(out: string, running: () => boolean): Promise<boolean> {
  while (running()) {
    if (docker(['ps', '-q', '--filter', 'label=worldline.role=build', '--filter', `label=${OUT_LABEL}=${outIdentity(out)}`])) return true;
    await sleep(200);
  }
  return false;
}

describe('engine-wide resources on a fresh engine', () => {
  it('four bare units building at once with no network at the start make one network, and all build', async () => {
    noBuildNetwork();
    const dir = tempDir('fresh-engine');
    const out = join(dir, 'out');
    const res = await cli(buildArgs(manifestOf(dir, PACKAGES), out, 4));
    expect(res.code, res.stderr).toBe(0);
    const done = builds(out);
    expect(done).toHaveLength(4);
    for (const b of done) {
      expect(b.status, b.reason ?? '').toBe('ok');
      // Installed from Debian through the build network.
      expect(b.record?.apt?.length).toBeGreaterThan(0);
    }
    expect(buildNetworks()).toHaveLength(1);
    // gc --host-wide takes the engine-wide resources back: the network goes when no build uses it.
    const gc = await cli(['gc', '--out', out, '--host-wide', '--json']);
    expect(gc.code, gc.stderr).toBe(0);
    expect(JSON.parse(gc.stdout)).toMatchObject({ networks_removed: 1 });
    expect(buildNetworks()).toEqual([]);
  }, 900_000);

  it('two networks of the name at the start: the empty copy is removed with a log line, and builds pass', async () => {
    noBuildNetwork();
    // As two runs racing on an older Worldline made them: the API without its duplicate check (the CLI refuses).
    for (const _ of [1, 2])
      execFileSync('curl', [
        '-sf',
        '--unix-socket',
        '/var/run/docker.sock',
        '-H',
        'Content-Type: application/json',
        '-d',
        JSON.stringify({ Name: BUILD_NETWORK, CheckDuplicate: false }),
        'http://docker/networks/create',
      ]);
    expect(buildNetworks()).toHaveLength(2);
    const dir = tempDir('doubled-network');
    const out = join(dir, 'out');
    const res = await cli(buildArgs(manifestOf(dir, PACKAGES.slice(0, 2)), out, 2));
    expect(res.code, res.stderr).toBe(0);
    expect(res.stderr).toMatch(new RegExp(`found 2 networks named ${BUILD_NETWORK}; kept [0-9a-f]{12}, removed [0-9a-f]{12}`));
    expect(builds(out).map((b) => b.status)).toEqual(['ok', 'ok']);
    expect(buildNetworks()).toHaveLength(1);
  }, 900_000);

  it('a run stopped (SIGTERM) in the middle of its builds, then run again: every unit builds, one network remains', async () => {
    noBuildNetwork();
    const dir = tempDir('stopped-build');
    const out = join(dir, 'out');
    // An import nothing declares: each unit builds, fails to collect and is rebuilt by the repair loop, as in the report.
    const manifest = manifestOf(dir, PACKAGES.slice(0, 3), 'certifi');
    const first = cliProcess(buildArgs(manifest, out, 3));
    let stopped = false;
    for (let i = 0; i < 1200 && first.output().code === null; i++) {
      // Stopped while the engine builds (the package phase's apt-get is well under way).
      if (/build [^ ]+: worldline\/env:/.test(first.output().stderr)) {
        await sleep(4000);
        first.child.kill('SIGTERM');
        stopped = true;
        break;
      }
      await sleep(100);
    }
    expect(stopped, first.output().stderr).toBe(true);
    expect((await first.done).code).toBe(143);
    const again = await cli(buildArgs(manifest, out, 3));
    expect(again.code, again.stderr).toBe(0);
    const done = builds(out);
    expect(done).toHaveLength(3);
    for (const b of done) {
      expect(b.status, b.reason ?? '').toBe('ok');
      expect(b.record?.env_source).toBe('repaired');
    }
    expect(buildNetworks()).toHaveLength(1);
  }, 900_000);

  it('a build the engine fails (its network removed under a live run) is tried once more without the cache, and the unit builds', async () => {
    noBuildNetwork();
    const dir = tempDir('engine-fault');
    const nonce = randomBytes(6).toString('hex');
    const lines = PACKAGES.slice(0, 2).map(([dist, module], i) =>
      JSON.stringify({
        repo: gitRepo(join(dir, `uses-${dist}`), { 'tests/test_uses.py': `# ${nonce}\nimport ${module}\n\n\ndef test_imports():\n    assert ${module}\n` }),
        // Packages no other case installs (a build cached from another would need no network), and the
        // first unit's setup (no network) runs long enough for the network to be removed meanwhile.
        env: { apt: [`python3-${dist}`, 'python3-markupsafe', 'python3-pyparsing'], setup: i === 0 ? ['sleep 6'] : [] },
      }),
    );
    const manifest = join(dir, 'manifest.jsonl');
    writeFileSync(manifest, `${lines.join('\n')}\n`);
    const out = join(dir, 'out');
    const run = cliProcess(buildArgs(manifest, out, 1));
    expect(await untilSetupRuns(out, () => run.output().code === null), run.output().stderr).toBe(true);
    // As another process's gc --host-wide would: this run still holds the network's id.
    noBuildNetwork();
    const res = await run.done;
    expect(res.code, res.stderr).toBe(0);
    expect(res.stderr).toMatch(
      /the engine failed the build \(image build failed: network [0-9a-f]{64} not found.*\); trying once more without the build cache/,
    );
    expect(builds(out).map((b) => b.status)).toEqual(['ok', 'ok']);
    expect(buildNetworks()).toHaveLength(1);
  }, 900_000);
});
