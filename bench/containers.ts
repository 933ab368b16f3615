/**
 * `npm run bench:containers`: what one container costs a stage, beside the floor of the engine's
 * own CLI on this machine, interleaved round by round so a shared machine's load falls on every
 * row alike. Rows:
 * - `docker run --rm` of `true` through the CLI (the floor issue 14 measured at 0.69 s);
 * - ours, `runSandboxed` of `true`: create, attach, start, wait, inspect, remove through dockerode,
 *   with every limit and the copy of the checkout into /repo (what each validate, trace, mutant
 *   check, grading and trace-around-a-fix container pays before its first test);
 * - `exec` of `true` into a running `SandboxSession` (what each agent tool call pays);
 * - for scale, Python's and pytest's own start-up inside a running container, which every pytest
 *   run pays on top of its container.
 * The goal is <= 0.5 s of container overhead per unit-stage: validate and trace are one
 * container each per unit.
 *
 *   node dist/bench/containers.js [--image worldline/base:py3.11-...] [--rounds 8]
 */
import { spawnSync } from 'node:child_process';
import { rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { median } from '../core/stats.js';
import { table } from '../core/table.js';
import { docker } from '../pipeline/sandbox/engine.js';
import { freshWork, runSandboxed, SandboxSession } from '../pipeline/sandbox/sandbox.js';

const { values: args } = parseArgs({ options: { image: { type: 'string' }, rounds: { type: 'string', default: '8' } } });

/** The newest Worldline image with pytest in it (an environment the pipeline built), else a base image. */
async function defaultImage(): Promise<string> {
  for (const repo of ['worldline/env', 'worldline/base']) {
    const found = (await docker().listImages({ filters: { reference: [repo] } })).sort((a, b) => b.Created - a.Created);
    if (found[0]?.RepoTags?.[0]) return found[0].RepoTags[0];
  }
  throw new Error('no worldline/env or worldline/base image here: run `npm run demo` (or any `worldline run`) first');
}

const LIMITS = { memoryMb: 2048, pids: 512, cpus: 1 };

async function timed(fn: () => Promise<unknown> | unknown): Promise<number> {
  const started = process.hrtime.bigint();
  await fn();
  return Number(process.hrtime.bigint() - started) / 1e9;
}

async function main(): Promise<void> {
  const image = args.image ?? (await defaultImage());
  const rounds = Number(args.rounds);
  const session = await SandboxSession.start({ image, env: {}, limits: LIMITS, labels: { 'worldline.stage': 'bench' } });
  const base = join(tmpdir(), `worldline-bench-containers-${process.pid}`);
  const rows: Record<string, number[]> = { cli: [], ours: [], exec: [], python: [], pytest: [] };
  try {
    for (let r = 0; r < rounds; r++) {
      rows.cli.push(await timed(() => spawnSync('docker', ['run', '--rm', '--network', 'none', image, 'true'], { stdio: 'ignore' })));
      const work = freshWork(base);
      rows.ours.push(
        await timed(() =>
          runSandboxed({ image, cmd: ['true'], work, vars: {}, srcLayout: false, limits: LIMITS, timeoutMs: 60_000, labels: { 'worldline.stage': 'bench' } }),
        ),
      );
      rmSync(work, { recursive: true, force: true });
      rows.exec.push(await timed(() => session.exec(['true'], 30, 100)));
      // Inside the running container, so only the interpreter's own start-up is timed (exec's cost subtracted below).
      rows.python.push(await timed(() => session.exec(['python3', '-c', 'pass'], 30, 100)));
      rows.pytest.push(await timed(() => session.exec(['python3', '-m', 'pytest', '--version'], 60, 1000)));
    }
  } finally {
    await session.close();
  }
  const cli = median(rows.cli);
  const exec = median(rows.exec);
  const line = (what: string, s: number) => [what, s.toFixed(3), (s / cli).toFixed(2)];
  process.stdout.write(
    [
      `container overhead on ${image}, median of ${rounds} interleaved rounds`,
      '',
      table([
        ['what', 'seconds', 'ratio to docker run'],
        line('docker run --rm IMAGE true (CLI floor)', cli),
        line('ours: runSandboxed true (create..remove, limits, /repo copy)', median(rows.ours)),
        line('ours: exec true into a running session', exec),
        line('python3 -c pass, start-up in a running container', median(rows.python) - exec),
        line('python3 -m pytest --version, start-up in a running container', median(rows.pytest) - exec),
      ]),
      '',
      `goal: <= 0.5 s container overhead per unit-stage; validate and trace start one container per unit (${median(rows.ours).toFixed(3)} s each here).`,
      '',
    ].join('\n'),
  );
}

await main();
