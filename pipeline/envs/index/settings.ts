/**
 * Where the Python Package Index is, and how it is trusted, for `--pip-index`: `auto` reads this
 * host's own pip configuration as pip reads it (`python3 -m pip config list`: its files and PIP_*
 * variables, the variables winning), so a company's mirror, extra indexes, find-links, certificate
 * authority, proxy and constraint files serve Worldline as they serve its users' pip; a URL or a
 * folder names the index and keeps the host's trust (certificate, proxy); `none` is Debian alone,
 * offline. Containers never see any of it: resolving and downloading happen on the host (lock.ts,
 * download.ts), builds install from the cache.
 */
import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { isAbsolute, resolve } from 'node:path';

export interface IndexSettings {
  mode: 'auto' | 'url' | 'folder';
  /** Null: the resolver's default (pypi.org). */
  indexUrl: string | null;
  extraIndexUrls: string[];
  findLinks: string[];
  /** Only find-links, no index at all (a folder of wheels). */
  noIndex: boolean;
  /** A certificate bundle to trust instead of the system's. */
  cert: string | null;
  proxy: string | null;
  constraints: string[];
}

const isUrl = (s: string) => /^[a-z][a-z0-9+.-]*:\/\//i.test(s);

/** `section.key='value'` lines of `pip config list`, as a map from `section.key`. */
export function parsePipConfigList(text: string): Map<string, string> {
  const values = new Map<string, string>();
  for (const line of text.split('\n')) {
    const m = /^([^.=\s]+)\.([a-z0-9-]+)='(.*)'$/i.exec(line.trim());
    if (m) values.set(`${m[1]}.${m[2].toLowerCase()}`, m[3]);
  }
  return values;
}

let hostConfig: Map<string, string> | undefined;

/** What this host's pip says, read once per process (empty when there is no pip: then only the resolver's defaults). */
function hostPipConfig(): Map<string, string> {
  try {
    hostConfig ??= parsePipConfigList(
      execFileSync('python3', ['-m', 'pip', 'config', 'list'], { encoding: 'utf8', timeout: 30_000, stdio: ['ignore', 'pipe', 'ignore'] }),
    );
  } catch {
    hostConfig = new Map();
  }
  return hostConfig;
}

/**
 * One setting as pip would take it for an install: its variable (`:env:`, from PIP_*) over the
 * `install` section over `global` (pip config list already merged the files in pip's order).
 */
function setting(config: Map<string, string>, key: string): string | undefined {
  return config.get(`:env:.${key}`) ?? config.get(`install.${key}`) ?? config.get(`global.${key}`);
}

/** pip takes `[user:passwd@]proxy.server:port` without a scheme; uv and Node need one. */
const proxyUrl = (p: string | undefined) => (p ? (isUrl(p) ? p : `http://${p}`) : null);
const words = (value: string | undefined) => (value ?? '').split(/\s+/).filter(Boolean);
const pathOrUrl = (s: string) => (isUrl(s) || isAbsolute(s) ? s : resolve(s));

/** The settings `--pip-index` names (see the top of this file); null for `none`. */
export function indexSettings(given: string, config: Map<string, string> = hostPipConfig()): IndexSettings | null {
  if (given === 'none') return null;
  const trust = {
    // pip's requests takes these variables over pip's own `cert` when they are set: so does pip here.
    cert: process.env.REQUESTS_CA_BUNDLE || process.env.CURL_CA_BUNDLE || setting(config, 'cert') || null,
    proxy: proxyUrl(setting(config, 'proxy')),
    constraints: words(setting(config, 'constraint')).map(pathOrUrl),
  };
  if (given === 'auto') {
    return {
      mode: 'auto',
      indexUrl: setting(config, 'index-url') ?? null,
      extraIndexUrls: words(setting(config, 'extra-index-url')),
      findLinks: words(setting(config, 'find-links')).map(pathOrUrl),
      noIndex: /^(1|true|yes|on)$/i.test(setting(config, 'no-index') ?? ''),
      ...trust,
    };
  }
  if (isUrl(given)) return { mode: 'url', indexUrl: given, extraIndexUrls: [], findLinks: [], noIndex: false, ...trust };
  return { mode: 'folder', indexUrl: null, extraIndexUrls: [], findLinks: [resolve(given)], noIndex: true, ...trust };
}

/** Whether an index answers an HTTP request (any status below 500) with the host's trust and proxy, within five seconds. */
const ANSWERS = [
  'import ssl, sys, urllib.error, urllib.request',
  'url, cafile, proxy = sys.argv[1:4]',
  'handlers = [urllib.request.HTTPSHandler(context=ssl.create_default_context(cafile=cafile or None))]',
  'if proxy: handlers.append(urllib.request.ProxyHandler({"http": proxy, "https": proxy}))',
  'try: urllib.request.build_opener(*handlers).open(urllib.request.Request(url, method="HEAD"), timeout=5)',
  'except urllib.error.HTTPError as e: sys.exit(0 if e.code < 500 else 1)',
  'except Exception: sys.exit(1)',
].join('\n');

/**
 * `--pip-index`'s default: WORLDLINE_PIP_INDEX when set; else `auto` when this host's pip reaches an
 * index (its index URL, or pypi.org when it names none, answers; or its find-links folder is
 * there), else `none`: a connected host builds from the index as its users' pip does, an offline
 * one stays with Debian alone instead of failing every unit on a dead index.
 */
export function defaultPipIndex(config: Map<string, string> = hostPipConfig()): string {
  const given = process.env.WORLDLINE_PIP_INDEX;
  if (given) return given;
  const s = indexSettings('auto', config)!;
  if (s.findLinks.some((f) => !isUrl(f) && existsSync(f)) && s.noIndex) return 'auto';
  if (s.noIndex) return 'none';
  const url = `${(s.indexUrl ?? 'https://pypi.org/simple').replace(/\/+$/, '')}/pip/`;
  if (url.startsWith('file://')) return existsSync(new URL(url).pathname) ? 'auto' : 'none';
  try {
    execFileSync('python3', ['-c', ANSWERS, url, s.cert ?? '', s.proxy ?? ''], { stdio: 'ignore', timeout: 15_000 });
    return 'auto';
  } catch {
    return 'none';
  }
}
