/**
 * noxfile.py, parsed and never run: each session's `session.install(...)` arguments (string
 * literals and names assigned them), its `session.run("pytest", ...)` invocation, and the Python
 * versions `@nox.session(python=...)` names. A session that runs pytest installs test requirements.
 */

import { pipInstallArgs } from '../requirements/file.js';
import { type EvidenceContext, type Group, groupOfName } from './context.js';
import { argsAfterPytest } from './pytest_invocation.js';
import { type CallSite, PythonSource, type Value } from './python_source.js';

const FILE = 'noxfile.py';

/** The strings among a call's arguments, `*names` included. */
function words(src: PythonSource, call: CallSite): { words: string[]; line: number } {
  const out: string[] = [];
  const take = (v: Value) => {
    if (v.t === 'str') out.push(v.v);
    else if (v.t === 'list') v.items.forEach(take);
  };
  for (const arg of call.args) take(src.evaluate(arg));
  for (const [key, node] of call.kwargs) if (key === null) take(src.evaluate(node));
  return { words: out, line: call.line };
}

export function readNoxfile(ctx: EvidenceContext): void {
  const text = ctx.checkout.read(FILE);
  if (text === undefined) return;
  const src = new PythonSource(text);
  const ev = ctx.evidence;
  for (const call of src.calls((c) => c === 'nox.session' || c === 'session')) {
    const python = call.kwargs.find(([k]) => k === 'python' || k === 'pythons');
    const value = python ? src.evaluate(python[1]) : undefined;
    for (const v of value?.t === 'list' ? value.items : value ? [value] : []) {
      if (v.t === 'str' && /^3\.\d+$/.test(v.v)) ev.pythonVersions.push({ version: v.v, from: 'nox', source: { file: FILE, line: v.line } });
    }
  }
  const testSessions = new Set<string>();
  for (const call of src.calls((c) => /\.run(_always|_install)?$/.test(c))) {
    const { words: argv, line } = words(src, call);
    const args = argsAfterPytest(argv);
    if (!args) continue;
    testSessions.add(call.inDef ?? '');
    ev.testCommands.push({ tool: 'nox', scope: `nox:${call.inDef ?? ''}`, args, source: { file: FILE, line } });
  }
  for (const call of src.calls((c) => c.endsWith('.install'))) {
    const session = call.inDef ?? '';
    const group: Group = testSessions.has(session) ? 'test' : groupOfName(session, 'dev');
    const { words: argv, line } = words(src, call);
    ctx.addEntries(
      pipInstallArgs(argv, { file: FILE, line }, (f) => ctx.checkout.read(f)),
      group,
      `nox:${session}`,
    );
  }
}
