/**
 * The describe stage end to end on real Docker: the whole `run` (every stage, forage with no
 * policy and no tasks to keep it short) on the calc example writes template descriptions that
 * state the real return values and exceptions; then the model describer against a scripted
 * loopback OpenAI-compatible server answering right, wrong-final-value and malformed descriptions
 * and HTTP 500s: kept and not kept, with their reasons, read back from Parquet by DuckDB and audit.
 */
import { createHash } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { outcomeMismatch, statedOutcome, traceOutcome } from '../pipeline/describe/outcome.js';
import { ALL_STAGES } from '../pipeline/run.js';
import type { TraceRecord } from '../schemas/traces.js';
import { CORPUS } from './corpus.js';
import { completion, error, ScriptedServer } from './fixtures/scripted_openai.js';
import { cli, sql, tempDir } from './helpers.js';

interface DescriptionRow {
  unit_id: string;
  node_id: string;
  episode_index: number;
  function: string;
  describer: string;
  model: string | null;
  text: string;
  trace_outcome: string;
  stated_outcome: string | null;
  kept: boolean;
  reject_reason: string | null;
  trace_text: string;
}

const descriptions = (out: string) =>
  sql<DescriptionRow>(
    `select d.*, t.text as trace_text from '${out}/dataset/trace_descriptions/data/*.parquet' d
     join '${out}/dataset/traces/data/*.parquet' t using (unit_id, node_id, episode_index) where t.task_id is null order by unit_id, node_id, episode_index`,
  );

/** `worldline run` on a manifest with every episode described (share 1). */
const runDescribed = (manifest: string, out: string, ...args: string[]) =>
  cli(['run', '--manifest', manifest, '--out', out, '--json', '--describe-share', '1', ...args]);

type Frames = TraceRecord['frames'];
const frame = (kind: string, depth: number, value: string | null = null): Frames[number] => ({
  kind,
  line: 1,
  depth,
  function: 'f',
  source: 'x\n',
  locals: [],
  value,
});

describe('the outcome check', () => {
  it("reads the trace's final outcome: a return, or an exception that left the entry function", () => {
    expect(traceOutcome([frame('call', 0), frame('line', 0), frame('return', 0, '21')])).toEqual({ kind: 'returns', value: '21' });
    const raised = [frame('call', 0), frame('call', 1), frame('exception', 1, "KeyError('k')"), frame('return', 1, 'None')];
    expect(traceOutcome([...raised, frame('exception', 0, "KeyError('k')"), frame('return', 0, 'None')])).toEqual({ kind: 'raises', value: "KeyError('k')" });
    // caught: the function went on and returned
    expect(traceOutcome([...raised, frame('exception', 0, "KeyError('k')"), frame('line', 0), frame('return', 0, '0')])).toEqual({
      kind: 'returns',
      value: '0',
    });
    expect(traceOutcome([frame('call', 0), frame('line', 0)])).toBeNull();
  });

  it('parses the stated outcome from the last line that states one, and rejects what does not match', () => {
    expect(statedOutcome('x becomes 2\nReturns: `[1, 2]`')).toEqual({ kind: 'returns', value: '[1, 2]' });
    expect(statedOutcome('**Final outcome:** raises `ValueError("bad")`.')).toEqual({ kind: 'raises', value: 'ValueError("bad")' });
    expect(statedOutcome('returns 21.\nthat is all')).toEqual({ kind: 'returns', value: '21' });
    expect(statedOutcome('the loop adds the numbers up and the helper returns 5')).toBeNull();
    expect(outcomeMismatch(statedOutcome('Returns: `21`'), { kind: 'returns', value: '21' })).toBeNull();
    expect(outcomeMismatch(statedOutcome('Raises: `CalcError`'), { kind: 'raises', value: "CalcError('division by zero')" })).toBeNull();
    expect(outcomeMismatch(statedOutcome('Returns: `22`'), { kind: 'returns', value: '21' })).toBe(
      'wrong final outcome: states returns 22, the trace returns 21',
    );
    expect(outcomeMismatch(statedOutcome('Returns: `None`'), { kind: 'raises', value: 'KeyError()' })).toMatch(/^wrong final outcome/);
    expect(outcomeMismatch(null, { kind: 'returns', value: '1' })).toBe('no stated final outcome');
  });
});

describe('describe stage: template and model describers on the calc example', () => {
  let dir: string;
  let manifest: string;
  let out: string;
  let server: ScriptedServer;
  let baseURL: string;
  // What the scripted server answers for an episode, by a hash of its trace text (the same text always gets the same kind).
  const KINDS = ['right', 'wrong', 'malformed', 'http500'] as const;
  const kindOf = (traceText: string) => KINDS[createHash('sha256').update(traceText).digest()[0] % KINDS.length];
  // The right answer for a trace text, from the template run's rows: its final outcome.
  const rightAnswer = new Map<string, string>();
  let templateRows = 0;
  const run = (...args: string[]) => runDescribed(manifest, out, ...args);

  beforeAll(async () => {
    dir = tempDir('describe');
    out = join(dir, 'out');
    manifest = join(dir, 'manifest.jsonl');
    writeFileSync(manifest, `${JSON.stringify({ repo: resolve('examples/repos/calc') })}\n`);
    // every stage of run (no --stages), forage with no policy and nothing to mine: the whole run, kept short
    const res = await run('--validate-runs', '1', '--policy', 'none', '--mutation-tries', '0', '--issue-candidates', '0');
    if (res.code !== 0) console.error(res.stdout, res.stderr);
    expect(res.code).toBe(0);
    const summary = JSON.parse(res.stdout) as { units: { ran: string[] }[] };
    expect(summary.units[0].ran).toEqual(['clone', 'resolve', 'build', 'validate', 'trace', 'describe', 'forage']);
    server = new ScriptedServer((i, req) => {
      const text = String((req.body.messages as { content: string }[])[1].content);
      const kind = kindOf(text);
      const right = rightAnswer.get(text);
      if (kind === 'http500') return error(500, 'the scripted server is down');
      if (kind === 'malformed')
        return completion(i, { content: 'The function parses the expression token by token.' }, { prompt_tokens: 10, completion_tokens: 8 });
      const stated = kind === 'wrong' || !right ? 'returns `987654321`' : right;
      return completion(
        i,
        { content: `Step 1: the function runs.\n${stated[0].toUpperCase()}${stated.slice(1)}` },
        { prompt_tokens: 10, completion_tokens: 8 },
      );
    });
    baseURL = await server.start();
  }, 1_500_000);

  afterAll(async () => server?.close());

  it('is a stage of run right after trace', () => {
    expect(ALL_STAGES.indexOf('describe')).toBe(ALL_STAGES.indexOf('trace') + 1);
  });

  it('writes template descriptions that state the real return values and exceptions, all kept', async () => {
    const rows = await descriptions(out);
    const [traces] = await sql<{ n: bigint }>(`select count(*) as n from '${out}/dataset/traces/data/*.parquet' where task_id is null`);
    expect(rows.length).toBeGreaterThan(20);
    // every episode was chosen (share 1); only ones without a final return (cut by a cap) are left out
    expect(rows.length).toBeLessThanOrEqual(Number(traces.n));
    for (const r of rows) {
      expect(r.describer).toBe('template');
      expect(r.model).toBeNull();
      expect(r.kept, `${r.node_id} #${r.episode_index}: ${r.reject_reason}`).toBe(true);
      expect(r.stated_outcome).toBe(r.trace_outcome);
    }
    // evaluate("1 + 2 * 3") returns 7 and evaluate("1 / (2 - 2)") raises CalcError: the texts say so
    const evaluate = rows.filter((r) => /(^|\.)evaluate$/.test(r.function));
    const seven = evaluate.find((r) => r.node_id.includes('1 + 2 * 3'));
    expect(seven?.text).toMatch(/Returns: `7`$/);
    expect(seven?.text).toMatch(/is called with `source` = '1 \+ 2 \* 3'/);
    const zero = evaluate.find((r) => r.node_id.endsWith('test_division_by_zero'));
    expect(zero?.trace_outcome).toMatch(/^raises CalcError\('division by zero'/);
    expect(zero?.text).toMatch(/Raises: `CalcError\('division by zero/);
    // the steps name changed locals and calls
    expect(rows.some((r) => /After line \d+: `\w+` is /.test(r.text))).toBe(true);
    expect(rows.some((r) => / {2}calls `[\w.]+`/.test(r.text))).toBe(true);
    for (const r of rows) rightAnswer.set(r.trace_text, r.trace_outcome);
    templateRows = rows.length;
  });

  it('keeps model descriptions whose final value is right and rejects wrong, malformed and failed ones with their reasons', async () => {
    const res = await run('--stages', 'describe,shard', '--describe-model', '--base-url', baseURL, '--model', 'scripted-describer', '--max-retries', '0');
    if (res.code !== 0) console.error(res.stdout, res.stderr);
    expect(res.code).toBe(0);
    const rows = await descriptions(out);
    expect(rightAnswer.size).toBeGreaterThan(20);
    expect(rows.length).toBe(templateRows);
    const seen = new Set<string>();
    for (const r of rows) {
      expect(r.describer).toBe('model');
      expect(r.model).toBe('scripted-describer');
      const kind = kindOf(r.trace_text);
      // a trace text longer than the describer sends is not one the server can answer right
      const right = kind === 'right' && rightAnswer.get(r.trace_text) === r.trace_outcome && r.trace_text.length <= 24_000;
      if (kind === 'right' && !right) continue;
      seen.add(kind);
      const where = `${r.node_id} #${r.episode_index} (${kind})`;
      if (kind === 'right') {
        expect(r.kept, where).toBe(true);
        expect(r.reject_reason, where).toBeNull();
        expect(r.stated_outcome, where).toBe(r.trace_outcome);
      } else {
        expect(r.kept, where).toBe(false);
        if (kind === 'wrong') {
          expect(r.stated_outcome, where).toBe('returns 987654321');
          expect(r.reject_reason, where).toMatch(/^wrong final outcome: states returns 987654321, the trace (returns|raises) /);
        } else if (kind === 'malformed') {
          expect(r.stated_outcome, where).toBeNull();
          expect(r.reject_reason, where).toBe('no stated final outcome');
        } else {
          expect(r.text, where).toBe('');
          expect(r.reject_reason, where).toMatch(/^server error: .*500/);
        }
      }
    }
    expect([...seen].sort()).toEqual([...KINDS].sort());
    // audit counts them the same way
    const audit = await cli(['audit', join(out, 'dataset'), '--json']);
    expect(audit.code, audit.stderr).toBe(0);
    const report = JSON.parse(audit.stdout) as { descriptions: { described: number; kept: number; rejected: { reason: string; count: number }[] } };
    expect(report.descriptions.described).toBe(rows.length);
    expect(report.descriptions.kept).toBe(rows.filter((r) => r.kept).length);
    const byReason = Object.fromEntries(report.descriptions.rejected.map((x) => [x.reason, x.count]));
    expect(byReason['no stated final outcome']).toBe(rows.filter((r) => r.reject_reason === 'no stated final outcome').length);
    expect(byReason['wrong final outcome']).toBe(rows.filter((r) => r.reject_reason?.startsWith('wrong final outcome')).length);
    expect(byReason['server error']).toBe(rows.filter((r) => r.reject_reason?.startsWith('server error')).length);
  });
});

describe('template describer on a Debian corpus project (isodate)', () => {
  let out: string;

  beforeAll(async () => {
    const dir = tempDir('describe-isodate');
    out = join(dir, 'out');
    const manifest = join(dir, 'manifest.jsonl');
    const p = CORPUS.isodate;
    writeFileSync(manifest, `${JSON.stringify({ repo: join(inject('corpusRoot'), 'isodate'), env: { apt: p.apt, pytest_args: p.pytestArgs } })}\n`);
    const res = await runDescribed(manifest, out, '--stages', 'clone,build,validate,trace,describe,shard', '--validate-runs', '1');
    if (res.code !== 0) console.error(res.stdout, res.stderr);
    expect(res.code).toBe(0);
  }, 1_500_000);

  it("states each episode's final value as the CWM text of the trace has it, and keeps every description", async () => {
    const rows = await descriptions(out);
    expect(rows.length).toBeGreaterThan(20);
    let returns = 0;
    for (const r of rows) {
      const where = `${r.node_id} #${r.episode_index} ${r.function}`;
      expect(r.kept, where).toBe(true);
      if (!r.trace_outcome.startsWith('returns ')) continue;
      returns += 1;
      // read apart from the frames: the last frame of the rendered text is the entry function's return
      const tail = r.trace_text.slice(r.trace_text.lastIndexOf('<|return_sep|>'));
      const last = /<\|arg_sep\|>(.*)<\|frame_sep\|>$/s.exec(tail);
      const value = JSON.parse(last![1]) as string;
      expect(r.trace_outcome, where).toBe(`returns ${value}`);
      expect(r.text.endsWith(`Returns: \`${value}\``), where).toBe(true);
    }
    expect(returns).toBeGreaterThan(10);
    // isodate's parsers raise ISO8601Error on bad input, and the tests check that they do
    expect(rows.some((r) => /\nRaises: `ISO8601Error\(/.test(r.text))).toBe(true);
  });
});
