/**
 * Reading a Debian mirror over plain HTTP. A suite's InRelease lists every index file with its
 * SHA256; an index file is gzip (its CRC makes a truncated download an error) and is returned with
 * the SHA256 of what was read, which is what a cache is keyed by. A mirror may serve an index file
 * of another moment than its InRelease (seen: trixie's Contents-all.gz, with by-hash absent), so a
 * difference is reported to the caller, not fatal. A pool .deb must match the SHA256 its Packages
 * entry gives. InRelease's signature is not checked here: the index only guides which package
 * names a build asks apt for, and apt checks what it installs.
 */
import { execFile as execFileCb } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { StringDecoder } from 'node:string_decoder';
import { promisify } from 'node:util';
import { createGunzip, gunzipSync } from 'node:zlib';
import { debianMirror } from '../../runtime/layout.js';
import type { DebianSuite } from '../../runtime/manifest.js';

const execFile = promisify(execFileCb);

export interface Release {
  suite: DebianSuite;
  /** InRelease's Date field. */
  date: string;
  /** Path under dists/<suite>/ -> SHA256. */
  sha256: Map<string, string>;
}

async function get(url: string): Promise<Response> {
  const res = await fetch(url);
  if (!res.ok || !res.body) throw new Error(`GET ${url}: HTTP ${res.status}`);
  return res;
}

export async function fetchRelease(suite: DebianSuite): Promise<Release> {
  const text = await (await get(`${debianMirror()}/dists/${suite}/InRelease`)).text();
  const date = /^Date: (.*)$/m.exec(text)?.[1] ?? '';
  const block = /^SHA256:\n((?: .*\n)+)/m.exec(text)?.[1] ?? '';
  const sha256 = new Map<string, string>();
  for (const line of block.split('\n')) {
    const [hash, , path] = line.trim().split(/\s+/);
    if (path) sha256.set(path, hash);
  }
  if (!sha256.size) throw new Error(`${suite} InRelease lists no SHA256 sums`);
  return { suite, date, sha256 };
}

/** SHA256 of what was read; `listed` says whether InRelease lists that same file. */
export interface Fetched {
  sha256: string;
  listed: boolean;
}

function fetched(release: Release, path: string, sha256: string): Fetched {
  return { sha256, listed: release.sha256.get(path) === sha256 };
}

/** A small gzipped index file (`main/binary-amd64/Packages.gz`), decompressed. */
export async function fetchGzipText(release: Release, path: string): Promise<{ text: string; fetched: Fetched }> {
  const data = Buffer.from(await (await get(`${debianMirror()}/dists/${release.suite}/${path}`)).arrayBuffer());
  const sha256 = createHash('sha256').update(data).digest('hex');
  return { text: gunzipSync(data).toString('utf8'), fetched: fetched(release, path, sha256) };
}

/**
 * Each line of a large gzipped index (`main/Contents-all.gz`, hundreds of MB unpacked) that starts
 * with one of `prefixes`, streamed: the file is never held whole. A caller keeps what it collected
 * only once this resolves (a broken download rejects).
 */
export async function streamGzipLines(release: Release, path: string, prefixes: string[], onLine: (line: string) => void): Promise<Fetched> {
  const res = await get(`${debianMirror()}/dists/${release.suite}/${path}`);
  const hash = createHash('sha256');
  const gunzip = createGunzip();
  const decoder = new StringDecoder('utf8');
  let rest = '';
  const take = (text: string) => {
    const lines = (rest + text).split('\n');
    rest = lines.pop() ?? '';
    for (const line of lines) if (prefixes.some((p) => line.startsWith(p))) onLine(line);
  };
  const done = new Promise<void>((resolve, reject) => {
    gunzip.on('data', (chunk: Buffer) => take(decoder.write(chunk)));
    gunzip.on('end', () => {
      take(`${decoder.end()}\n`);
      resolve();
    });
    gunzip.on('error', reject);
  });
  for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) {
    hash.update(chunk);
    if (!gunzip.write(chunk)) await new Promise((r) => gunzip.once('drain', r));
  }
  gunzip.end();
  await done;
  return fetched(release, path, hash.digest('hex'));
}

/** One file's text from a pool .deb (`pool/main/...`), whose SHA256 the Packages index gave. */
export async function debFileText(poolPath: string, sha256: string, member: string, scratch: string): Promise<string> {
  const url = `${debianMirror()}/${poolPath}`;
  const data = Buffer.from(await (await get(url)).arrayBuffer());
  const got = createHash('sha256').update(data).digest('hex');
  if (got !== sha256) throw new Error(`${url}: SHA256 ${got} where the Packages index says ${sha256}`);
  mkdirSync(scratch, { recursive: true });
  const dir = mkdtempSync(join(scratch, 'deb-'));
  try {
    writeFileSync(join(dir, 'package.deb'), data);
    await execFile('dpkg-deb', ['-x', join(dir, 'package.deb'), join(dir, 'root')]);
    return readFileSync(join(dir, 'root', member), 'utf8');
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
