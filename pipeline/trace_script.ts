/**
 * `worldline trace-script`: traces a standalone Python program on given inputs in a sandbox
 * (no network, limits, timeout), as CWM traced competitive-programming solutions: one result
 * per input with the program's output and its function-level episodes.
 */
import { copyFileSync, existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, join } from 'node:path';
import { BenchmarkNgrams, DEFAULT_NGRAM } from '../datasets/ngram_overlap.js';
import { requireDocker } from './run.js';
import type { PythonVersion } from './runtime/manifest.js';
import { UnitFailure } from './runtime/stage.js';
import { resolveBase } from './sandbox/base_images.js';
import { libDir } from './sandbox/our_python.js';
import { readResult } from './sandbox/results.js';
import { claimWork, runContainer, SANDBOX_UID } from './sandbox/sandbox.js';
import { onWorkDisk } from './sandbox/work_disk.js';

export interface ScriptEpisode {
  function: string;
  text: string;
  frame_count: number;
  line_events: number;
}

export interface ScriptTrace {
  input: string;
  stdout: string;
  status: 'ok' | 'exit' | 'exception' | 'timeout' | 'sandbox-error';
  error: string | null;
  truncated: boolean;
  python: string | null;
  episodes: ScriptEpisode[];
}

export interface TraceScriptOptions {
  python: PythonVersion;
  baseImage?: string;
  stepIn: number;
  seed: number;
  maxEvents: number;
  timeoutS: number;
}

/** Whether every input was traced: a program that raised or exited is traced as it ran; a timeout or a sandbox error is not. */
export function allTraced(results: ScriptTrace[]): boolean {
  return results.every((r) => r.status === 'ok' || r.status === 'exception' || r.status === 'exit');
}

/** jsonl: one result a line; text: the episodes' token text. */
export function formatScriptTraces(results: ScriptTrace[], format: 'jsonl' | 'text'): string {
  return results.map((r) => (format === 'text' ? r.episodes.map((e) => e.text).join('') : JSON.stringify(r) + '\n')).join('');
}

/** Whether `script` is a copy of a solution in `benchmarkFile` (token n-gram overlap), with a line saying how much. */
export function scriptContamination(script: string, benchmarkFile: string, threshold: number): { contaminated: boolean; summary: string } {
  const bench = new BenchmarkNgrams(benchmarkFile, DEFAULT_NGRAM, threshold);
  const o = bench.check(readFileSync(script, 'utf8'));
  const most = o.document ? `; most in ${o.document}` : '';
  return {
    contaminated: o.contaminated,
    summary: `${basename(script)}: ${(o.overlap * 100).toFixed(1)}% of its ${o.ngrams} ${bench.n}-grams are in ${benchmarkFile} (${bench.documents} documents${most})`,
  };
}

/** The disk budget of a traced program's folder (its script, input and result), MB. */
const SCRIPT_DISK_MB = 1024;

export async function traceScript(script: string, inputs: string[], opts: TraceScriptOptions, log: (m: string) => void): Promise<ScriptTrace[]> {
  for (const f of [script, ...inputs]) if (!existsSync(f)) throw new Error(`${f}: no such file`);
  await requireDocker();
  const base = await resolveBase(opts.python, opts.baseImage, log);
  const results: ScriptTrace[] = [];
  for (const input of inputs) {
    const dir = mkdtempSync(join(tmpdir(), 'worldline-script-'));
    claimWork(dir);
    try {
      const name = basename(script);
      copyFileSync(script, join(dir, name));
      copyFileSync(input, join(dir, 'stdin.txt'));
      // The program's folder is its own nosuid,nodev disk too; one that fills it is that input's error.
      const run = await onWorkDisk(dir, SCRIPT_DISK_MB, SANDBOX_UID, () =>
        runContainer({
          image: base.imageId,
          cmd: ['sh', '-c', `cd /worldline/work && python3 /worldline/lib/trace_script.py ${JSON.stringify(name)} stdin.txt > result.json`],
          env: {
            PYTHONPATH: '/worldline/lib',
            PYTHONHASHSEED: '0',
            PYTHONDONTWRITEBYTECODE: '1',
            WORLDLINE_TRACE_STEP_IN: String(opts.stepIn),
            WORLDLINE_TRACE_SEED: String(opts.seed),
            WORLDLINE_TRACE_MAX_EVENTS: String(opts.maxEvents),
          },
          binds: [`${libDir()}:/worldline/lib:ro`, `${dir}:/worldline/work`],
          limits: { memoryBytes: 1024 * 1024 * 1024, pids: 128, cpus: 1 },
          timeoutMs: opts.timeoutS * 1000,
          labels: { 'worldline.stage': 'trace-script' },
        }),
      ).catch((e: Error) => {
        if (!(e instanceof UnitFailure)) throw e;
        return { timedOut: false, exitCode: null, oomKilled: false, output: e.message };
      });
      const resultText = run.timedOut || run.exitCode !== 0 ? null : readResult(dir, 'result.json');
      if (run.timedOut) {
        results.push({ input, stdout: '', status: 'timeout', error: `exceeded ${opts.timeoutS} s`, truncated: false, python: null, episodes: [] });
      } else if (resultText === null) {
        results.push({ input, stdout: '', status: 'sandbox-error', error: run.output.trim().slice(-500), truncated: false, python: null, episodes: [] });
      } else {
        const r = JSON.parse(resultText) as Omit<ScriptTrace, 'input'> & { episodes: ScriptEpisode[] };
        results.push({
          input,
          stdout: r.stdout,
          status: r.status,
          error: r.error,
          truncated: r.truncated,
          python: r.python,
          episodes: r.episodes.map((e) => ({ function: e.function, text: e.text, frame_count: e.frame_count, line_events: e.line_events })),
        });
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }
  return results;
}
