/**
 * Live progress of `run` and `worker`. On a terminal: bars (cli-progress), one per stage (units
 * past it of all, with ETA) and one line per slot saying which unit and stage it runs; log lines
 * print above the bars. Off a terminal, or with `--progress json`: one JSON line per event on
 * stderr for log collectors, the last one the totals. The report on stdout is unchanged.
 */
import { MultiBar, Presets, type SingleBar } from 'cli-progress';
import { machineJson, terminalSafe } from '../../core/terminal.js';
import type { StageName } from './ledger.js';

export type ProgressMode = 'bars' | 'json' | 'none';
export const PROGRESS_MODES = ['auto', 'bars', 'json', 'none'] as const;

/** How far a long stage is inside: tests traced, tasks done. */
export interface StepsEvent {
  stage: StageName;
  done: number;
  total: number;
  of: 'tests' | 'tasks';
}

export type ProgressEvent =
  | { event: 'stage'; unit_id: string; stage: StageName; slot: number }
  | ({ event: 'steps'; unit_id: string; slot: number } & StepsEvent)
  | { event: 'unit'; unit_id: string; status: 'ok' | 'failed' | 'retry' | 'dead'; stage: StageName | null; reason: string | null; seconds: number };

export interface ProgressTotals {
  event: 'totals';
  units: number;
  ok: number;
  failed: number;
  retried: number;
  dead: number;
  seconds: number;
}

/** `auto`: bars when stderr is a terminal, JSON lines when it is a pipe or file. */
export function progressMode(flag: (typeof PROGRESS_MODES)[number], stream: NodeJS.WriteStream = process.stderr): ProgressMode {
  if (flag !== 'auto') return flag;
  return stream.isTTY ? 'bars' : 'json';
}

export class Progress {
  private readonly started = Date.now();
  private units = 0;
  private stages: StageName[] = [];
  private readonly totals = { ok: 0, failed: 0, retried: 0, dead: 0 };
  /** How many of its stages each unit is past. */
  private readonly at = new Map<string, number>();
  private bars: MultiBar | null = null;
  private readonly stageBars = new Map<StageName, SingleBar>();
  private readonly slotBars: SingleBar[] = [];
  private queueBar: SingleBar | null = null;

  constructor(
    readonly mode: ProgressMode,
    private readonly stream: NodeJS.WriteStream = process.stderr,
  ) {}

  /** A log line: above the bars on a terminal, as an event in JSON mode, as is otherwise (its control characters escaped: it may name a test). */
  log = (m: string): void => {
    if (this.bars) this.bars.log(`${terminalSafe(m)}\n`);
    else if (this.mode === 'json') this.json({ event: 'log', message: m });
    else this.stream.write(`${terminalSafe(m)}\n`);
  };

  private json(e: object): void {
    this.stream.write(`${machineJson({ ...e, t: Math.round((Date.now() - this.started) / 100) / 10 })}\n`);
  }

  start(units: number, stages: StageName[], slots: number): void {
    this.units = units;
    this.stages = stages;
    if (this.mode === 'json') this.json({ event: 'start', units, stages });
    if (this.mode !== 'bars') return;
    this.bars = new MultiBar(
      { stream: this.stream, hideCursor: true, clearOnComplete: false, format: '{name} {bar} {value}/{total} units | ETA {eta_formatted}', etaBuffer: 20 },
      Presets.shades_classic,
    );
    for (const s of stages) this.stageBars.set(s, this.bars.create(units, 0, { name: s.padEnd(8) }));
    for (let i = 0; i < slots; i++) this.slotBars.push(this.bars.create(1, 0, { what: 'idle' }, { format: `slot ${i}: {what}` }));
  }

  /** Units past a stage: they finished it, or failed at or before it (a retry does not count a stage twice). */
  private pass(unitId: string, upTo: number): void {
    const from = this.at.get(unitId) ?? 0;
    for (let i = from; i < upTo; i++) this.stageBars.get(this.stages[i])?.increment();
    if (upTo > from) this.at.set(unitId, upTo);
  }

  event(e: ProgressEvent): void {
    if (this.mode === 'json') this.json(e);
    if (e.event === 'steps') {
      this.slotBars[e.slot]?.update(0, { what: terminalSafe(`${e.unit_id} ${e.stage} ${e.done} of ${e.total} ${e.of}`) });
      return;
    }
    if (e.event === 'stage') {
      this.pass(e.unit_id, Math.max(0, this.stages.indexOf(e.stage)));
      this.slotBars[e.slot]?.update(0, { what: terminalSafe(`${e.unit_id} ${e.stage}`) });
      return;
    }
    if (e.status === 'retry') {
      this.totals.retried++;
      return;
    }
    if (e.status === 'ok') this.totals.ok++;
    else if (e.status === 'dead') this.totals.dead++;
    else this.totals.failed++;
    this.pass(e.unit_id, this.stages.length);
  }

  /** A worker's view of the whole queue (every host's units): settled of all. */
  queue(settled: number, total: number): void {
    if (!this.bars) return;
    if (!this.queueBar) this.queueBar = this.bars.create(total, settled, { name: 'queue   ' });
    this.queueBar.setTotal(total);
    this.queueBar.update(settled);
  }

  /** A slot finished its unit. */
  idle(slot: number): void {
    this.slotBars[slot]?.update(0, { what: 'idle' });
  }

  end(): ProgressTotals {
    const totals: ProgressTotals = { event: 'totals', units: this.units, ...this.totals, seconds: Math.round((Date.now() - this.started) / 100) / 10 };
    this.bars?.stop();
    this.bars = null;
    if (this.mode === 'json') this.json(totals);
    return totals;
  }
}
