/**
 * The repair loop's reading of pytest's collect-only output and what it changes, against the real
 * Debian indexes (bookworm, trixie): a module nothing declared becomes the package that ships it,
 * an option, marker, ini key or required plugin pytest did not know becomes the plugin's package,
 * a Python too old moves a line that names none to the newest base, and a module that still does
 * not collect costs only its own tests. The outputs are pytest's own words (7.2 and 8.3).
 */
import { beforeAll, describe, expect, it } from 'vitest';
import { type DebianIndex, loadDebianIndex } from '../pipeline/envs/debian/suite_index.js';
import { diagnose, lastResort, type RepairContext, repair } from '../pipeline/envs/repair/rules.js';
import type { UnitEnv } from '../pipeline/runtime/manifest.js';

const ENV: UnitEnv = { apt: [], pip: [], setup: [], vars: {}, pytest_args: [] };

const MISSING = [
  '==================================== ERRORS ====================================',
  '____________________ ERROR collecting tests/test_iso.py _____________________',
  "ImportError while importing test module '/repo/tests/test_iso.py'.",
  'tests/test_iso.py:3: in <module>',
  '    import six',
  "E   ModuleNotFoundError: No module named 'six'",
  '____________________ ERROR collecting tests/test_yaml.py ____________________',
  "E   ModuleNotFoundError: No module named 'yaml'",
  '____________________ ERROR collecting tests/test_proto.py ___________________',
  "E   ModuleNotFoundError: No module named 'google.protobuf'",
  '!!!!!!!!!!!!!!!!!!! Interrupted: 3 errors during collection !!!!!!!!!!!!!!!!!!!!',
].join('\n');

describe('the repair loop', () => {
  let bookworm: DebianIndex;
  let trixie: DebianIndex;
  const ctx = (index: DebianIndex): RepairContext => ({ index, newest: trixie, canMovePython: true, stoppedAtStart: false });
  beforeAll(async () => {
    [bookworm, trixie] = await Promise.all([loadDebianIndex('bookworm'), loadDebianIndex('trixie')]);
  }, 300_000);

  it('installs the package that ships each module the tests import, all in one try', () => {
    const problems = diagnose(MISSING);
    expect(problems.map((p) => p.kind)).toEqual(['module', 'module', 'module', 'collection']);
    const next = repair(ENV, '3.11', problems, ctx(bookworm))!;
    expect(next.env.apt).toEqual(['python3-protobuf', 'python3-six', 'python3-yaml']);
    expect(next.python).toBe('3.11');
    expect(next.changes[0]).toBe("+python3-six: ModuleNotFoundError: No module named 'six'");
  });

  it('installs the plugin behind an option, marker, ini key or required plugin pytest did not know', () => {
    const output = [
      'ERROR: usage: __main__.py [options] [file_or_dir] [file_or_dir] [...]',
      '__main__.py: error: unrecognized arguments: --cov=src --cov-report=xml -n',
      "'asyncio' not found in `markers` configuration option",
      'pytest.PytestConfigWarning: Unknown config option: timeout_method',
      'ERROR: Missing required plugins: pytest-mock',
    ].join('\n');
    const problems = diagnose(output);
    expect(problems.map((p) => (p.kind === 'plugin' ? p.plugin : p.kind))).toEqual([
      'pytest-cov',
      'pytest-xdist',
      'pytest-asyncio',
      'pytest-timeout',
      'pytest-mock',
    ]);
    expect(repair(ENV, '3.13', problems, ctx(trixie))!.env.apt).toEqual([
      'python3-pytest-asyncio',
      'python3-pytest-cov',
      'python3-pytest-mock',
      'python3-pytest-timeout',
      'python3-pytest-xdist',
    ]);
  });

  it('moves a line that names no Python to the newest base when its code needs it, and never one that names its own', () => {
    const output = "INTERNALERROR> pytest.UsageError: /repo/pyproject.toml: 'minversion' requires pytest-9.0, actual pytest-7.2.1'";
    expect(repair(ENV, '3.11', diagnose(output), ctx(bookworm))).toMatchObject({
      python: '3.13',
      changes: [expect.stringMatching(/^python 3\.11 -> 3\.13 \(trixie\)/)],
    });
    expect(repair(ENV, '3.11', diagnose(output), { ...ctx(bookworm), canMovePython: false })).toBeNull();
    expect(repair(ENV, '3.13', diagnose(output), ctx(trixie))).toBeNull();
    // A plugin that is installed but too old for the configuration (bookworm's pytest-asyncio and
    // tqdm's asyncio_default_fixture_loop_scope): the newest base, its packages kept where it has them.
    const old = { ...ENV, apt: ['python3-pytest-asyncio', 'python3-distutils'] };
    expect(
      repair(old, '3.11', diagnose('INTERNALERROR> pytest.PytestConfigWarning: Unknown config option: asyncio_default_fixture_loop_scope'), ctx(bookworm)),
    ).toMatchObject({
      python: '3.13',
      env: { apt: ['python3-pytest-asyncio'] },
      changes: [expect.stringMatching(/^python 3\.11 -> 3\.13/), '-python3-distutils: not in trixie'],
    });
    // pytest 6's TOML reader gives up on attrs' pyproject before collecting anything.
    expect(repair(ENV, '3.9', [{ kind: 'other', line: 'ValueError: Not a homogeneous array' }], { ...ctx(bookworm), stoppedAtStart: true })?.python).toBe(
      '3.13',
    );
  });

  it('runs the rest of a suite whose module still does not collect, once, and then stops', () => {
    const output = "E   ModuleNotFoundError: No module named 'worldline_nowhere'\n!!!! Interrupted: 1 error during collection !!!!";
    expect(repair(ENV, '3.11', diagnose(output), { ...ctx(bookworm), canMovePython: false })).toBeNull();
    const next = lastResort(ENV, '3.11', diagnose(output))!;
    expect(next.env.pytest_args).toEqual(['--continue-on-collection-errors']);
    expect(lastResort(next.env, '3.11', diagnose(output))).toBeNull();
  });
});
