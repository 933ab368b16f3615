/**
 * The Python index as a backend (`--pip-index`, pipeline/envs/index/): the test serves its own
 * PEP 691 index over TLS on 127.0.0.1 with its own certificate authority, trusted the way this
 * host's pip is told (PIP_INDEX_URL, PIP_CERT: `auto` reads them). Its wheels, built here: wl-alpha
 * needs wl-beta>=1; wl-beta 1.0 was uploaded before the repository's commit and 2.0 after; the
 * distribution wl-gamma-dist ships the module `gamma`; and uv itself, as a company mirror would
 * serve it. Resolve and download happen on the host; the build installs offline from the cache.
 */
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdirSync, readdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { createServer as createHttpServer, type Server as HttpServer } from 'node:http';
import { createServer, type Server } from 'node:https';
import { type AddressInfo, connect } from 'node:net';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { packageRoot } from '../core/package.js';
import { cutoffTime, lockRequirements, olderBranch, uvCause } from '../pipeline/envs/index/lock.js';
import { defaultPipIndex, indexSettings, parsePipConfigList } from '../pipeline/envs/index/settings.js';
import { UV_VERSION, uvBinary } from '../pipeline/envs/index/uv.js';
import type { LedgerEntry } from '../pipeline/runtime/ledger.js';
import type { BuildRecord, ResolveRecord, ValidateRecord } from '../pipeline/runtime/records.js';
import { PYCACHE_PREFIX } from '../pipeline/sandbox/bytecode.js';
import { inspectImage } from '../pipeline/sandbox/engine.js';
import { type CliResult, cli, gitRepo, sql, tempDir } from './helpers.js';

/** Tiny wheels: [distribution, version, module, requirements], pure Python unless a tag says otherwise. */
const WHEELS: [string, string, string, string[], string?, string?][] = [
  ['wl-alpha', '1.0', 'alpha', ['wl-beta>=1']],
  ['wl-beta', '1.0', 'beta', []],
  ['wl-beta', '2.0', 'beta', []],
  ['wl-gamma-dist', '1.0', 'gamma', []],
  ['wl-delta', '1.0', 'delta', []],
  // Needs six, which Debian ships too: the lock's six is the one, Debian's stays out.
  ['wl-epsilon', '1.0', 'epsilon', ['six']],
  ['six', '1.16.0', 'six', []],
  // Needs wl-sdist, which has no wheel: deep in a tree, as transformer-lens needs transformers-stream-generator.
  ['wl-zeta', '1.0', 'zeta', ['wl-sdist>=1']],
  // wl-sdist's build requirement: offered to its build in the container, never installed.
  ['wl-buildtool', '1.0', 'buildtool', []],
  // Imported by tests and declared nowhere, as gpytorch's linear_operator was lost: found on the index by its module's name.
  ['wl-theta', '1.0', 'wl_theta', ['wl-beta']],
  // A project named like a module it does not hold (as `agents` is not openai-agents' module): refused.
  ['iota', '1.0', 'not_iota', []],
  // One release with a wheel per CPython: the lock names one of them, for the base's Python.
  ['wl-dual', '1.0', 'dual', [], 'cp311-cp311-manylinux_2_17_x86_64'],
  ['wl-dual', '1.0', 'dual', [], 'cp313-cp313-manylinux_2_17_x86_64'],
  // Built for CPython 3.11 only, as a pin that predates a newer Python's wheels.
  ['wl-native', '1.0', 'native', [], 'cp311-cp311-manylinux_2_17_x86_64'],
  // Debian compiles python3-scipy against its python3-numpy: a lock whose tree has numpy (wl-kappa's) takes scipy from the index too.
  ['wl-kappa', '1.0', 'kappa', ['numpy>=9']],
  ['numpy', '9.0', 'numpy', []],
  ['scipy', '9.0', 'scipy', ['numpy']],
  // Debian's pure-Python python3-dateutil (bookworm: 2.8.2) Depends on python3-six: a lock whose tree has six (wl-epsilon's)
  // takes dateutil from the index too, at Debian's version where the tree allows it.
  ['python-dateutil', '2.8.2', 'dateutil', ['six>=1.5']],
  ['python-dateutil', '9.0', 'dateutil', ['six']],
  // Writes a log beside itself at import, as nnsight does: the runs' root file system is read-only.
  ['wl-logbook', '1.0', 'logbook_wl', [], undefined, 'import os\nopen(os.path.join(os.path.dirname(__file__), "wl.log"), "a").close()\nVERSION = "1.0"\n'],
];
const UPLOADED: Record<string, string> = { 'wl-beta-2.0': '2023-01-01T00:00:00Z', 'wl-sdist-2.0.tar.gz': '2023-01-01T00:00:00Z' };
const COMMIT_DATE = '2022-06-01T12:00:00Z';

const MAKE_WHEEL = [
  'import os, sys, zipfile',
  'out, dist, version, module, tag, *requires = sys.argv[1:]',
  "stem = f\"{dist.replace('-', '_')}-{version}\"",
  'info = f"{stem}.dist-info"',
  'meta = f"Metadata-Version: 2.1\\nName: {dist}\\nVersion: {version}\\n" + "".join(f"Requires-Dist: {r}\\n" for r in requires)',
  'body = os.environ.get("WL_MODULE_BODY") or f"VERSION = {version!r}\\n"',
  'files = {f"{module}/__init__.py": body, f"{info}/METADATA": meta,',
  '         f"{info}/WHEEL": "Wheel-Version: 1.0\\nGenerator: worldline-test\\nRoot-Is-Purelib: true\\nTag: " + tag + "\\n"}',
  'files[f"{info}/RECORD"] = "".join(f"{p},,\\n" for p in list(files) + [f"{info}/RECORD"])',
  'with zipfile.ZipFile(f"{out}/{stem}-{tag}.whl", "w") as z:',
  '    for path, text in files.items():',
  '        z.writestr(path, text)',
].join('\n');

/** A certificate authority and a server certificate for 127.0.0.1 it signed (openssl, as a company's CA would). */
function certificates(dir: string): { ca: string; key: string; cert: string } {
  const at = (f: string) => join(dir, f);
  const ssl = (...args: string[]) => execFileSync('openssl', args, { stdio: 'ignore' });
  ssl('req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-keyout', at('ca.key'), '-out', at('ca.pem'), '-days', '2', '-subj', '/CN=worldline test CA');
  ssl('req', '-newkey', 'rsa:2048', '-nodes', '-keyout', at('server.key'), '-out', at('server.csr'), '-subj', '/CN=127.0.0.1');
  writeFileSync(
    at('ext.cnf'),
    'subjectAltName=IP:127.0.0.1\nbasicConstraints=CA:FALSE\nkeyUsage=digitalSignature,keyEncipherment\nextendedKeyUsage=serverAuth\n',
  );
  ssl(
    'x509',
    '-req',
    '-in',
    at('server.csr'),
    '-CA',
    at('ca.pem'),
    '-CAkey',
    at('ca.key'),
    '-CAcreateserial',
    '-out',
    at('server.pem'),
    '-days',
    '2',
    '-extfile',
    at('ext.cnf'),
  );
  return { ca: at('ca.pem'), key: at('server.key'), cert: at('server.pem') };
}

interface Served {
  server: Server;
  url: string;
  /** Wheel downloads by anyone but uv's resolver (uv's user agent): Worldline's own downloads into its cache. */
  downloads: string[];
  /** Those of them, and the index pages, that came through the test's proxy (which connects from 127.0.0.2). */
  proxied: string[];
}

/** Where the test's proxy connects from, so the index can tell a proxied request from a direct one. */
const PROXY_ADDRESS = '127.0.0.2';

/** An HTTP CONNECT proxy (as a company's) that asks for credentials; the tunnels it opened. */
async function serveProxy(): Promise<{ server: HttpServer; url: string; tunnels: string[] }> {
  const tunnels: string[] = [];
  const expected = `Basic ${Buffer.from('worldline:s3cret').toString('base64')}`;
  const server = createHttpServer((_req, res) => res.writeHead(405).end());
  server.on('connect', (req, socket, head) => {
    if (req.headers['proxy-authorization'] !== expected) return void socket.end('HTTP/1.1 407 Proxy Authentication Required\r\n\r\n');
    const [host, port] = (req.url ?? '').split(':');
    tunnels.push(req.url ?? '');
    const upstream = connect({ host, port: Number(port), localAddress: PROXY_ADDRESS }, () => {
      socket.write('HTTP/1.1 200 Connection Established\r\n\r\n');
      upstream.write(head);
      upstream.pipe(socket);
      socket.pipe(upstream);
    });
    upstream.on('error', () => socket.destroy());
    socket.on('error', () => upstream.destroy());
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { server, url: `http://worldline:s3cret@127.0.0.1:${(server.address() as AddressInfo).port}`, tunnels };
}

/** A PEP 691 (JSON, API 1.1 with upload times) simple index of every wheel in `dir`. */
async function serveIndex(dir: string, tls: { key: string; cert: string }): Promise<Served> {
  const files = readdirSync(dir).filter((f) => f.endsWith('.whl') || f.endsWith('.tar.gz'));
  const downloads: string[] = [];
  const proxied: string[] = [];
  const server = createServer({ key: readFileSync(tls.key), cert: readFileSync(tls.cert) }, (req, res) => {
    const path = decodeURIComponent(new URL(req.url ?? '/', 'https://x').pathname);
    const project = /^\/simple\/([^/]+)\/?$/.exec(path)?.[1];
    if (project) {
      if (req.socket.remoteAddress === PROXY_ADDRESS) proxied.push(`simple/${project}`);
      const mine = files.filter((f) => f.split('-')[0].replace(/_/g, '-').toLowerCase() === project);
      if (!mine.length) return void res.writeHead(404).end();
      const body = {
        meta: { 'api-version': '1.1' },
        name: project,
        versions: [...new Set(mine.map((f) => f.split('-')[1].replace(/\.tar\.gz$/, '')))],
        files: mine.map((f) => ({
          filename: f,
          url: `/files/${f}`,
          hashes: {
            sha256: createHash('sha256')
              .update(readFileSync(join(dir, f)))
              .digest('hex'),
          },
          'upload-time': UPLOADED[`${project}-${f.split('-')[1]}`] ?? '2021-01-01T00:00:00Z',
        })),
      };
      return void res.writeHead(200, { 'content-type': 'application/vnd.pypi.simple.v1+json' }).end(JSON.stringify(body));
    }
    const file = /^\/files\/([^/]+)$/.exec(path)?.[1];
    if (file && files.includes(file)) {
      if (!/^uv\//.test(req.headers['user-agent'] ?? '')) {
        downloads.push(file);
        if (req.socket.remoteAddress === PROXY_ADDRESS) proxied.push(file);
      }
      return void res.writeHead(200, { 'content-type': 'application/octet-stream' }).end(readFileSync(join(dir, file)));
    }
    res.writeHead(404).end();
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { server, url: `https://127.0.0.1:${(server.address() as AddressInfo).port}/simple/`, downloads, proxied };
}

describe('the Python index as a backend', () => {
  let dir: string;
  let index: Served;
  let trusted: string;
  let untrusted: string;
  let first: string;
  const entry = <R>(out: string, stage: string) => {
    const ledger = join(out, 'ledger', stage);
    return JSON.parse(readFileSync(join(ledger, readdirSync(ledger)[0]), 'utf8')) as LedgerEntry<R>;
  };
  /** A repository committed on COMMIT_DATE asking for `dependencies`, its tests checking the tree the lock gives. */
  const TREE_TEST =
    'import importlib.metadata\n\nimport alpha\nimport gamma\n\n\ndef test_tree():\n' +
    '    assert alpha.VERSION == "1.0" and gamma.VERSION == "1.0"\n' +
    '    assert importlib.metadata.version("wl-beta") == "1.0"\n';
  const project = (name: string, dependencies: string[], classifiers: string[] = [], test = TREE_TEST, files: Record<string, string> = {}) => {
    process.env.GIT_COMMITTER_DATE = COMMIT_DATE;
    process.env.GIT_AUTHOR_DATE = COMMIT_DATE;
    try {
      const repo = gitRepo(join(dir, name), {
        'pyproject.toml': `[project]\nname = "${name}"\nversion = "0.1.0"\ndependencies = ${JSON.stringify(dependencies)}\nclassifiers = ${JSON.stringify(classifiers)}\n`,
        'tests/test_tree.py': test,
        ...files,
      });
      const manifest = join(dir, `${name}.jsonl`);
      writeFileSync(manifest, `${JSON.stringify({ repo })}\n`);
      return manifest;
    } finally {
      delete process.env.GIT_COMMITTER_DATE;
      delete process.env.GIT_AUTHOR_DATE;
    }
  };
  const run = (manifest: string, out: string, stages: string, cert: string, extra: string[] = []): Promise<CliResult> =>
    cli(['run', '--manifest', manifest, '--out', join(dir, out), '--stages', stages, '--pip-index', 'auto', ...extra], {
      WORLDLINE_INDEX_CACHE: join(dir, 'index-cache'),
      PIP_INDEX_URL: index.url,
      PIP_CERT: cert,
      // Set on this host, they would win over PIP_CERT in pip (requests reads them first): empty, they are unset for it.
      REQUESTS_CA_BUNDLE: '',
      CURL_CA_BUNDLE: '',
    });

  beforeAll(async () => {
    dir = tempDir('envs-index');
    const wheels = join(dir, 'wheels');
    mkdirSync(wheels);
    for (const [dist, version, module, requires, tag, body] of WHEELS) {
      execFileSync('python3', ['-c', MAKE_WHEEL, wheels, dist, version, module, tag ?? 'py3-none-any', ...requires], {
        env: { ...process.env, WL_MODULE_BODY: body ?? '' },
      });
    }
    // A wheel of 32 MB of incompressible bytes: heavy, for a stack line of 8 MB.
    execFileSync('python3', ['-c', MAKE_WHEEL, wheels, 'wl-heavy', '1.0', 'heavy', 'py3-none-any']);
    execFileSync('python3', [
      '-c',
      `import os, zipfile\nwith zipfile.ZipFile(${JSON.stringify(join(wheels, 'wl_heavy-1.0-py3-none-any.whl'))}, 'a') as z: z.writestr('heavy/blob.bin', os.urandom(32 << 20))`,
    ]);
    // A distribution published only as sdists (its backend runs code to build it), 2.0 after the cut-off.
    for (const version of ['1.0', '2.0']) execFileSync('python3', [join(packageRoot, 'test', 'fixtures', 'make_sdist.py'), wheels, version]);
    // One that locks and does not build (blist, a C extension for old Pythons, in sortedcontainers' requirements).
    execFileSync('python3', [join(packageRoot, 'test', 'fixtures', 'make_sdist.py'), wheels, '1.0', 'wl-broken', 'broken']);
    // An sdist that names no build backend (setuptools, then, which this index does not have).
    // Written beside the folder it archives, then moved in: tar reading a folder it writes into can fail ("file changed as we read it").
    execFileSync('tar', ['-czf', join(dir, 'wl_nosetup-1.0.tar.gz'), '-C', dir, '--transform', 's,^wheels,wl_nosetup-1.0,', '--no-recursion', 'wheels']);
    renameSync(join(dir, 'wl_nosetup-1.0.tar.gz'), join(wheels, 'wl_nosetup-1.0.tar.gz'));
    // uv as the mirror would serve it: fetched here through this host's own pip configuration.
    execFileSync('python3', [
      '-m',
      'pip',
      'download',
      `uv==${UV_VERSION}`,
      '--no-deps',
      '--only-binary',
      ':all:',
      '--platform',
      'manylinux_2_17_x86_64',
      '-d',
      wheels,
      '-q',
    ]);
    const tls = certificates(dir);
    untrusted = '/etc/ssl/certs/ca-certificates.crt';
    trusted = join(dir, 'bundle.pem');
    writeFileSync(trusted, readFileSync(untrusted, 'utf8') + readFileSync(tls.ca, 'utf8'));
    index = await serveIndex(wheels, tls);
  }, 300_000);
  afterAll(() => index?.server.close());

  it('locks the tree as of the commit date on the host, and the offline build installs it from the cache', async () => {
    first = project('index-user', ['wl-alpha', 'wl-gamma-dist']);
    const res = await run(first, 'out', 'clone,resolve,build,validate,shard', trusted, ['--licenses', '*']);
    expect(res.code, `${res.stdout}\n${res.stderr}`).toBe(0);
    const resolved = entry<ResolveRecord>(join(dir, 'out'), 'resolve').record!;
    expect(resolved.index).toMatchObject({ mode: 'auto', exclude_newer: COMMIT_DATE, exclude_newer_from: 'commit' });
    // The cut-off kept wl-beta 2.0 (uploaded after the commit) out; every file carries its hash.
    const lock = resolved.env?.lock ?? [];
    expect(lock.map((d) => `${d.name}==${d.version}`).sort()).toEqual(['wl-alpha==1.0', 'wl-beta==1.0', 'wl-gamma-dist==1.0']);
    for (const d of lock) expect(d.sha256).toMatch(/^[0-9a-f]{64}$/);
    expect(resolved.env).toMatchObject({ pip: [], apt: [] });
    expect(entry<BuildRecord>(join(dir, 'out'), 'build').record?.index).toEqual({
      mode: 'auto',
      files: 3,
      downloaded: 3,
      downloaded_bytes: expect.any(Number),
      cached: 0,
      lock_image: expect.stringMatching(/^worldline\/lock:py3\.\d+\.\d+-[0-9a-f]{12}$/),
      lock_image_built: true,
    });
    expect(entry<ValidateRecord>(join(dir, 'out'), 'validate').record).toMatchObject({ collected: 1, passed: 1 });
    // uv's own wheel came once too, fetched by this host's pip into the cache.
    expect(index.downloads.filter((f) => !f.startsWith('uv-')).sort()).toEqual([
      'wl_alpha-1.0-py3-none-any.whl',
      'wl_beta-1.0-py3-none-any.whl',
      'wl_gamma_dist-1.0-py3-none-any.whl',
    ]);
    // The repos row carries where the files came from and the lock itself.
    const [row] = await sql<{ env_index: string; env_lock: string[] }>(`select env_index, env_lock from '${join(dir, 'out')}/dataset/repos/data/*.parquet'`);
    expect(row.env_index).toBe('auto');
    expect(row.env_lock).toHaveLength(3);
    expect(row.env_lock.join('\n')).toMatch(/^wl-beta==1\.0 sha256:[0-9a-f]{64} https:\/\/127\.0\.0\.1:\d+\/files\/wl_beta-1\.0-py3-none-any\.whl$/m);
  }, 900_000);

  it('builds a second unit with the same lock from the cache, downloading nothing', async () => {
    const before = index.downloads.length;
    const res = await run(project('index-user-2', ['wl-gamma-dist', 'wl-alpha>=1']), 'out2', 'clone,resolve,build,validate', trusted);
    expect(res.code, `${res.stdout}\n${res.stderr}`).toBe(0);
    // The same files on the same base: the first unit's lock image, so nothing is installed either.
    const lockImage = entry<BuildRecord>(join(dir, 'out'), 'build').record?.index?.lock_image;
    expect(entry<BuildRecord>(join(dir, 'out2'), 'build').record?.index).toEqual({
      mode: 'auto',
      files: 3,
      downloaded: 0,
      downloaded_bytes: 0,
      cached: 3,
      lock_image: lockImage,
      lock_image_built: false,
    });
    expect(index.downloads.length).toBe(before);
    expect(entry<ValidateRecord>(join(dir, 'out2'), 'validate').record).toMatchObject({ passed: 1 });
  }, 900_000);

  it('rebuilds from a line that carries its lock (as `resolve` prints it) without resolving or downloading', async () => {
    const env = { WORLDLINE_INDEX_CACHE: join(dir, 'index-cache'), PIP_INDEX_URL: index.url, PIP_CERT: trusted, REQUESTS_CA_BUNDLE: '', CURL_CA_BUNDLE: '' };
    const printed = await cli(['resolve', '--manifest', first, '--out', join(dir, 'out'), '--pip-index', 'auto'], env);
    expect(printed.code, printed.stderr).toBe(0);
    const line = printed.stdout.trim().split('\n').at(-1)!;
    expect(JSON.parse(line).env.lock).toHaveLength(3);
    const locked = join(dir, 'locked.jsonl');
    writeFileSync(locked, `${line}\n`);
    const before = index.downloads.length;
    // No --pip-index: the line's lock is all there is, and the cache has its files.
    const res = await cli(['run', '--manifest', locked, '--out', join(dir, 'out5'), '--stages', 'clone,resolve,build,validate'], env);
    expect(res.code, `${res.stdout}\n${res.stderr}`).toBe(0);
    expect(entry<ResolveRecord>(join(dir, 'out5'), 'resolve').record?.source).toBe('manifest');
    expect(entry<BuildRecord>(join(dir, 'out5'), 'build').record?.index).toEqual({
      mode: 'lock',
      files: 3,
      downloaded: 0,
      downloaded_bytes: 0,
      cached: 3,
      lock_image: entry<BuildRecord>(join(dir, 'out'), 'build').record?.index?.lock_image,
      lock_image_built: false,
    });
    expect(entry<ValidateRecord>(join(dir, 'out5'), 'validate').record).toMatchObject({ passed: 1 });
    expect(index.downloads.length).toBe(before);
    const status = await cli(['status', '--out', join(dir, 'out5')]);
    expect(status.stdout).toMatch(/python packages from: 1 index lock/);
  }, 900_000);

  it("an image budget takes a finished unit's lock image with its env image", async () => {
    const manifest = join(dir, 'budget.jsonl');
    writeFileSync(
      manifest,
      [
        project('budget-one', ['wl-alpha'], [], 'import alpha\n\n\ndef test_alpha():\n    assert alpha\n'),
        // Files the cache has already (the proxy test below counts wl-delta's download).
        project('budget-two', ['wl-gamma-dist'], [], 'import gamma\n\n\ndef test_gamma():\n    assert gamma\n'),
      ]
        .map((m) => readFileSync(m, 'utf8'))
        .join(''),
    );
    const res = await run(manifest, 'out-budget', 'clone,resolve,build,validate', trusted, ['--image-budget', '0.001', '--concurrency', '1']);
    expect(res.code, `${res.stdout}\n${res.stderr}`).toBe(0);
    const builds = readdirSync(join(dir, 'out-budget', 'ledger', 'build')).map(
      (f) => (JSON.parse(readFileSync(join(dir, 'out-budget', 'ledger', 'build', f), 'utf8')) as LedgerEntry<BuildRecord>).record!,
    );
    expect(builds).toHaveLength(2);
    for (const b of builds) {
      expect(b.index?.lock_image_built, b.image).toBe(true);
      // Both went as each unit finished: nothing stood on the lock image any more.
      expect(await inspectImage(b.image), b.image).toBeNull();
      expect(await inspectImage(b.index!.lock_image!), b.index!.lock_image).toBeNull();
    }
  }, 900_000);

  it('goes through the proxy pip is configured with, for the resolver and for the downloads', async () => {
    const proxy = await serveProxy();
    try {
      const res = await cli(
        [
          'run',
          '--manifest',
          project('index-proxy', ['wl-alpha', 'wl-gamma-dist', 'wl-delta']),
          '--out',
          join(dir, 'out7'),
          '--stages',
          'clone,resolve,build,validate',
          '--pip-index',
          'auto',
        ],
        {
          WORLDLINE_INDEX_CACHE: join(dir, 'index-cache'),
          PIP_INDEX_URL: index.url,
          PIP_CERT: trusted,
          REQUESTS_CA_BUNDLE: '',
          CURL_CA_BUNDLE: '',
          PIP_PROXY: proxy.url,
        },
      );
      expect(res.code, `${res.stdout}\n${res.stderr}`).toBe(0);
      expect(entry<BuildRecord>(join(dir, 'out7'), 'build').record?.index).toMatchObject({ mode: 'auto', files: 4, downloaded: 1, cached: 3 });
      expect(proxy.tunnels).toContain(new URL(index.url).host);
      // The resolver read the index through the proxy, and the one new file came through it too.
      expect(index.proxied).toContain('simple/wl-delta');
      expect(index.proxied.filter((p) => p.endsWith('.whl'))).toEqual(['wl_delta-1.0-py3-none-any.whl']);
    } finally {
      proxy.server.close();
    }
  }, 900_000);

  it("installs the locks' heavy files once, as a stack image every unit locking them is built on, and the rest once per lock", async () => {
    const heavyTest =
      'import importlib.resources\n\nimport heavy\n\n\ndef test_heavy():\n    assert len(importlib.resources.files("heavy").joinpath("blob.bin").read_bytes()) == 32 << 20\n';
    const manifests: Record<string, string> = {};
    const build = async (name: string, dependencies: string[], out = name) => {
      manifests[name] ??= project(name, dependencies, [], heavyTest);
      const res = await cli(
        ['run', '--manifest', manifests[name], '--out', join(dir, out), '--stages', 'clone,resolve,build,validate', '--pip-index', 'auto'],
        {
          WORLDLINE_INDEX_CACHE: join(dir, 'index-cache'),
          WORLDLINE_STACK_MIN_BYTES: String(8 << 20),
          PIP_INDEX_URL: index.url,
          PIP_CERT: trusted,
          REQUESTS_CA_BUNDLE: '',
          CURL_CA_BUNDLE: '',
        },
      );
      expect(res.code, `${res.stdout}\n${res.stderr}`).toBe(0);
      expect(entry<ValidateRecord>(join(dir, out), 'validate').record).toMatchObject({ passed: 1 });
      return entry<BuildRecord>(join(dir, out), 'build').record!;
    };
    const one = await build('stack-one', ['wl-heavy', 'wl-gamma-dist']);
    // idna is Debian's: the packages step runs apt-get in a build FROM the stack, on the build network.
    const two = await build('stack-two', ['wl-heavy', 'wl-delta', 'idna']);
    expect(one.index).toMatchObject({ files: 2, stack: expect.stringMatching(/^worldline\/stack:py3\.\d+\.\d+-[0-9a-f]{12}$/), stack_files: 1 });
    // The same heavy file on the same base: one stack, made by whichever built first.
    expect(two.index?.stack).toBe(one.index?.stack);
    expect([one.index?.stack_built, two.index?.stack_built].sort()).toEqual([false, true]);
    const layers = (ref: string) =>
      JSON.parse(execFileSync('docker', ['image', 'inspect', '--format', '{{json .RootFS.Layers}}', ref], { encoding: 'utf8' })) as string[];
    const stackTop = layers(one.index!.stack!).at(-1)!;
    expect(layers(one.image)).toContain(stackTop);
    expect(layers(two.image)).toContain(stackTop);
    // The setup installed only the light file: what the unit's image adds over its stack (the
    // checkout, its pristine copy, bytecode: some 16 MB) is less than the heavy file.
    const size = (ref: string) => Number(execFileSync('docker', ['image', 'inspect', '--format', '{{.Size}}', ref], { encoding: 'utf8' }));
    expect(size(one.image) - size(one.index!.stack!)).toBeLessThan(32 << 20);
    const imported = execFileSync(
      'docker',
      ['run', '--rm', '--network', 'none', two.image, 'python3', '-c', 'import heavy, delta, idna; print(heavy.__file__)'],
      {
        encoding: 'utf8',
      },
    );
    expect(imported).toMatch(/heavy\/__init__\.py/);
    expect(two.env?.apt).toContain('python3-idna');
    // The stack carries its bytecode, owned by the runs' user; no image above it holds a copy
    // (the unit's compile found it current, its chown left it alone): each top layer's own files.
    const owned = execFileSync(
      'docker',
      ['run', '--rm', '--network', 'none', one.index!.stack!, 'find', PYCACHE_PREFIX, '-path', '*/heavy/*.pyc', '-user', '10001'],
      {
        encoding: 'utf8',
      },
    );
    expect(owned).toMatch(/heavy\/__init__\.cpython-3\d+\.pyc/);
    const topLayer = (ref: string) =>
      execFileSync('docker', ['image', 'inspect', '--format', '{{.GraphDriver.Data.UpperDir}}', ref], { encoding: 'utf8' }).trim();
    const heavyPycs = (ref: string) => execFileSync('find', [topLayer(ref), '-path', '*/heavy/*.pyc'], { encoding: 'utf8' });
    expect(one.index?.lock_image).toMatch(/^worldline\/lock:py3\.\d+\.\d+-[0-9a-f]{12}$/);
    for (const ref of [one.image, one.index!.lock_image!]) expect(heavyPycs(ref), ref).toBe('');
    // The lock image holds the lighter file and its bytecode; a rebuild of the same lock (its env
    // image gone, another output folder) starts from it and installs nothing.
    expect(execFileSync('find', [topLayer(one.index!.lock_image!), '-path', '*gamma*'], { encoding: 'utf8' })).toMatch(/\.pyc/);
    execFileSync('docker', ['rmi', one.image]);
    const again = await build('stack-one', [], 'stack-one-again');
    expect(again.index).toMatchObject({ lock_image: one.index!.lock_image, lock_image_built: false, stack_built: false });
    expect(execFileSync('find', [topLayer(again.image), '-path', '*gamma*'], { encoding: 'utf8' })).toBe('');
    execFileSync('docker', ['rmi', '-f', again.image, two.image, one.index!.lock_image!, two.index!.lock_image!, one.index!.stack!]);
  }, 900_000);

  it("takes a distribution with no wheel at the cut-off as its sdist, named or deep in the tree, leaves out one whose build cannot lock, and takes a vendor's local build label as the index's release", async () => {
    // six's label too, though Debian has six: a Debian package that misses the pin goes to the index as asked.
    const res = await run(
      project('index-sdist', ['wl-alpha', 'wl-sdist', 'wl-delta==1.0+cpu', 'six==1.16.0+cpu', 'wl-nosetup']),
      'out9',
      'clone,resolve',
      trusted,
    );
    expect(res.code, `${res.stdout}\n${res.stderr}`).toBe(0);
    const resolved = entry<ResolveRecord>(join(dir, 'out9'), 'resolve').record!;
    // wl-nosetup's sdist names no backend: setuptools, which this index does not have.
    expect(resolved.index?.left_out).toEqual([expect.stringMatching(/^wl-nosetup: no wheel at the cut-off \(its build requirements: .*setuptools/)]);
    expect(resolved.index?.from_sdist).toEqual(['wl-sdist 1.0']);
    const lock = resolved.env?.lock ?? [];
    // The sdist of the cut-off (2.0 came after), its PKG-INFO's dependency, its build requirement as build-only.
    expect(lock.map((d) => `${d.name}==${d.version} ${d.filename}${d.build_only ? ' build-only' : ''}`).sort()).toEqual([
      'six==1.16.0 six-1.16.0-py3-none-any.whl',
      'wl-alpha==1.0 wl_alpha-1.0-py3-none-any.whl',
      'wl-beta==1.0 wl_beta-1.0-py3-none-any.whl',
      'wl-buildtool==1.0 wl_buildtool-1.0-py3-none-any.whl build-only',
      'wl-delta==1.0 wl_delta-1.0-py3-none-any.whl',
      'wl-gamma-dist==1.0 wl_gamma_dist-1.0-py3-none-any.whl',
      'wl-sdist==1.0 wl_sdist-1.0.tar.gz',
    ]);
    for (const d of lock) expect(d.sha256).toMatch(/^[0-9a-f]{64}$/);
    // Asked for by a dependency, not by the project: built all the same, in the offline build
    // container, where its backend finds its build requirement; that requirement is not installed.
    const test =
      'import importlib.util\n\nimport sdist\nimport zeta\n\n\ndef test_built():\n' +
      '    assert sdist.VERSION == "1.0" and zeta.VERSION == "1.0"\n' +
      '    assert importlib.util.find_spec("buildtool") is None\n';
    // wl-broken's build fails: it alone is left out of the image, named in the build record.
    const deep = await run(project('index-sdist-deep', ['wl-zeta', 'wl-broken'], [], test), 'out11', 'clone,resolve,build,validate', trusted);
    expect(deep.code, `${deep.stdout}\n${deep.stderr}`).toBe(0);
    const deeper = entry<ResolveRecord>(join(dir, 'out11'), 'resolve').record!;
    expect(deeper.index?.from_sdist?.sort()).toEqual(['wl-broken 1.0', 'wl-sdist 1.0']);
    expect(deeper.env?.lock?.map((d) => `${d.name}==${d.version}`).sort()).toEqual([
      'wl-broken==1.0',
      'wl-buildtool==1.0',
      'wl-gamma-dist==1.0',
      'wl-sdist==1.0',
      'wl-zeta==1.0',
    ]);
    const built = entry<BuildRecord>(join(dir, 'out11'), 'build').record!;
    expect(built.index?.sdists_not_built).toEqual(['wl-broken']);
    expect(entry<ValidateRecord>(join(dir, 'out11'), 'validate').record, built.image).toMatchObject({ collected: 1, passed: 1 });
    execFileSync('docker', ['rmi', '-f', built.image]);
  }, 900_000);

  it('--index-for all takes every requirement from the index as of the cut-off, and Debian only what the index lacks', async () => {
    const res = await run(project('index-for-all', ['six', 'idna', 'wl-alpha']), 'out16', 'clone,resolve', trusted, ['--index-for', 'all']);
    expect(res.code, `${res.stdout}\n${res.stderr}`).toBe(0);
    const resolved = entry<ResolveRecord>(join(dir, 'out16'), 'resolve').record!;
    // Debian meets six and idna; the index has six (then Debian's stays out) and no idna at all.
    expect(resolved.env?.lock?.map((d) => `${d.name}==${d.version}`).sort()).toEqual(['six==1.16.0', 'wl-alpha==1.0', 'wl-beta==1.0']);
    expect(resolved.env?.apt).toEqual(['python3-idna']);
    expect(resolved.index?.left_out).toEqual(['idna: not on the index at the cut-off']);
  }, 300_000);

  it('drops the older of two branches uv says conflict, exact pins or ranges, and never a line with markers', () => {
    // Exact pins of a CI step's branches (skorch's triton 3.2 and 3.4): uv names them as written.
    const pins = 'Because you require triton==3.2 and triton==3.10, we can conclude that your requirements are unsatisfiable.';
    expect(olderBranch(pins, ['torch>=2', 'Triton == 3.10', 'triton==3.2'])).toBe('triton==3.2');
    expect(olderBranch(pins, ['triton==3.2; python_version<"3"', 'triton==3.10'])).toBeUndefined();
    // Ranges of two CI branches (asyncer's anyio 3 and anyio 4 jobs): uv names them; the older goes.
    const said =
      'Because you require anyio>=3.4.0,<4.0 and anyio>=4.0.0,<5.0, we can conclude that your requirements are unsatisfiable. (No solution found when resolving dependencies)';
    const lines = ['anyio >=3.4.0,<5.0', 'anyio>=4.0.0,<5.0', 'Anyio >= 3.4.0, < 4.0', 'httpx'];
    expect(olderBranch(said, lines)).toBe('Anyio >= 3.4.0, < 4.0');
    expect(olderBranch(said.replace('anyio>=4.0.0,<5.0', 'anyio<3'), ['anyio<3', 'anyio>=3.4.0,<4.0'])).toBe('anyio<3');
    expect(
      olderBranch('Because you require numpy<1 and torch>=2, we can conclude that your requirements are unsatisfiable.', ['numpy<1', 'torch>=2']),
    ).toBeUndefined();
    expect(olderBranch('Because there is no version of wl-x==9 and you require wl-x==9, ...', ['wl-x==9'])).toBeUndefined();
  });

  it('leaves out a Debian package the lock has too, so one version of each project is installed', async () => {
    const res = await run(project('index-shadow', ['six', 'wl-epsilon', 'idna']), 'out10', 'clone,resolve', trusted);
    expect(res.code, `${res.stdout}\n${res.stderr}`).toBe(0);
    const resolved = entry<ResolveRecord>(join(dir, 'out10'), 'resolve').record!;
    expect(resolved.env?.lock?.map((d) => `${d.name}==${d.version}`).sort()).toEqual(['six==1.16.0', 'wl-epsilon==1.0']);
    // idna is Debian's alone; six came in with wl-epsilon's tree, and Debian's is left out.
    expect(resolved.env?.apt).toEqual(['python3-idna']);
    expect(resolved.index?.instead_of_debian).toEqual(['python3-six']);
  }, 300_000);

  it('takes a compiled Debian package from the index when the lock shadows the compiled one it was built against, and says why', async () => {
    const res = await run(project('index-abi', ['scipy', 'wl-kappa', 'idna']), 'out17', 'clone,resolve', trusted);
    expect(res.code, `${res.stdout}\n${res.stderr}`).toBe(0);
    const resolved = entry<ResolveRecord>(join(dir, 'out17'), 'resolve').record!;
    // Debian meets scipy, but its build needs Debian's numpy, which the lock's numpy 9.0 (wl-kappa's) would shadow.
    expect(resolved.env?.lock?.map((d) => `${d.name}==${d.version}`).sort()).toEqual(['numpy==9.0', 'scipy==9.0', 'wl-kappa==1.0']);
    expect(resolved.env?.apt).toEqual(['python3-idna']);
    expect(resolved.index?.moved_to_index).toEqual(["python3-scipy: built against Debian's python3-numpy, which the lock's numpy 9.0 shadows"]);
  }, 300_000);

  it('takes a pure-Python Debian package from the index when the lock shadows a package it depends on', async () => {
    const res = await run(project('index-made-for', ['python-dateutil', 'wl-epsilon', 'idna']), 'out18', 'clone,resolve', trusted);
    expect(res.code, `${res.stdout}\n${res.stderr}`).toBe(0);
    const resolved = entry<ResolveRecord>(join(dir, 'out18'), 'resolve').record!;
    // Debian meets python-dateutil, but its package was made for Debian's six, which the lock's six (wl-epsilon's) would
    // shadow: locked with the tree at Debian's own version, not the index's newest (9.0).
    expect(resolved.env?.lock?.map((d) => `${d.name}==${d.version}`).sort()).toEqual(['python-dateutil==2.8.2', 'six==1.16.0', 'wl-epsilon==1.0']);
    expect(resolved.env?.apt).toEqual(['python3-idna']);
    expect(resolved.index?.moved_to_index).toEqual([
      "python3-dateutil: made for Debian's python3-six, which the lock's six 1.16.0 shadows (at Debian's python-dateutil==2.8.2)",
    ]);
  }, 300_000);

  it('links a file an installed package writes beside itself at import to scratch, so its tests collect in the read-only runs', async () => {
    const test = 'import logbook_wl\n\n\ndef test_logbook():\n    assert logbook_wl.VERSION == "1.0"\n';
    const res = await run(project('index-writes-beside', ['wl-logbook'], [], test), 'out19', 'clone,resolve,build,validate', trusted);
    expect(res.code, `${res.stdout}\n${res.stderr}`).toBe(0);
    const built = entry<BuildRecord>(join(dir, 'out19'), 'build').record!;
    const changes = built.attempts?.flatMap((a) => a.changes) ?? [];
    expect(changes.join('\n')).toMatch(/^ln -sfn \/tmp\/usr_\S+_logbook_wl_wl\.log \/usr\/\S+-packages\/logbook_wl\/wl\.log: PermissionError: \[Errno 13\]/m);
    // Collected whole, with no module set aside: the link, not --continue-on-collection-errors.
    expect(changes.join('\n')).not.toMatch(/continue-on-collection-errors/);
    expect(entry<ValidateRecord>(join(dir, 'out19'), 'validate').record).toMatchObject({ passed: 1, collect_errors: 0 });
  }, 900_000);

  it("takes the index by default when this host's pip reaches one, Debian alone when it does not", async () => {
    // The test run sets WORLDLINE_PIP_INDEX=none (vitest.config.ts); unset, the default is probed.
    const resolvedBy = async (out: string, cert: string) => {
      const res = await cli(['run', '--manifest', project(`index-${out}`, ['wl-gamma-dist']), '--out', join(dir, out), '--stages', 'clone,resolve'], {
        WORLDLINE_PIP_INDEX: '',
        WORLDLINE_INDEX_CACHE: join(dir, 'index-cache'),
        PIP_INDEX_URL: index.url,
        PIP_CERT: cert,
        REQUESTS_CA_BUNDLE: '',
        CURL_CA_BUNDLE: '',
      });
      return { res, resolved: entry<ResolveRecord>(join(dir, out), 'resolve').record };
    };
    const reached = await resolvedBy('out12', trusted);
    expect(reached.res.code, `${reached.res.stdout}\n${reached.res.stderr}`).toBe(0);
    expect(reached.resolved?.index?.mode).toBe('auto');
    expect(reached.resolved?.env?.lock?.map((d) => d.name)).toEqual(['wl-gamma-dist']);
    // An index this host does not trust is not reached: Debian alone, its unresolved requirement said.
    const refused = await resolvedBy('out13', untrusted);
    expect(refused.resolved?.index).toBeUndefined();
    expect(refused.resolved?.unresolved.join('\n')).toMatch(/wl-gamma-dist/);
    // In this process (the served index would wait on it): nothing listening, a find-links folder, the variable.
    const saved = { ...process.env };
    for (const v of ['WORLDLINE_PIP_INDEX', 'REQUESTS_CA_BUNDLE', 'CURL_CA_BUNDLE']) delete process.env[v];
    try {
      expect(defaultPipIndex(new Map([[':env:.index-url', 'https://127.0.0.1:9/simple']]))).toBe('none');
      expect(
        defaultPipIndex(
          new Map([
            [':env:.no-index', '1'],
            [':env:.find-links', join(dir, 'wheels')],
          ]),
        ),
      ).toBe('auto');
      process.env.WORLDLINE_PIP_INDEX = 'https://127.0.0.1:9/simple';
      expect(defaultPipIndex(new Map())).toBe('https://127.0.0.1:9/simple');
    } finally {
      process.env = saved;
    }
  }, 300_000);

  it('repairs a module the tests import and nothing declared from the index, when its wheel holds it, and refuses one that does not', async () => {
    const theta = 'import wl_theta\n\n\ndef test_theta():\n    assert wl_theta.VERSION == "1.0"\n';
    const manifest = project('index-repair', ['wl-gamma-dist'], [], theta, { 'tests/test_iota.py': 'import iota\n\n\ndef test_iota():\n    assert iota\n' });
    const res = await run(manifest, 'out14', 'clone,resolve,build,validate', trusted);
    expect(res.code, `${res.stdout}\n${res.stderr}`).toBe(0);
    const built = entry<BuildRecord>(join(dir, 'out14'), 'build').record!;
    expect(built.env_source).toBe('repaired');
    expect(built.attempts?.[0].changes).toEqual([expect.stringMatching(/^\+wl-theta==1\.0 from the index: ModuleNotFoundError: No module named 'wl_theta'/)]);
    expect(built.attempts?.[0].refused).toEqual(['index: iota 1.0 does not hold the module iota']);
    // wl-theta's own dependency came with it, as of the commit's date (wl-beta 1.0, not 2.0).
    expect(built.env?.lock?.map((d) => `${d.name}==${d.version}`).sort()).toEqual(['wl-beta==1.0', 'wl-gamma-dist==1.0', 'wl-theta==1.0']);
    // iota's module still does not collect: it costs its own tests, not the suite's.
    expect(built.env?.pytest_args).toContain('--continue-on-collection-errors');
    expect(entry<ValidateRecord>(join(dir, 'out14'), 'validate').record).toMatchObject({ passed: 1 });
  }, 900_000);

  it("locks again for the new base's Python when a repair moves the unit there", async () => {
    // Named for 3.11, its tests need 3.12's syntax: the repair moves it to 3.13, and the lock's cp311 wheel would not install there.
    const test = 'import dual\n\ntype Number = int\n\n\ndef test_dual():\n    assert dual.VERSION == "1.0"\n';
    const manifest = project('index-move', ['wl-dual'], ['Programming Language :: Python :: 3.11'], test);
    const res = await run(manifest, 'out15', 'clone,resolve,build,validate', trusted);
    expect(res.code, `${res.stdout}\n${res.stderr}`).toBe(0);
    expect(entry<ResolveRecord>(join(dir, 'out15'), 'resolve').record?.env?.lock?.map((d) => d.filename)).toEqual([
      'wl_dual-1.0-cp311-cp311-manylinux_2_17_x86_64.whl',
    ]);
    const built = entry<BuildRecord>(join(dir, 'out15'), 'build').record!;
    expect(built.python).toBe('3.13');
    expect(built.attempts?.[0].changes).toEqual([expect.stringMatching(/^python 3\.11 -> 3\.13/), 'lock: 1 file(s) for python 3.13']);
    expect(built.env?.lock?.map((d) => d.filename)).toEqual(['wl_dual-1.0-cp313-cp313-manylinux_2_17_x86_64.whl']);
    expect(entry<ValidateRecord>(join(dir, 'out15'), 'validate').record).toMatchObject({ passed: 1 });
  }, 900_000);

  it('names the certificate when the index is not trusted, not a missing distribution', async () => {
    const res = await run(project('index-untrusted', ['wl-alpha']), 'out3', 'clone,resolve', untrusted);
    expect(res.code).toBe(1);
    const reason = entry<ResolveRecord>(join(dir, 'out3'), 'resolve').reason ?? '';
    expect(reason).toMatch(/certificate|UnknownIssuer/i);
    expect(reason).not.toMatch(/No matching distribution/);
  }, 300_000);

  it("refuses a lock that would take a file of this host from outside the index's folders", async () => {
    // The evidence readers drop direct references today; the lock refuses them too, should one get through.
    const outside = join(dir, 'outside');
    mkdirSync(outside);
    execFileSync('python3', ['-c', MAKE_WHEEL, outside, 'wl-evil', '1.0', 'evil', 'py3-none-any']);
    const settings = { ...indexSettings(join(dir, 'wheels'), new Map())!, cert: trusted };
    const uv = join(dir, 'index-cache', 'uv', UV_VERSION, 'uv');
    const lock = (requirements: string[]) => lockRequirements({ uv, settings, requirements, python: '3.11', excludeNewer: COMMIT_DATE });
    process.env.WORLDLINE_INDEX_CACHE = join(dir, 'index-cache');
    try {
      expect(await lock([`wl-evil @ file://${outside}/wl_evil-1.0-py3-none-any.whl`])).toMatchObject({
        failure: expect.stringMatching(
          /^wl-evil would come from \/\S+\/outside\/wl_evil-1\.0-py3-none-any\.whl, a file of this host outside the index's folders$/,
        ),
      });
      expect(await lock(['wl-gamma-dist'])).toMatchObject({ lock: [{ name: 'wl-gamma-dist', url: expect.stringMatching(/^file:\/\//) }] });
    } finally {
      delete process.env.WORLDLINE_INDEX_CACHE;
    }
  }, 300_000);

  it('locks past two branches of one requirement that cannot both hold: the newer kept, the older named in left_out', async () => {
    const settings = { ...indexSettings(index.url, new Map())!, cert: trusted };
    process.env.WORLDLINE_INDEX_CACHE = join(dir, 'index-cache');
    try {
      const uv = await uvBinary(() => {});
      // Two exact pins (a CI step's `if ... triton==3.2 elif ... triton==3.4`) and two ranges (two matrix jobs).
      const requirements = ['wl-alpha', 'wl-beta==0.5', 'Wl-Beta == 1.0', 'wl-delta<1', 'wl-delta>=1'];
      const locked = await lockRequirements({ uv, settings, requirements, python: '3.11', excludeNewer: COMMIT_DATE });
      expect('lock' in locked && locked.lock.map((d) => `${d.name}==${d.version}`).sort()).toEqual(['wl-alpha==1.0', 'wl-beta==1.0', 'wl-delta==1.0']);
      expect([...locked.leftOut].sort()).toEqual([
        'wl-beta==0.5: the older branch of a requirement asked for twice',
        'wl-delta<1: the older branch of a requirement asked for twice',
      ]);
    } finally {
      delete process.env.WORLDLINE_INDEX_CACHE;
    }
  }, 300_000);

  it("moves to the next base in Debian's order that the tree has wheels for, and records why the first did not lock", async () => {
    const manifest = project('index-native', ['wl-native'], ['Programming Language :: Python :: 3.13']);
    const res = await run(manifest, 'out8', 'clone,resolve', trusted);
    expect(res.code, `${res.stdout}\n${res.stderr}`).toBe(0);
    const resolved = entry<ResolveRecord>(join(dir, 'out8'), 'resolve').record!;
    // The project names 3.13, so Debian's order tries it first; wl-native has no wheel for it.
    expect(resolved.python).toBe('3.11');
    expect(resolved.index?.tried).toEqual([expect.stringMatching(/^python 3\.13: .*wl-native/)]);
    expect(resolved.env?.lock?.map((d) => d.filename)).toEqual(['wl_native-1.0-cp311-cp311-manylinux_2_17_x86_64.whl']);
  }, 300_000);

  it('says why when the cut-off leaves no solution, for every base tried', async () => {
    const res = await run(project('index-conflict', ['wl-alpha', 'wl-beta>=2']), 'out4', 'clone,resolve', trusted);
    expect(res.code).toBe(1);
    const reason = entry<ResolveRecord>(join(dir, 'out4'), 'resolve').reason ?? '';
    for (const python of ['3.9', '3.11', '3.13']) expect(reason).toMatch(new RegExp(`python ${python.replace('.', '\\.')}: [^;]*wl-beta`));
  }, 300_000);
});

describe('the index settings and causes, read as pip and uv write them', () => {
  const config = parsePipConfigList(
    [
      ":env:.cert='/env/ca.pem'",
      ":env:.find-links='/opt/wheels'",
      "global.cert='/etc/ssl/certs/ca-certificates.crt'",
      "global.constraint='/etc/xdg/pip/constraints.txt'",
      "global.extra-index-url='file:///opt/pypi/simple file:///opt/pypi-more/simple'",
      "global.index-url='https://mirror.example/simple'",
    ].join('\n'),
  );

  it('takes what pip takes: its variables over its files, every extra index and find-links, the constraint', () => {
    const saved = { r: process.env.REQUESTS_CA_BUNDLE, c: process.env.CURL_CA_BUNDLE };
    process.env.REQUESTS_CA_BUNDLE = '';
    process.env.CURL_CA_BUNDLE = '';
    try {
      expect(indexSettings('auto', config)).toEqual({
        mode: 'auto',
        indexUrl: 'https://mirror.example/simple',
        extraIndexUrls: ['file:///opt/pypi/simple', 'file:///opt/pypi-more/simple'],
        findLinks: ['/opt/wheels'],
        noIndex: false,
        cert: '/env/ca.pem',
        proxy: null,
        constraints: ['/etc/xdg/pip/constraints.txt'],
      });
      // A URL replaces where the index is, never how it is trusted; a folder is the only source.
      expect(indexSettings('https://other.example/simple/', config)).toMatchObject({
        mode: 'url',
        indexUrl: 'https://other.example/simple/',
        extraIndexUrls: [],
        cert: '/env/ca.pem',
      });
      expect(indexSettings('/srv/wheels', config)).toMatchObject({ mode: 'folder', noIndex: true, findLinks: ['/srv/wheels'] });
      expect(indexSettings('none', config)).toBeNull();
      // pip's requests lets this variable win over pip's own cert: the effective trust is what is taken.
      process.env.REQUESTS_CA_BUNDLE = '/requests/ca.pem';
      expect(indexSettings('auto', config)?.cert).toBe('/requests/ca.pem');
    } finally {
      for (const [k, v] of [
        ['REQUESTS_CA_BUNDLE', saved.r],
        ['CURL_CA_BUNDLE', saved.c],
      ] as const) {
        if (v === undefined) delete process.env[k];
        else process.env[k] = v;
      }
    }
  });

  it("names uv's innermost cause with its first error line, and takes dates as uv's cut-off", () => {
    const said = [
      'error: Failed to fetch: `https://127.0.0.1:1/simple/x/`',
      '  Caused by: Request failed after 3 retries',
      '  Caused by: error sending request for url (https://127.0.0.1:1/simple/x/)',
      '  Caused by: invalid peer certificate: UnknownIssuer',
    ].join('\n');
    expect(uvCause(said)).toBe('invalid peer certificate: UnknownIssuer (Failed to fetch: `https://127.0.0.1:1/simple/x/`)');
    expect(cutoffTime('2022-06-01T14:00:00+02:00')).toBe('2022-06-01T12:00:00Z');
    expect(cutoffTime('2024-09-01')).toBe('2024-09-01T00:00:00Z');
    expect(() => cutoffTime('last week')).toThrow(/not a date/);
  });
});
