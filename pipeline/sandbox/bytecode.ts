/**
 * Bytecode made once per environment image, so no run compiles the standard library, pytest or the
 * checkout again: runs set PYTHONDONTWRITEBYTECODE (nothing is written at run time), and without a
 * prefix every one of a task's pytest runs compiled and assert-rewrote the same files (about 230 ms
 * of a 410 ms run in toolz's image). The image sets PYTHONPYCACHEPREFIX, so every container of it
 * (validate, trace, mutant checks, the agent's session, grading) reads bytecode from the prefix.
 *
 * Never stale:
 * - The checkout is compiled with `checked-hash` pycs: every import hashes the source and compiles
 *   it afresh when the content differs, whatever its size and mtime (a patch, a mutant, an edit).
 * - The standard library and installed packages use the default mtime+size pycs: nothing a task
 *   does changes them (a run's root file system is its image's, read-only where it matters).
 * - Our own Python (tracers/, mounted read-only at /worldline/lib in every run) is compiled with
 *   `checked-hash` pycs from the copy the build container is given: the image is not rebuilt when
 *   tracers/ changes, and a run of an edited tree hashes the source, finds it differs and compiles
 *   it in memory, as every run did before (44 ms of a traced run's imports in textstats' image,
 *   9 ms with the pycs). Our own interpreter (the key-holding runner, the mutant driver, the tool
 *   server: our_python.ts) is isolated and writes no bytecode: it ignores PYTHONPYCACHEPREFIX and
 *   never reads these (the standard library's own pycs come with its export).
 * - pytest's assert-rewritten test modules (in the prefix since pytest 6, `get_cache_dir`; the base
 *   images have 6.0.2, 7.2.1 and 8.3.5) are checked by mtime (whole seconds) and size only. That is
 *   safe here because each container's /repo is a `cp -a` of the image's checkout, so an untouched
 *   file keeps the mtime it was cached with, and a file written in a run (agent edit, gold or test
 *   patch, mutant) gets the run's clock, which is later than the image build that cached the old
 *   content: the mtimes differ, pytest rewrites it again. Only a writer that sets an old mtime back
 *   on purpose with the same size (`touch -d`, `cp -p` of an older file) could meet a stale entry.
 *
 * Pycs are keyed to the source path: everything is compiled at the paths runs use (/repo, /usr).
 */
import { shQuote } from '../../core/shell.js';
import { OFFLINE_VARS } from './offline_vars.js';
import { SANDBOX_UID } from './sandbox.js';

/** Where an environment image keeps its bytecode; set as PYTHONPYCACHEPREFIX in the image. */
export const PYCACHE_PREFIX = '/opt/worldline/pyc';

/** How long the build may spend collecting the tests to rewrite them (a hung conftest is not the build's failure). */
const COLLECT_TIMEOUT_S = 300;

/** Around the collect-only run's output in the build's output: what the build's repair loop reads (build.ts `collectOf`). */
export const COLLECT_MARKS = { start: '==== worldline: collect-only ====', end: '==== worldline: collect-only exit ' };

/**
 * Shell lines (as root) compiling everything on the Python's path into the prefix. Stack and lock
 * images (stack_images.ts, lock_images.ts) run them too, so torch's modules are compiled once per
 * stack, not in every unit built on it: the unit's compileall finds their pycs current (mtime and
 * size) and writes nothing.
 */
export function siteBytecodeScript(): string[] {
  const path = `python3 -c 'import os, sys; print("\\n".join(p for p in sys.path[1:] if os.path.isdir(p)))'`;
  return [
    `export PYTHONPYCACHEPREFIX=${PYCACHE_PREFIX}`,
    'unset PYTHONDONTWRITEBYTECODE',
    `${path} | xargs python3 -m compileall -qq -j 0 >/dev/null 2>&1 || true`,
  ];
}

/**
 * The prefix handed to the run user. Only what it does not own yet: a `chown -R` would copy
 * every pyc of the stack below up into the unit's own layer (overlayfs copies a file up to
 * change its owner, even to the owner it has), some 200 MB in a torch unit.
 */
export function prefixToRuns(): string {
  return `mkdir -p ${PYCACHE_PREFIX} && find ${PYCACHE_PREFIX} ! -user ${SANDBOX_UID} -exec chown -h ${SANDBOX_UID}:${SANDBOX_UID} {} +`;
}

/**
 * Shell lines (run as root in /repo once the checkout is committed and copied to the pristine one)
 * filling the prefix. Failures are ignored: a file that does not compile or a suite that does not
 * collect is compiled at run time, as before. The collection runs with the unit's pytest arguments
 * and variables, the model hubs said offline, as its runs will, and its output goes to the
 * build's output between COLLECT_MARKS: what stopped it is what the build repairs in an inferred
 * environment.
 */
export function bytecodeScript(srcLayout: boolean, pytestArgs: string[], vars: Record<string, string>): string[] {
  const env = Object.entries({ ...OFFLINE_VARS, ...vars, PYTHONPATH: [srcLayout ? '/repo/src' : '', vars.PYTHONPATH].filter(Boolean).join(':') })
    .map(([k, v]) => `${k}=${shQuote(v)}`)
    .join(' ');
  return [
    ...siteBytecodeScript(),
    `python3 -m compileall -qq -j 0 --invalidation-mode checked-hash /repo >/dev/null 2>&1 || true`,
    `python3 -m compileall -qq -j 0 --invalidation-mode checked-hash /worldline/lib >/dev/null 2>&1 || true`,
    'rm -rf /worldline/lib',
    // Collecting imports every test module through pytest's rewriting hook, which writes its cache.
    // /repo here is the image's own copy, hidden by each container's own /repo and already copied
    // to the pristine checkout, so what a conftest writes while collecting reaches no run.
    // It runs as the user every run is (sandbox.ts), with its HOME: what a test module cannot do
    // there at import (write into its package's folder, as nnsight's log does under SAELens)
    // stops its collection here too, where the build can still set the module aside.
    `chown -R ${SANDBOX_UID}:${SANDBOX_UID} /repo && ${prefixToRuns()}`,
    `echo ${shQuote(COLLECT_MARKS.start)}`,
    // Its end is what says why it stopped (the errors come after the node ids): the last 256 KiB, then its exit status.
    `( set +e; env ${env} HOME=/tmp timeout ${COLLECT_TIMEOUT_S} setpriv --reuid=${SANDBOX_UID} --regid=${SANDBOX_UID} --clear-groups python3 -m pytest --collect-only -q -p no:cacheprovider ${pytestArgs.map(shQuote).join(' ')} </dev/null 2>&1; echo "${COLLECT_MARKS.end}$? ====" ) | tail -c 262144`,
  ];
}
