/**
 * Our own Python in every container, out of the repository's reach. A unit's build runs its
 * setup steps as root in a layer of its image: it may rewrite the standard library (hmac.py),
 * the interpreter, libc, libcrypto, the dynamic loader or /etc/ld.so.preload, and every program of
 * the image runs what it wrote. So the processes that hold the report key or speak for us (the
 * suite runner, the mutant driver, the tool server, the agent's file tools) run on the BASE
 * image's Python instead: exported once per base image into the machine cache
 * (`<cache>/python/<base id>`: the interpreter, its standard library, the shared libraries of
 * its lib folders, absolute links made relative so none leads out), mounted read-only at
 * /worldline/py in every container, and started through its own loader with its own library
 * path and no ld.so.cache (`--inhibit-cache`), isolated (`-I -S -B`), in an environment of ours
 * (OUR_ENV, `ourEnv`): no locale file or charset module of the image is read (LC_ALL=C), nor its
 * OpenSSL configuration, providers or engines (libcrypto reads them when hashlib is imported,
 * before the key is taken: a config naming a provider in the image ran its code in the key
 * holder), nor its time zone files; every other variable of the image's is set empty.
 * /etc/ld.so.preload is an empty file of ours in every run. The runner checks /proc/self/maps at
 * start and refuses to go on when a file is mapped from anywhere else (tracers/worldline_runs.py).
 * docs/sandbox.md lists what our processes read, and why each is safe.
 *
 * The tracers folder goes into containers the same way, as a copy in the cache
 * (`<cache>/lib/<hash>`), so /proc/self/mountinfo names no folder of the host's checkout.
 *
 * An env image names its base in the label `worldline.base` (pipeline/stages/build.ts); an image
 * without it (a base image itself, or one a user named) is its own base.
 */
import { execFile as execFileCb, spawn } from 'node:child_process';
import { cpSync, existsSync, lstatSync, mkdirSync, readdirSync, readFileSync, readlinkSync, renameSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { dirname, join, relative } from 'node:path';
import { promisify } from 'node:util';
import { hashTree } from '../../core/hashing.js';
import { withLock } from '../../core/lock.js';
import { cacheDir } from '../runtime/layout.js';
import { docker, newContainer } from './engine.js';
import { tracersDir } from './tracers.js';

const execFile = promisify(execFileCb);

/** A command's word that stands for our interpreter: `[OUR_PYTHON, script, ...args]`. */
export const OUR_PYTHON = 'worldline:python';
/** Where containers see our interpreter's tree. */
const MOUNT = '/worldline/py';
/** Files of ours in every export (made by exportPython): an empty OpenSSL configuration, an empty folder. */
const OURS = `${MOUNT}/worldline`;
/**
 * The environment our processes start with, over the image's: the C locale (built into libc: no
 * locale archive, no gconv module), an empty OpenSSL configuration of ours in place of the image's
 * /usr/lib/ssl/openssl.cnf and an empty folder for its providers and engines (sha256 is built into
 * libcrypto), a time zone given as a rule (`UTC0`) whose lookup as a file finds nothing in our
 * empty folder, so neither /etc/localtime nor the image's zoneinfo is parsed.
 */
const OUR_ENV: Record<string, string> = {
  LC_ALL: 'C',
  OPENSSL_CONF: `${OURS}/openssl.cnf`,
  OPENSSL_MODULES: `${OURS}/empty`,
  OPENSSL_ENGINES: `${OURS}/empty`,
  TZ: 'UTC0',
  TZDIR: `${OURS}/empty`,
};
/** Bump when what an export holds or how it is started changes. */
const EXPORT_REVISION = 2;

/** What a container needs to run our Python: its argv (before the script) and the mounts. */
export interface OurPython {
  argv: string[];
  binds: string[];
  /** The image's own environment (its ENV), for the variables OUR_ENV sets over. */
  imageEnv: Record<string, string>;
}

interface Exported {
  loader: string;
  python: string;
  libs: string[];
  version: string;
}

/** The interpreter's files: its binaries, its standard library, the shared libraries (tar patterns of a `docker export`). */
const MEMBERS = ['usr/bin/python3*', 'usr/local/bin/python3*', 'usr/lib/python3.*', 'usr/lib/*-linux-gnu*', 'usr/lib64', 'lib', 'lib64', 'usr/local/lib'];

/**
 * Run once on an export, as root in a container of the base image: compiles what of the standard
 * library has no bytecode yet (our runs cannot write it) and names every mapped file from
 * outside the tree (there must be none) once the modules our processes use are loaded.
 */
const VERIFY = [
  'import compileall, ctypes, hashlib, hmac, json, os, select, signal, socket, subprocess, sys, threading',
  'import _hashlib',
  'compileall.compile_dir(os.path.dirname(os.__file__), quiet=2, workers=0)',
  // Memory-backed files (libffi's memfd trampolines) lie on the device of a memfd; an image's file named /memfd:... does not.
  'fd = os.memfd_create("probe"); dev = os.fstat(fd).st_dev; memory = "%02x:%02x" % (os.major(dev), os.minor(dev))',
  'maps = [f for f in (l.split(None, 5) for l in open("/proc/self/maps")) if len(f) == 6]',
  `outside = sorted({f[5].strip() for f in maps if f[5].startswith("/") and not f[5].startswith("${MOUNT}/") and not (f[5].startswith(("/memfd:", "/dev/zero")) and f[3] == memory)})`,
  'print(json.dumps({"version": sys.version.split()[0], "outside": outside, "prefix": sys.prefix}))',
].join('\n');

/** `path` resolved inside `root` as a chroot would (absolute links lead to root, not the host's /); relative to root. */
function resolveIn(root: string, path: string): string {
  const todo = path.split('/').filter(Boolean);
  const done: string[] = [];
  for (let hops = 0; todo.length; ) {
    const part = todo.shift() as string;
    if (part === '..') done.pop();
    else if (part !== '.') {
      const here = join(root, ...done, part);
      if (lstatSync(here, { throwIfNoEntry: false })?.isSymbolicLink()) {
        if (++hops > 40) throw new Error(`too many links resolving ${path}`);
        const target = readlinkSync(here);
        if (target.startsWith('/')) done.length = 0;
        todo.unshift(...target.split('/').filter(Boolean));
      } else done.push(part);
    }
  }
  return done.join('/');
}

/** Every absolute link under `root` made relative, so that it resolves inside the tree wherever the tree is mounted. */
function relativizeLinks(root: string, rel = ''): void {
  for (const entry of readdirSync(join(root, rel), { withFileTypes: true })) {
    const path = rel ? `${rel}/${entry.name}` : entry.name;
    if (entry.isSymbolicLink()) {
      const target = readlinkSync(join(root, path));
      if (target.startsWith('/')) {
        rmSync(join(root, path));
        symlinkSync(relative(dirname(join('/', path)), target) || '.', join(root, path));
      }
    } else if (entry.isDirectory()) relativizeLinks(root, path);
  }
}

/** The program interpreter (PT_INTERP) an ELF executable names: the dynamic loader. */
function elfInterpreter(file: string): string {
  const elf = readFileSync(file);
  if (elf.readUInt32BE(0) !== 0x7f454c46 || elf[4] !== 2 || elf[5] !== 1) throw new Error(`${file} is no 64-bit little-endian ELF`);
  const phoff = Number(elf.readBigUInt64LE(0x20));
  const size = elf.readUInt16LE(0x36);
  for (let i = 0; i < elf.readUInt16LE(0x38); i++) {
    const at = phoff + i * size;
    if (elf.readUInt32LE(at) !== 3) continue;
    const offset = Number(elf.readBigUInt64LE(at + 8));
    return elf
      .subarray(offset, offset + Number(elf.readBigUInt64LE(at + 32)))
      .toString('latin1')
      .replace(/\0+$/, '');
  }
  throw new Error(`${file} names no program interpreter`);
}

/** Where in an export its python3, loader and library folders are (paths relative to the export). */
function locate(root: string): Omit<Exported, 'version'> {
  const python = ['usr/local/bin/python3', 'usr/bin/python3'].map((p) => resolveIn(root, p)).find((p) => existsSync(join(root, p)));
  if (!python) throw new Error('the base image has no python3 in /usr/local/bin or /usr/bin');
  const loader = resolveIn(root, elfInterpreter(join(root, python)));
  const arches = existsSync(join(root, 'usr/lib')) ? readdirSync(join(root, 'usr/lib')).filter((d) => /-linux-/.test(d)) : [];
  const candidates = ['usr/local/lib', ...arches.flatMap((a) => [`lib/${a}`, `usr/lib/${a}`]), 'lib64', 'usr/lib64', 'lib', 'usr/lib'];
  const libs = [...new Set(candidates.map((c) => resolveIn(root, c)))].filter((d) => d && existsSync(join(root, d)));
  return { python, loader, libs };
}

/** Runs `cmd` as root in a container of `image` with `dir` at MOUNT (writable): its output. */
async function runWithExport(image: string, dir: string, cmd: string[]): Promise<string> {
  const container = await newContainer({
    Image: image,
    Cmd: cmd,
    User: '0:0',
    Env: Object.entries(OUR_ENV).map(([k, v]) => `${k}=${v}`),
    NetworkDisabled: true,
    HostConfig: {
      NetworkMode: 'none',
      Binds: [`${dir}:${MOUNT}`],
      CapDrop: ['ALL'],
      SecurityOpt: ['no-new-privileges'],
      LogConfig: { Type: 'none', Config: {} },
    },
  });
  try {
    let text = '';
    const sink = {
      write: (chunk: Buffer) => {
        text += chunk.toString('utf8');
        return true;
      },
    } as unknown as NodeJS.WritableStream;
    const stream = await container.attach({ stream: true, stdout: true, stderr: true });
    const ended = new Promise((resolve) => stream.on('end', resolve).on('close', resolve).on('error', resolve));
    docker().modem.demuxStream(stream, sink, sink);
    await container.start();
    const { StatusCode } = (await container.wait()) as { StatusCode: number };
    await Promise.race([ended, new Promise((resolve) => setTimeout(resolve, 5000).unref())]);
    (stream as unknown as { destroy(): void }).destroy();
    if (StatusCode !== 0) throw new Error(`our interpreter does not start in ${image} (exit ${StatusCode}): ${text.trim().slice(-500)}`);
    return text;
  } finally {
    await container.remove({ force: true }).catch(() => undefined);
  }
}

function argvOf(e: Exported): string[] {
  return [`${MOUNT}/${e.loader}`, '--inhibit-cache', '--library-path', e.libs.map((l) => `${MOUNT}/${l}`).join(':'), `${MOUNT}/${e.python}`, '-I', '-S', '-B'];
}

/** Exports `base`'s interpreter into `dir` (once per machine: a lock, then a rename). */
async function exportPython(base: string, dir: string): Promise<Exported> {
  const tmp = `${dir}.tmp-${process.pid}`;
  rmSync(tmp, { recursive: true, force: true });
  mkdirSync(tmp, { recursive: true });
  try {
    const container = await newContainer({ Image: base, Cmd: ['true'] });
    try {
      const tar = spawn('tar', ['-x', '-C', tmp, '--wildcards', '--no-same-owner', ...MEMBERS], { stdio: ['pipe', 'ignore', 'pipe'] });
      let err = '';
      tar.stderr.on('data', (d) => (err += d));
      const done = new Promise<number | null>((resolve) => tar.on('close', resolve));
      const archive = (await container.export()) as NodeJS.ReadableStream & { destroy(): void };
      archive.pipe(tar.stdin);
      // tar stops at the archive's end marker: what the engine sends after it would hold the connection open.
      done.finally(() => archive.destroy());
      // tar exits 2 when a pattern matched nothing (usr/local/bin/python3* on a Debian base): what it did extract is what counts.
      if (!((await done) === 0 || /Not found in archive/.test(err))) throw new Error(`cannot export the interpreter of ${base}: ${err.trim().slice(-300)}`);
    } finally {
      await container.remove({ force: true }).catch(() => undefined);
    }
    relativizeLinks(tmp);
    mkdirSync(join(tmp, 'worldline', 'empty'), { recursive: true });
    writeFileSync(join(tmp, 'worldline', 'openssl.cnf'), "# Worldline: no configuration (our processes read this, never the image's openssl.cnf)\n");
    const found = locate(tmp);
    const probe = JSON.parse((await runWithExport(base, tmp, [...argvOf({ ...found, version: '' }), '-c', VERIFY])).trim().split('\n').pop() as string) as {
      version: string;
      outside: string[];
    };
    if (probe.outside.length) throw new Error(`our interpreter from ${base} maps files from outside its tree: ${probe.outside.join(', ')}`);
    const exported = { ...found, version: probe.version };
    writeFileSync(join(tmp, 'worldline-python.json'), JSON.stringify(exported));
    await execFile('chmod', ['-R', 'a+rX,go-w', tmp]);
    rmSync(dir, { recursive: true, force: true });
    renameSync(tmp, dir);
    return exported;
  } catch (e) {
    rmSync(tmp, { recursive: true, force: true });
    throw e;
  }
}

const exportsMade = new Map<string, Promise<Exported>>();

/** `base`'s interpreter, exported when the cache does not hold it yet. */
function exportedPython(base: string): Promise<Exported> {
  const dir = pythonDir(base);
  let p = exportsMade.get(dir);
  if (!p) {
    const read = () => JSON.parse(readFileSync(join(dir, 'worldline-python.json'), 'utf8')) as Exported;
    p = existsSync(join(dir, 'worldline-python.json'))
      ? Promise.resolve(read())
      : withLock(join(cacheDir(), 'locks', `python-${base.replace(/^sha256:/, '').slice(0, 16)}`), async () =>
          existsSync(join(dir, 'worldline-python.json')) ? read() : exportPython(base, dir),
        );
    p.catch(() => exportsMade.delete(dir));
    exportsMade.set(dir, p);
  }
  return p;
}

const pythonDir = (base: string) => join(cacheDir(), 'python', `${base.replace(/^sha256:/, '').slice(0, 16)}-r${EXPORT_REVISION}`);

const facts = new Map<string, Promise<{ base: string; env: Record<string, string> }>>();

/** An image's base (its `worldline.base` label, else itself) and its own environment, asked once per image. */
function imageFacts(image: string): Promise<{ base: string; env: Record<string, string> }> {
  let p = facts.get(image);
  if (!p) {
    p = docker()
      .getImage(image)
      .inspect()
      .then((info) => {
        const labels = info.Config?.Labels ?? {};
        // An env image without it was built before our interpreter came from its base: its own Python is the build's.
        if (labels['worldline.unit'] && !labels['worldline.base'])
          throw new Error(`environment image ${image} names no base image (built by an older Worldline): build it again`);
        return {
          base: labels['worldline.base'] || info.Id,
          env: Object.fromEntries((info.Config?.Env ?? []).map((kv) => [kv.slice(0, kv.indexOf('=')), kv.slice(kv.indexOf('=') + 1)])),
        };
      });
    p.catch(() => facts.delete(image));
    facts.set(image, p);
  }
  return p;
}

let lib: string | null = null;

/**
 * The tracers folder as containers see it at /worldline/lib: a copy in the machine cache, named
 * by its content (made once per content; a process sees the tree as it was at its first container).
 */
export function libDir(): string {
  if (lib) return lib;
  const dir = join(cacheDir(), 'lib', hashTree(tracersDir, ''));
  if (!existsSync(dir)) {
    const tmp = `${dir}.tmp-${process.pid}`;
    rmSync(tmp, { recursive: true, force: true });
    cpSync(tracersDir, tmp, { recursive: true, filter: (src) => !src.endsWith('/__pycache__') });
    try {
      renameSync(tmp, dir);
    } catch {
      // Another process made it meanwhile: the same content.
      rmSync(tmp, { recursive: true, force: true });
    }
  }
  lib = dir;
  return dir;
}

/** An empty file of ours, mounted over /etc/ld.so.preload in every run: the build may have written one. */
export function emptyFile(): string {
  const file = join(cacheDir(), 'python', 'empty');
  if (!existsSync(file)) {
    mkdirSync(dirname(file), { recursive: true });
    writeFileSync(file, '');
  }
  return file;
}

/** Our interpreter for containers of `image`: its argv and the mounts it needs. */
export async function ourPython(image: string): Promise<OurPython> {
  const { base, env } = await imageFacts(image);
  const exported = await exportedPython(base);
  return { argv: argvOf(exported), binds: [`${pythonDir(base)}:${MOUNT}:ro`], imageEnv: env };
}

/** `cmd` with every OUR_PYTHON word replaced by `argv`. */
export function expandOurPython(cmd: string[], argv: string[]): string[] {
  return cmd.flatMap((word) => (word === OUR_PYTHON ? argv : [word]));
}

/**
 * The environment of a process of ours in a container of an image whose ENV is `imageEnv`: OUR_ENV,
 * and every other variable of the image's set empty but those in `keep`. The engine gives every
 * process of a container its image's variables, and the loader, libc and libcrypto read theirs
 * before any code of ours runs (LD_PRELOAD, LD_AUDIT, GLIBC_TUNABLES, GCONV_PATH, LOCPATH,
 * OPENSSL_*, SSL_CERT_*...): a user's base image may set any of them.
 */
export function ourEnv(imageEnv: Record<string, string>, keep: string[]): Record<string, string> {
  return { ...Object.fromEntries(Object.keys(imageEnv).flatMap((k) => (keep.includes(k) ? [] : [[k, '']]))), ...OUR_ENV };
}

/**
 * How the environment of the suite (or of the agent's commands) differs from that of our processes
 * in the same container: the variables of ours (`ours`: OUR_ENV's, the image's we set empty, the
 * sandbox's for us alone) dropped, or put back as the image had them, and the suite's own set.
 */
export function suiteEnvChange(
  imageEnv: Record<string, string>,
  suite: Record<string, string>,
  ours: string[],
): { set: Record<string, string>; drop: string[] } {
  const restored = Object.fromEntries(ours.flatMap((k) => (k in imageEnv ? [[k, imageEnv[k]]] : [])));
  return { set: { ...restored, ...suite }, drop: ours };
}
