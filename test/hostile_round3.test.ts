/**
 * The sandbox's third round of attacks (examples/hostile/, issue 40), through `worldline run`
 * (clone to trace) on real Docker: a build that points the image's OpenSSL configuration at a
 * provider of its own (the key holder must never load it), a second validate run that puts the
 * first run's signed report in place of its own, a conftest that pads the tracer's output to an
 * unterminated gigabyte, and a test id with a C1 control in the JSON progress lines. Each failed
 * on main at 2dd70fe: the runner loaded the provider, the moved report was accepted (the unit ok,
 * the failure hidden), the whole process died (RangeError) with no record and its work folder
 * left behind, and the progress lines carried the raw U+009B.
 */
import { execFileSync } from 'node:child_process';
import { cpSync, existsSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { arch } from 'node:os';
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { mountsUnder } from '../core/mounts.js';
import { packageRoot } from '../core/package.js';
import { cli, tempDir } from './helpers.js';

interface RunJson {
  units: { repo: string; status: string; stage: string | null; reason: string | null; ran: string[] }[];
}

/** A module name holding a C1 CSI (U+009B): written here, so the repository's own tree holds no such name. */
const C1_MODULE = 'tests/test_c1_\u009b31m_red.py';

// The planted provider is an x86-64 shared object (provider.c): elsewhere its unit only shows it did not load.
describe.runIf(arch() === 'x64')('the sandbox, round three (through worldline run)', () => {
  let run: RunJson;
  let out: string;
  let stderr = '';
  const unit = (name: string) => run.units.find((u) => u.repo === name)!;

  beforeAll(async () => {
    const dir = tempDir('hostile-round3');
    out = join(dir, 'out');
    const repos = join(dir, 'repos');
    const names = ['openssl-provider', 'moved-report', 'padded-trace', 'c1-id'];
    for (const name of names) cpSync(join(packageRoot, 'examples', 'hostile', 'repos', name), join(repos, name), { recursive: true });
    writeFileSync(join(repos, 'c1-id', C1_MODULE), 'raise ImportError("this module never imports")\n');
    const env: Record<string, object> = {
      'openssl-provider': { setup: ['python3 plant_provider.py'] },
      // An env of its own: no repair of the module that does not import (the reason must name it).
      'c1-id': { pytest_args: [] },
    };
    const manifest = join(dir, 'manifest.jsonl');
    writeFileSync(manifest, names.map((name) => JSON.stringify({ repo: join(repos, name), ...(env[name] ? { env: env[name] } : {}) })).join('\n') + '\n');
    const args = ['run', '--manifest', manifest, '--out', out, '--stages', 'clone,build,validate,trace', '--suite-timeout', '90', '--test-timeout', '15'];
    const res = await cli([...args, '--memory', '512', '--concurrency', '2', '--progress', 'json', '--json']);
    stderr = res.stderr;
    // Exit 1 (some units failed, each with its reason), never a crash: one repository fails alone.
    expect(res.code, res.stderr.slice(-3000)).toBe(1);
    run = JSON.parse(res.stdout) as RunJson;
  }, 900_000);

  it("never runs the image's OpenSSL configuration or provider in the key holder, while the image's own Python loads them", () => {
    expect(unit('openssl-provider')).toMatchObject({ status: 'ok' });
    const rows = readdirSync(join(out, 'parts', 'tests'))
      .filter((f) => f.startsWith('openssl-provider-'))
      .flatMap((f) =>
        readFileSync(join(out, 'parts', 'tests', f), 'utf8')
          .trim()
          .split('\n'),
      )
      .map((l) => JSON.parse(l) as { node_id: string; outcome: string; run_outcomes: string[] });
    const outcome = (name: string) => rows.find((r) => r.node_id.endsWith(`::${name}`))?.run_outcomes;
    expect(outcome('test_the_provider_is_planted')).toEqual(['passed', 'passed']);
    // It failed on main: the runner's libcrypto read /usr/lib/ssl/openssl.cnf when it imported hashlib.
    expect(outcome('test_the_key_holder_never_loaded_it')).toEqual(['passed', 'passed']);
  });

  it("catches a second run's report replaced by the first run's signed one, and names it", () => {
    // On main the unit was ok and the test that failed in run 2 was recorded as passing twice.
    expect(unit('moved-report')).toMatchObject({
      status: 'failed',
      stage: 'validate',
      reason: 'run 2: the report was tampered with: line 1 of the report was signed for "report-1.jsonl", not report-2.jsonl (moved from another run or file)',
    });
  });

  it('fails the unit whose tracer output is one unterminated gigabyte, not the process, and leaves no work folder', () => {
    expect(unit('padded-trace')).toMatchObject({
      status: 'failed',
      stage: 'trace',
      reason: 'result file traces.jsonl has a line longer than 67108864 bytes; refused',
    });
    const work = join(out, 'work');
    const left = existsSync(work) ? execFileSync('find', [work, '-type', 'f'], { encoding: 'utf8' }).trim() : '';
    expect(left).toBe('');
    expect(mountsUnder(out)).toEqual([]);
  });

  it('escapes C1 controls in the JSON progress lines, which still decode to the exact id', () => {
    expect(unit('c1-id')).toMatchObject({ status: 'failed', stage: 'validate' });
    expect(unit('c1-id').reason).toContain(C1_MODULE);
    const lines = stderr.trim().split('\n');
    const events = lines.map((l) => JSON.parse(l) as Record<string, unknown>);
    expect(events.some((e) => JSON.stringify(e).includes('\u009b31m_red'))).toBe(true);
    // No line carries a raw control character (JSON.stringify left U+009B as it was).
    expect(lines.filter((l) => [...l].some((c) => c < ' ' || (c >= '\x7f' && c <= '\x9f')))).toEqual([]);
  });
});
