/**
 * SWE-bench's own JSON Lines, both ways. Export writes one instance a line with SWE-bench's
 * fields (FAIL_TO_PASS and PASS_TO_PASS as JSON strings, as the harness reads them) and, unless
 * asked not to, our extra fields (kind, bug_patch, ...), which SWE-bench's harness ignores and
 * which make the round trip exact. Import reads SWE-bench files (F2P/P2P as JSON strings or
 * arrays) into task records; each bad line is an error naming its line, the others are kept.
 */
import { jsonObjectLine, LineError } from '../core/jsonl.js';
import type { TaskRecord } from '../schemas/tasks.js';
import { readRows } from './reader.js';

/** The fields of a SWE-bench instance (SWE-bench, Lite, Verified), in the harness's order. */
export const SWEBENCH_FIELDS = [
  'repo',
  'instance_id',
  'base_commit',
  'patch',
  'test_patch',
  'problem_statement',
  'hints_text',
  'created_at',
  'version',
  'FAIL_TO_PASS',
  'PASS_TO_PASS',
  'environment_setup_commit',
] as const;
const REQUIRED = ['instance_id', 'repo', 'base_commit', 'patch', 'test_patch', 'problem_statement', 'FAIL_TO_PASS', 'PASS_TO_PASS'] as const;
/** Our fields beyond SWE-bench's, written by the export unless `swebenchOnly`. */
export const WORLDLINE_FIELDS = [
  'kind',
  'bug_patch',
  'operator',
  'mutated_function',
  'fix_commit',
  'issue_number',
  'statement_source',
  'aux_patch',
  'fix_confidence',
  'fix_signals',
  'unit_id',
  'image_id',
  'python_version',
] as const;
/** Fields of SWE-bench variants that are accepted and kept in `extra`, not interpreted (Verified's difficulty, SWE-smith's image_name, Multimodal's image_assets). */
const VARIANT_FIELDS = ['difficulty', 'image_name', 'image_assets'] as const;
const KNOWN = new Set<string>([...SWEBENCH_FIELDS, ...WORLDLINE_FIELDS, ...VARIANT_FIELDS]);

/** Optional SWE-bench fields a task may carry for the export. */
export interface SwebenchExtras {
  created_at?: string | null;
  version?: string | null;
  environment_setup_commit?: string | null;
}

export interface ExportOptions {
  /** Only SWE-bench's fields; mutation tasks (whose state needs bug_patch) are then refused. */
  swebenchOnly?: boolean;
}

/** One SWE-bench JSON line per task. */
export function exportSwebench(tasks: (TaskRecord & SwebenchExtras)[], opts: ExportOptions = {}): string {
  return tasks
    .map((t) => {
      if (opts.swebenchOnly && t.kind !== 'issue_fix') {
        throw new Error(`${t.instance_id}: a ${t.kind} task cannot be written with SWE-bench's fields only (its state is base_commit + bug_patch)`);
      }
      const row: Record<string, unknown> = {
        repo: t.repo,
        instance_id: t.instance_id,
        base_commit: t.base_commit,
        patch: t.patch,
        test_patch: t.test_patch,
        problem_statement: t.problem_statement,
        hints_text: t.hints_text ?? '',
      };
      if (t.created_at != null) row.created_at = t.created_at;
      if (t.version != null) row.version = t.version;
      row.FAIL_TO_PASS = JSON.stringify(t.FAIL_TO_PASS);
      row.PASS_TO_PASS = JSON.stringify(t.PASS_TO_PASS);
      if (t.environment_setup_commit != null) row.environment_setup_commit = t.environment_setup_commit;
      if (!opts.swebenchOnly) for (const f of WORLDLINE_FIELDS) row[f] = t[f];
      return JSON.stringify(row) + '\n';
    })
    .join('');
}

/** A dataset's tasks in instance_id order: the shards hold them shuffled, and an export should not depend on how they were laid out. */
export async function readDatasetTasks(datasetDir: string): Promise<TaskRecord[]> {
  const tasks: TaskRecord[] = [];
  for await (const row of readRows(datasetDir, { config: 'tasks' })) tasks.push(row as unknown as TaskRecord);
  return tasks.sort((x, y) => x.instance_id.localeCompare(y.instance_id));
}

/** A task read from SWE-bench JSON Lines: a task record whose environment fields are null until it is put on a unit. */
export interface ImportedTask extends Omit<TaskRecord, 'unit_id' | 'image_id' | 'python_version'> {
  unit_id: string | null;
  image_id: string | null;
  python_version: string | null;
  created_at: string | null;
  version: string | null;
  environment_setup_commit: string | null;
  /** Fields of SWE-bench variants, kept as read. */
  extra: Record<string, unknown>;
  /** 1-based line of the file it came from. */
  line: number;
}

export interface ImportError {
  file: string;
  line: number;
  message: string;
}

function stringField(o: Record<string, unknown>, name: string, required: boolean): string | null {
  const v = o[name];
  if (v === undefined || v === null) {
    if (required) throw new LineError(`"${name}" is required`);
    return null;
  }
  if (typeof v !== 'string') throw new LineError(`"${name}" must be a string (got ${Array.isArray(v) ? 'an array' : typeof v})`);
  return v;
}

function nodeIdList(o: Record<string, unknown>, name: string): string[] {
  let v = o[name];
  if (v === undefined || v === null) throw new LineError(`"${name}" is required`);
  if (typeof v === 'string') {
    try {
      v = JSON.parse(v);
    } catch (e) {
      throw new LineError(`"${name}" is a string but not JSON: ${(e as Error).message}`);
    }
  }
  if (!Array.isArray(v) || !v.every((x) => typeof x === 'string'))
    throw new LineError(`"${name}" must be a list of test ids (a JSON array of strings, or a string holding one)`);
  return v;
}

function parseLine(text: string, line: number): ImportedTask {
  const o = jsonObjectLine(text);
  const unknown = Object.keys(o).filter((k) => !KNOWN.has(k));
  if (unknown.length) throw new LineError(`unknown field${unknown.length > 1 ? 's' : ''}: ${unknown.join(', ')}`);
  const missing = REQUIRED.filter((k) => o[k] === undefined || o[k] === null);
  if (missing.length) throw new LineError(`missing required field${missing.length > 1 ? 's' : ''}: ${missing.join(', ')}`);
  const s = (name: string) => stringField(o, name, true)!;
  const opt = (name: string) => stringField(o, name, false);
  const FAIL_TO_PASS = nodeIdList(o, 'FAIL_TO_PASS');
  const PASS_TO_PASS = nodeIdList(o, 'PASS_TO_PASS');
  if (!FAIL_TO_PASS.length) throw new LineError('"FAIL_TO_PASS" is empty: a task needs at least one test that the fix makes pass');
  const kind = opt('kind') ?? 'issue_fix';
  if (kind !== 'issue_fix' && kind !== 'mutation_fix') throw new LineError(`"kind" must be issue_fix or mutation_fix (got ${JSON.stringify(kind)})`);
  const bug_patch = opt('bug_patch');
  if (kind === 'mutation_fix' && bug_patch === null) throw new LineError('a mutation_fix task needs "bug_patch"');
  // Dumps of SWE-bench through pandas may hold created_at as epoch milliseconds, version as a number.
  const created = o.created_at;
  const created_at = typeof created === 'number' ? new Date(created).toISOString() : opt('created_at');
  const version = typeof o.version === 'number' ? String(o.version) : opt('version');
  const issue = o.issue_number;
  const issue_number = typeof issue === 'number' ? String(issue) : opt('issue_number');
  const extra: Record<string, unknown> = {};
  for (const f of VARIANT_FIELDS) if (o[f] !== undefined) extra[f] = o[f];
  return {
    instance_id: s('instance_id'),
    kind,
    repo: s('repo'),
    unit_id: opt('unit_id'),
    base_commit: s('base_commit'),
    patch: s('patch'),
    test_patch: s('test_patch'),
    bug_patch,
    problem_statement: s('problem_statement'),
    // SWE-bench writes '' for no hints; we keep null for that.
    hints_text: opt('hints_text') || null,
    FAIL_TO_PASS,
    PASS_TO_PASS,
    operator: opt('operator'),
    mutated_function: opt('mutated_function'),
    fix_commit: opt('fix_commit'),
    issue_number,
    image_id: opt('image_id'),
    python_version: opt('python_version'),
    fix_confidence: typeof o.fix_confidence === 'number' ? o.fix_confidence : null,
    fix_signals: o.fix_signals === undefined || o.fix_signals === null ? null : nodeIdList(o, 'fix_signals'),
    statement_source: opt('statement_source'),
    aux_patch: opt('aux_patch'),
    created_at,
    version,
    environment_setup_commit: opt('environment_setup_commit'),
    extra,
    line,
  };
}

/** Reads SWE-bench JSON Lines. Blank lines are skipped; a duplicate instance_id is an error. */
export function importSwebench(text: string, file: string): { tasks: ImportedTask[]; errors: ImportError[] } {
  const tasks: ImportedTask[] = [];
  const errors: ImportError[] = [];
  const seen = new Map<string, number>();
  text.split('\n').forEach((raw, i) => {
    const line = i + 1;
    if (!raw.trim()) return;
    try {
      const task = parseLine(raw, line);
      const first = seen.get(task.instance_id);
      if (first !== undefined) throw new LineError(`instance_id ${task.instance_id} already appeared on line ${first}`);
      seen.set(task.instance_id, line);
      tasks.push(task);
    } catch (e) {
      if (!(e instanceof LineError)) throw e;
      errors.push({ file, line, message: e.message });
    }
  });
  return { tasks, errors };
}

/** `file:line: message`, one a line, for printing import errors. */
export function formatImportErrors(errors: ImportError[]): string {
  return errors.map((e) => `${e.file}:${e.line}: ${e.message}`).join('\n');
}
