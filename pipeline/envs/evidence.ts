/**
 * A checkout's environment evidence, read as text and never run: packaging files, requirement
 * files, tox/nox, CI workflows, Pipfile and the pytest configuration. Every requirement keeps the
 * file and line that asked for it and the group it was asked for (runtime, test, dev, ...).
 */
import { Checkout, type Evidence, EvidenceContext } from './evidence_context.js';
import { readNoxfile } from './evidence_nox.js';
import { readPipfile } from './evidence_pipfile.js';
import { readPyproject } from './evidence_pyproject.js';
import { readRequirementFiles } from './evidence_requirements.js';
import { readSetupCfg, readSetupPy } from './evidence_setuptools.js';
import { readToxIni } from './evidence_tox.js';
import { readWorkflows } from './evidence_workflows.js';
import { readPytestConfigs } from './pytest_config.js';

export function readEvidence(checkoutDir: string): Evidence {
  const ctx = new EvidenceContext(new Checkout(checkoutDir));
  const pyproject = readPyproject(ctx);
  readSetupCfg(ctx);
  readSetupPy(ctx);
  readRequirementFiles(ctx);
  const tox = ctx.checkout.read('tox.ini');
  if (tox !== undefined) readToxIni(ctx, 'tox.ini', tox);
  readNoxfile(ctx);
  readWorkflows(ctx);
  readPipfile(ctx);
  readPytestConfigs(ctx, pyproject);
  ctx.evidence.files = [...ctx.checkout.files].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)).map(([path, sha256]) => ({ path, sha256 }));
  return ctx.evidence;
}
