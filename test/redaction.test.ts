/**
 * Content safety end to end through the CLI. A repository with planted secrets goes through the
 * real pipeline (clone, build, validate, trace, shard on real Docker) and the Parquet is read back
 * with DuckDB: no planted secret in any column of any config, placeholder counts in the shards
 * equal to those in manifest.json, the card and `audit`, and every trace still CWM-valid. Then
 * licenses and benchmark repositories: units left out with their reasons, and kept when asked.
 */
import { execFileSync } from 'node:child_process';
import { cpSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { beforeAll, describe, expect, inject, it } from 'vitest';
import { packageRoot } from '../core/package.js';
import type { AuditReport } from '../datasets/audit.js';
import { type CwmFrame, parseEpisode, renderEpisode } from '../datasets/cwm_format.js';
import type { DatasetManifest } from '../datasets/dataset_writer.js';
import { readRows } from '../datasets/reader.js';
import { mirrorPath } from '../pipeline/runtime/layout.js';
import { parseManifest } from '../pipeline/runtime/manifest.js';
import { SCHEMAS } from '../schemas/index.js';
import { cli, sql, tempDir } from './helpers.js';

const REPO = join(packageRoot, 'examples/repos/planted-secrets');
const ENV_TOKEN = 'staple-horse-battery-correct-4242';

/** Base64 runs of a PEM body: any of them surviving means the key leaked. */
const pemFragments = (file: string) =>
  readFileSync(join(REPO, 'tests/data', file), 'utf8')
    .split('\n')
    .slice(1, 4)
    .map((line) => /[A-Za-z0-9+]{16,}/.exec(line)?.[0] as string);

const PLANTED = [
  'AKIAY2GRRRZPYRAY64HM',
  'DTWiDPbj9BGtmPapa7VJ5AhHAqI8JhDLa4pwieU7',
  'ghp_0gyMDtiNUsS5HQQYRCiYCQ9aHWdtCNveKjGp',
  'xoxb-244798866055-9857312225358-dQofLoWTx4liBRUzj2nrFJyR',
  'maria.planted@corp-mail.co.uk',
  'jo.planted@mailbox-example.net',
  'ops.planted@corp-mail.co.uk',
  '34.201.17.88',
  ENV_TOKEN,
  ...pemFragments('id_rsa'),
  ...pemFragments('id_ed25519'),
];

const KINDS = ['AWS_ACCESS_KEY', 'AWS_SECRET_KEY', 'PRIVATE_KEY', 'EMAIL', 'IP_ADDRESS', 'GITHUB_PAT', 'SLACK_BOT_TOKEN', 'ENV_SECRET'];

/** Every row of a config as JSON text (the traces' rendered text left out: it is counted through its parts). */
const rowsJson = (dataset: string, config: string) =>
  `(select to_json(t)::varchar as j from (select * ${config === 'traces' ? 'exclude (text)' : ''} from read_parquet('${dataset}/${config}/data/*.parquet')) t)`;

describe('planted secrets through the real pipeline', () => {
  let out: string;
  let dataset: string;
  let manifest: DatasetManifest;

  beforeAll(async () => {
    const dir = tempDir('redaction');
    out = join(dir, 'out');
    dataset = join(out, 'dataset');
    const manifestFile = join(dir, 'manifest.jsonl');
    writeFileSync(manifestFile, `${JSON.stringify({ repo: REPO, env: { vars: { VAULT_API_TOKEN: ENV_TOKEN } } })}\n`);
    const res = await cli(['run', '--manifest', manifestFile, '--out', out, '--stages', 'clone,build,validate,trace,shard', '--json', '--validate-runs', '1']);
    expect(res.code, res.stderr).toBe(0);
    manifest = JSON.parse(readFileSync(join(dataset, 'manifest.json'), 'utf8')) as DatasetManifest;
  }, 900_000);

  it('leaves no planted secret in any column of any config', async () => {
    expect(manifest.configs.traces.rows).toBeGreaterThan(5);
    for (const config of Object.keys(SCHEMAS)) {
      if (!manifest.configs[config].rows) continue;
      for (const secret of PLANTED) {
        const [hit] = await sql<{ n: bigint }>(`select count(*) as n from ${rowsJson(dataset, config)} where contains(j, '${secret}')`);
        expect(hit.n, `${secret} in ${config}`).toBe(0n);
      }
    }
    // The rendered trace text too.
    for (const secret of PLANTED) {
      const [hit] = await sql<{ n: bigint }>(`select count(*) as n from read_parquet('${dataset}/traces/data/*.parquet') where contains(text, '${secret}')`);
      expect(hit.n, `${secret} in traces.text`).toBe(0n);
    }
  });

  it('writes no planted secret raw anywhere in the output folder: parts, logs, ledger, work (only the checkout holds the source)', () => {
    const files = (dir: string): string[] =>
      readdirSync(dir, { withFileTypes: true }).flatMap((e) => (e.isDirectory() ? files(join(dir, e.name)) : [join(dir, e.name)]));
    const written = readdirSync(out)
      .filter((name) => name !== 'checkouts')
      .flatMap((name) => files(join(out, name)));
    // Not vacuous: the parts and the logs are there, and the parts already hold placeholders.
    for (const folder of ['parts/tests', 'parts/traces', 'logs/validate', 'logs/trace', 'ledger']) {
      expect(
        written.some((f) => f.startsWith(join(out, folder))),
        folder,
      ).toBe(true);
    }
    const traces = written.filter((f) => f.startsWith(join(out, 'parts/traces'))).map((f) => readFileSync(f, 'utf8'));
    expect(traces.join('')).toContain('<AWS_ACCESS_KEY>');
    for (const file of written) {
      const text = readFileSync(file).toString('latin1');
      for (const secret of PLANTED) expect(text.includes(secret), `${secret} in ${file}`).toBe(false);
    }
  });

  it('counts in manifest.json what the shards hold, kind by kind, and the card and audit say the same', async () => {
    const total = manifest.content?.redaction?.total ?? {};
    expect(Object.keys(total).sort()).toEqual(expect.arrayContaining([...KINDS].sort()));
    for (const kind of Object.keys(total)) {
      let inShards = 0n;
      for (const config of Object.keys(SCHEMAS)) {
        if (!manifest.configs[config].rows) continue;
        const [c] = await sql<{ n: bigint }>(
          `select coalesce(sum((length(j) - length(replace(j, '<${kind}>', ''))) // ${kind.length + 2}), 0)::bigint as n from ${rowsJson(dataset, config)}`,
        );
        inShards += c.n;
      }
      expect(inShards, kind).toBe(BigInt(total[kind]));
    }
    // The skip reason of a test names an address: the tests config is redacted too.
    const [skip] = await sql<{ message: string }>(
      `select message from read_parquet('${dataset}/tests/data/*.parquet') where node_id like '%test_ask_for_access'`,
    );
    expect(skip.message).toContain('ask <EMAIL> for the staging key');

    const card = readFileSync(join(dataset, 'README.md'), 'utf8');
    expect(card).toContain('## Content safety');
    for (const kind of KINDS) expect(card).toContain(`${kind} ${total[kind]}`);

    const audit = await cli(['audit', dataset, '--json']);
    expect(audit.code, audit.stderr).toBe(0);
    const report = JSON.parse(audit.stdout) as AuditReport;
    expect(report.content?.redaction?.total).toEqual(total);
    const text = await cli(['audit', dataset, '--html', join(out, 'audit.html')]);
    expect(text.stdout).toContain('content safety');
    expect(text.stdout).toContain(`PRIVATE_KEY ${total.PRIVATE_KEY}`);
    expect(readFileSync(join(out, 'audit.html'), 'utf8')).toContain('<h2>Content safety</h2>');
  });

  it('keeps every trace valid CWM text that agrees with its redacted frames', async () => {
    let n = 0;
    let redacted = 0;
    for await (const row of readRows(dataset, { config: 'traces', columns: ['context', 'frames', 'text'] })) {
      const text = row.text as string;
      const parsed = parseEpisode(text);
      expect(parsed.context).toBe(row.context);
      expect(renderEpisode(row.context as string, row.frames as CwmFrame[])).toBe(text);
      if (/<(?:PRIVATE_KEY|EMAIL|AWS_ACCESS_KEY|ENV_SECRET)>/.test(text)) redacted++;
      n++;
    }
    expect(n).toBe(manifest.configs.traces.rows);
    expect(redacted).toBeGreaterThan(3);
  });
});

describe('license allow-list and benchmark repositories', () => {
  let dir: string;
  let manifestFile: string;

  const reposRows = (out: string) =>
    sql<{ repo: string; license: string; status: string; reason: string | null }>(
      `select repo, license, status, reason from read_parquet('${out}/dataset/repos/data/*.parquet') order by repo`,
    );

  beforeAll(async () => {
    dir = tempDir('licenses');
    const mirrors = join(inject('workRoot'), 'mirrors');
    // A GPL repository, one with no license file, and one at a SWE-bench repository's URL (its
    // mirror seeded from a local copy, so clone needs no network).
    const gpl = join(dir, 'gpl');
    cpSync(join(packageRoot, 'examples/repos/calc'), gpl, { recursive: true });
    writeFileSync(join(gpl, 'LICENSE'), 'GNU GENERAL PUBLIC LICENSE\nVersion 3, 29 June 2007\n');
    const bare = join(dir, 'bare');
    cpSync(join(packageRoot, 'examples/repos/calc'), bare, { recursive: true });
    execFileSync('rm', [join(bare, 'LICENSE')]);
    const upstream = join(dir, 'requests');
    cpSync(join(packageRoot, 'examples/repos/calc'), upstream, { recursive: true });
    const git = (...args: string[]) => execFileSync('git', ['-C', upstream, ...args], { encoding: 'utf8' }).trim();
    git('init', '-q');
    git('add', '-A');
    git('-c', 'user.name=t', '-c', 'user.email=t@t', 'commit', '-qm', 'x');
    const commit = git('rev-parse', 'HEAD');
    const lines = [
      { repo: join(packageRoot, 'examples/repos/calc') },
      { repo: gpl },
      { repo: bare },
      { repo: 'https://github.com/psf/requests.git', commit },
    ].map((l) => JSON.stringify(l));
    manifestFile = join(dir, 'manifest.jsonl');
    writeFileSync(manifestFile, lines.join('\n') + '\n');
    const unit = parseManifest(lines[3], manifestFile).units[0];
    mkdirSync(mirrors, { recursive: true });
    process.env.WORLDLINE_MIRRORS = mirrors;
    execFileSync('git', ['clone', '-q', '--mirror', upstream, mirrorPath(unit)]);
  });

  it('excludes non-permissive, unlicensed and benchmark units by default, each with its reason, and counts them', async () => {
    const out = join(dir, 'out');
    const res = await cli(['run', '--manifest', manifestFile, '--out', out, '--stages', 'clone,shard']);
    expect(res.code, res.stderr).toBe(0);
    const rows = await reposRows(out);
    const by = (name: string) => rows.find((r) => r.repo.endsWith(name));
    expect(by('calc')).toMatchObject({ license: 'MIT', status: 'incomplete', reason: null });
    expect(by('gpl')).toMatchObject({
      license: 'GPL-3.0-only',
      status: 'excluded',
      reason: expect.stringMatching(/^license GPL-3\.0-only is not in --licenses \(MIT, /),
    });
    expect(by('bare')).toMatchObject({ license: 'unknown', status: 'excluded', reason: expect.stringMatching(/^license unknown is not in --licenses/) });
    expect(by('requests.git')).toMatchObject({ status: 'excluded', reason: expect.stringMatching(/^benchmark repository: psf\/requests is in SWE-bench/) });
    const m = JSON.parse(readFileSync(join(out, 'dataset', 'manifest.json'), 'utf8')) as DatasetManifest;
    expect(m.content?.exclusions.license_excluded).toEqual({ 'GPL-3.0-only': 1, unknown: 1 });
    expect(Object.values(m.content?.exclusions.benchmark_excluded ?? {})).toEqual([1]);
    const card = readFileSync(join(out, 'dataset', 'README.md'), 'utf8');
    expect(card).toContain('Units left out by license: GPL-3.0-only 1, unknown 1.');
    expect(card).toContain('https://github.com/SWE-bench/SWE-bench/blob/');
    const audit = JSON.parse((await cli(['audit', join(out, 'dataset'), '--json'])).stdout) as AuditReport;
    expect(audit.content?.excluded_units.map((e) => e.units).reduce((a, b) => a + b)).toBe(3);
    expect(audit.units.status).toContainEqual({ status: 'excluded', count: 3 });
  });

  it('keeps them when asked: --licenses naming them and --no-exclude-benchmarks', async () => {
    const out = join(dir, 'out-all');
    const res = await cli([
      'run',
      '--manifest',
      manifestFile,
      '--out',
      out,
      '--stages',
      'clone,shard',
      '--licenses',
      'MIT,GPL-3.0-only,unknown',
      '--no-exclude-benchmarks',
    ]);
    expect(res.code, res.stderr).toBe(0);
    expect((await reposRows(out)).map((r) => r.status)).toEqual(['incomplete', 'incomplete', 'incomplete', 'incomplete']);
    const card = readFileSync(join(out, 'dataset', 'README.md'), 'utf8');
    expect(card).toContain('License allow-list (--licenses): MIT, GPL-3.0-only, unknown.');
    expect(card).toContain('Benchmark decontamination was turned off');
  });
});
