/**
 * GitHub Actions workflows (.github/workflows/*.yml): per job, the `pip install` lines of its
 * `run:` steps, its pytest invocation, its `env:` (workflow, job and step level) and its Python
 * versions (the matrix, setup-python's `python-version`). A job that runs pytest (or tox, nox)
 * installs test requirements; another job's installs are grouped by its name (lint, docs...).
 * `${{ ... }}` expressions cannot be known here: words and values holding one are dropped. A step
 * that runs a shell script of the checkout (`bash scripts/test.sh`, `./scripts/test.sh`: FastAPI's
 * projects keep their pytest line there) is read as if its lines were the step's.
 */
import { posix } from 'node:path';
import { isMap, isScalar, isSeq, LineCounter, type Node, parseDocument, type YAMLMap } from 'yaml';
import { shellSplit } from '../../../core/shell.js';
import { pipInstallArgs, type RequirementsEntry } from '../requirements/file.js';
import { type EvidenceContext, type Group, groupOfName, type Source } from './context.js';
import { argsAfterPytest, unittestDiscoverArgs } from './pytest_invocation.js';

const DIR = '.github/workflows';
const EXPRESSION = /\$\{\{/;
/** What an expression in a `run:` line becomes before the line is split. */
const UNKNOWN = '\u0001';
const PYTHON_KEYS = new Set(['python-version', 'python', 'python_version', 'python-versions', 'py']);

/** `pip install`, `pip3 install`, `python -m pip install`, `uv pip install`: the words after `install`. */
function pipInstallWords(words: string[]): string[] | undefined {
  const at = words.findIndex((w, i) => w === 'install' && i > 0 && /^pip3?$/.test(words[i - 1]));
  if (at < 0) return undefined;
  const rest = words.slice(at + 1);
  const end = rest.findIndex((w) => ['&&', '||', ';', '|'].includes(w));
  return end < 0 ? rest : rest.slice(0, end);
}

/**
 * `uv sync` and `uv run` install the project with uv's default dependency group (`dev`) unless told
 * otherwise, and the groups and extras named: the project itself, as an install line would say it.
 */
function uvSyncEntry(words: string[], source: Source): RequirementsEntry | undefined {
  if (words[0] !== 'uv' || !['sync', 'run'].includes(words[1]) || words.some((w) => ['--no-sync', '--no-project', '--script'].includes(w))) return undefined;
  // `uv run` takes its own options before the command it runs: up to the first word no option takes.
  const takesValue = /^--(group|extra|only-group|python|with|package|directory|project)$/;
  const command = words.findIndex((w, i) => i > 1 && !w.startsWith('-') && !takesValue.test(words[i - 1]));
  const own = words.slice(2, words[1] === 'run' && command > 0 ? command : words.length);
  const flagValue = (flag: string) => own.flatMap((w, i) => (w === flag ? [own[i + 1]] : w.startsWith(`${flag}=`) ? [w.slice(flag.length + 1)] : []));
  const only = flagValue('--only-group');
  const defaults = only.length || own.includes('--no-dev') || own.includes('--no-default-groups') ? [] : ['dev'];
  const groups = own.includes('--all-groups') ? ['*'] : [...defaults, ...only, ...flagValue('--group')];
  const extras = own.includes('--all-extras') ? ['*'] : flagValue('--extra');
  return { kind: 'self', extras, groups, editable: true, source };
}

/** A script that a `run:` line hands to a shell, as a path in the checkout, or undefined. */
function scriptRun(words: string[]): string | undefined {
  const [first, second] = words;
  const path = /^(ba|z|da)?sh$/.test(first ?? '') ? second : first;
  if (!path || !/\.(sh|bash)$/.test(path) || path.startsWith('/') || path.split('/').includes('..')) return undefined;
  return posix.normalize(path);
}

class Workflow {
  private readonly lines = new LineCounter();

  constructor(
    private readonly ctx: EvidenceContext,
    private readonly file: string,
  ) {}

  private source(node: Node | null | undefined): Source {
    return { file: this.file, line: node?.range ? this.lines.linePos(node.range[0]).line : 1 };
  }

  private env(map: unknown, scope: string): void {
    if (!isMap(map)) return;
    for (const pair of map.items) {
      const value = isScalar(pair.value) ? String(pair.value.value ?? '') : undefined;
      if (isScalar(pair.key) && value !== undefined && !EXPRESSION.test(value)) {
        this.ctx.evidence.vars.push({ name: String(pair.key.value), value, scope, source: this.source(pair.key as Node) });
      }
    }
  }

  /** Python versions as written ("3.10" stays 3.10 where YAML reads the number 3.1). */
  private pythons(node: unknown): void {
    const items = isSeq(node) ? node.items : [node];
    for (const item of items) {
      const text = isScalar(item) ? (item.source ?? String(item.value)) : '';
      if (/^3\.\d+$/.test(text)) this.ctx.evidence.pythonVersions.push({ version: text, from: 'ci', source: this.source(item as Node) });
    }
  }

  /** A `run:` script's lines, `\` continuations joined, each with its line in the file. */
  private scriptLines(run: Node): { text: string; line: number }[] {
    if (!isScalar(run) || typeof run.value !== 'string') return [];
    const first = this.source(run).line + (run.type === 'BLOCK_LITERAL' || run.type === 'BLOCK_FOLDED' ? 1 : 0);
    const out: { text: string; line: number }[] = [];
    let pending: { text: string; line: number } | undefined;
    run.value.split('\n').forEach((raw, i) => {
      const cur = pending ?? { text: '', line: first + i };
      const continued = raw.trimEnd().endsWith('\\');
      cur.text += `${continued ? raw.trimEnd().slice(0, -1) : raw} `;
      pending = continued ? cur : undefined;
      if (!continued && cur.text.trim() && !cur.text.trim().startsWith('#')) out.push({ text: cur.text.trim(), line: cur.line });
    });
    return out;
  }

  /**
   * The step's lines with each script it runs from the checkout in its place (one level: a script
   * that calls another is read as written), each line with the file and line it comes from.
   */
  private commandLines(lines: { text: string; line: number }[]): { text: string; line: number; file: string }[] {
    return lines.flatMap((l) => {
      const script = scriptRun(shellSplit(l.text));
      const text = script === undefined ? undefined : this.ctx.checkout.read(script);
      if (script === undefined || text === undefined) return [{ ...l, file: this.file }];
      return text.split('\n').flatMap((raw, i) => {
        const t = raw.trim();
        return t && !t.startsWith('#') ? [{ text: t, line: i + 1, file: script }] : [];
      });
    });
  }

  private job(name: string, job: YAMLMap): void {
    const ev = this.ctx.evidence;
    const scope = `workflow:${this.file.slice(DIR.length + 1)}:${name}`;
    const matrix = job.getIn(['strategy', 'matrix'], true);
    if (isMap(matrix)) {
      for (const pair of matrix.items) if (isScalar(pair.key) && PYTHON_KEYS.has(String(pair.key.value))) this.pythons(pair.value);
      const include = matrix.get('include', true);
      for (const entry of isSeq(include) ? include.items : []) {
        if (isMap(entry)) for (const pair of entry.items) if (isScalar(pair.key) && PYTHON_KEYS.has(String(pair.key.value))) this.pythons(pair.value);
      }
    }
    this.env(job.get('env', true), scope);
    const installs: RequirementsEntry[][] = [];
    let runsTests = false;
    const steps = job.get('steps', true);
    for (const step of isSeq(steps) ? steps.items : []) {
      if (!isMap(step)) continue;
      const uses = step.get('uses');
      if (typeof uses === 'string' && uses.startsWith('actions/setup-python')) this.pythons(step.getIn(['with', 'python-version'], true));
      this.env(step.get('env', true), scope);
      const run = step.get('run', true) as Node | undefined;
      for (const l of run ? this.commandLines(this.scriptLines(run)) : []) {
        // An expression may hold spaces: made one word that is dropped.
        const words = shellSplit(l.text.replace(/\$\{\{.*?\}\}/g, UNKNOWN)).filter((w) => !w.includes(UNKNOWN));
        const source = { file: l.file, line: l.line };
        const pip = pipInstallWords(words);
        if (pip) installs.push(pipInstallArgs(pip, source, (f) => this.ctx.checkout.read(f)));
        const synced = uvSyncEntry(words, source);
        if (synced) installs.push([synced]);
        const args = argsAfterPytest(words) ?? unittestDiscoverArgs(words);
        if (args) ev.testCommands.push({ tool: 'workflow', scope, args, source });
        runsTests ||= args !== undefined || /^(tox|nox)$/.test(words[0] ?? '') || /-m (tox|nox)\b/.test(l.text);
      }
    }
    const group: Group = runsTests ? 'test' : groupOfName(name, 'dev');
    for (const entries of installs) this.ctx.addEntries(entries, group, scope);
  }

  read(text: string): void {
    const doc = parseDocument(text, { lineCounter: this.lines });
    if (doc.errors.length) {
      this.ctx.note({ file: this.file, line: doc.errors[0].linePos?.[0].line ?? 1 }, `not read: ${doc.errors[0].message.split('\n')[0]}`);
      return;
    }
    this.env(doc.get('env', true), `workflow:${this.file.slice(DIR.length + 1)}`);
    const jobs = doc.get('jobs', true);
    for (const pair of isMap(jobs) ? jobs.items : []) {
      if (isScalar(pair.key) && isMap(pair.value)) this.job(String(pair.key.value), pair.value);
    }
  }
}

export function readWorkflows(ctx: EvidenceContext): void {
  for (const name of ctx.checkout.list(DIR)) {
    if (!/\.ya?ml$/.test(name)) continue;
    const file = `${DIR}/${name}`;
    const text = ctx.checkout.read(file);
    if (text !== undefined) new Workflow(ctx, file).read(text);
  }
}
