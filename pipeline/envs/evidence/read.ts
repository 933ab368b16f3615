/**
 * A checkout's environment evidence, read as text and never run: packaging files, requirement
 * files, tox/nox, CI workflows, Pipfile and the pytest configuration. Every requirement keeps the
 * file and line that asked for it and the group it was asked for (runtime, test, dev, ...).
 */
import { Checkout, type Evidence, EvidenceContext } from './context.js';
import { readNoxfile } from './nox.js';
import { readPipfile } from './pipfile.js';
import { readPyproject } from './pyproject.js';
import { readPytestConfigs } from './pytest_config.js';
import { readRequirementFiles } from './requirements.js';
import { readSetupCfg, readSetupPy } from './setuptools.js';
import { readToxIni } from './tox.js';
import { readWorkflows } from './workflows.js';

/**
 * Each reader in turn; one that throws (a hostile file nesting deeper than the parsers' stack, a
 * case no reader foresaw) leaves a note and the others go on.
 */
export function readEvidence(checkoutDir: string): Evidence {
  const ctx = new EvidenceContext(new Checkout(checkoutDir));
  const guarded = <T>(file: string, read: () => T): T | undefined => {
    try {
      return read();
    } catch (e) {
      ctx.note({ file, line: 0 }, `not read: ${(e as Error).message}`);
      return undefined;
    }
  };
  const pyproject = guarded('pyproject.toml', () => readPyproject(ctx));
  guarded('setup.cfg', () => readSetupCfg(ctx));
  guarded('setup.py', () => readSetupPy(ctx));
  guarded('requirements', () => readRequirementFiles(ctx));
  guarded('tox.ini', () => {
    const tox = ctx.checkout.read('tox.ini');
    if (tox !== undefined) readToxIni(ctx, 'tox.ini', tox);
  });
  guarded('noxfile.py', () => readNoxfile(ctx));
  guarded('.github/workflows', () => readWorkflows(ctx));
  guarded('Pipfile', () => readPipfile(ctx));
  guarded('pytest configuration', () => readPytestConfigs(ctx, pyproject));
  ctx.evidence.files = [...ctx.checkout.files].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)).map(([path, sha256]) => ({ path, sha256 }));
  return ctx.evidence;
}
