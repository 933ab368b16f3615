/**
 * Redaction of dataset rows before they are sharded: every string in a row, nested ones included
 * (trace frames and locals, chat messages, tool calls, steps, test messages, patches), goes
 * through the secret scanner. Formats stay valid: a trace whose parts changed gets its CWM text
 * rendered again from the redacted parts, and a tool call's JSON arguments are redacted as JSON.
 */
import { type CwmFrame, renderEpisode } from './cwm_format.js';
import { type ScannerOptions, SecretScanner } from './secrets.js';

/** What redaction did, for the card and manifest: placeholders per kind, per config, and rows touched. */
export interface RedactionSummary {
  enabled: boolean;
  rule_source: string;
  rule_license: string;
  /** gitleaks rules ported, plus ours (private keys, AWS secrets, e-mail, IPv4, high-entropy). */
  rules: number;
  /** Placeholders written, by kind, all configs together. */
  total: Record<string, number>;
  by_config: Record<string, { rows_redacted: number; by_kind: Record<string, number> }>;
}

/** Our rules beside the ported ones (see secrets.ts). */
const OWN_RULES = 5;

type Json = unknown;

const placeholders = (tally: Map<string, number>) => {
  let n = 0;
  for (const v of tally.values()) n += v;
  return n;
};

export class Redactor {
  private readonly scanner: SecretScanner;
  private readonly tallies = new Map<string, Map<string, number>>();
  private readonly rowsRedacted = new Map<string, number>();

  constructor(opts: ScannerOptions = {}) {
    this.scanner = new SecretScanner(opts);
  }

  private tally(config: string): Map<string, number> {
    const t = this.tallies.get(config) ?? new Map<string, number>();
    this.tallies.set(config, t);
    return t;
  }

  /** The value with every string redacted; the same object when nothing changed. */
  private walk(v: Json, tally: Map<string, number>, key = ''): Json {
    // JSON text (tool call arguments) is redacted value by value so it stays JSON.
    if (typeof v === 'string') return key === 'arguments' ? this.redactJsonText(v, tally) : this.scanner.redact(v, tally);
    if (Array.isArray(v)) {
      let copy: Json[] | null = null;
      v.forEach((item, i) => {
        const r = this.walk(item, tally, key);
        if (r === item) return;
        copy ??= [...v];
        copy[i] = r;
      });
      return copy ?? v;
    }
    if (v && typeof v === 'object') {
      let copy: Record<string, Json> | null = null;
      for (const [k, item] of Object.entries(v)) {
        const r = this.walk(item, tally, k);
        if (r === item) continue;
        copy ??= { ...(v as Record<string, Json>) };
        copy[k] = r;
      }
      return copy ?? v;
    }
    return v;
  }

  private redactJsonText(text: string, tally: Map<string, number>): string {
    const plainTally = new Map<string, number>();
    const plain = this.scanner.redact(text, plainTally);
    if (plain === text) return text;
    try {
      return JSON.stringify(this.walk(JSON.parse(text), tally));
    } catch {
      for (const [k, n] of plainTally) tally.set(k, (tally.get(k) ?? 0) + n);
      return plain;
    }
  }

  /**
   * The row with its secrets replaced. A traces row's `text` is not scanned itself: when any of
   * its parts changed it is rendered again from them, so it stays CWM's format and agrees with
   * its frames.
   */
  row<T extends Record<string, unknown>>(config: string, row: T): T {
    const tally = this.tally(config);
    const before = placeholders(tally);
    let out: T;
    if (config === 'traces' && typeof row.text === 'string') {
      const { text, ...parts } = row;
      const redacted = this.walk(parts, tally) as Record<string, unknown>;
      out = (redacted === parts ? row : { ...redacted, text: renderEpisode(redacted.context as string, redacted.frames as CwmFrame[]) }) as T;
    } else out = this.walk(row, tally) as T;
    // A row redacted when its part was written comes back unchanged but holding placeholders.
    if (out !== row || placeholders(tally) > before) this.rowsRedacted.set(config, (this.rowsRedacted.get(config) ?? 0) + 1);
    return out;
  }

  /** Free text (a log's tail) with its secrets replaced, counted under `config`. */
  text(config: string, text: string): string {
    return this.scanner.redact(text, this.tally(config));
  }

  /** Redacts rows as they stream past. */
  *rows<T extends Record<string, unknown>>(config: string, rows: Iterable<T>): Generator<T> {
    for (const r of rows) yield this.row(config, r);
  }

  summary(): RedactionSummary {
    const total: Record<string, number> = {};
    const by_config: RedactionSummary['by_config'] = {};
    for (const [config, t] of this.tallies) {
      const by_kind = Object.fromEntries([...t].filter(([, n]) => n > 0).sort((a, b) => a[0].localeCompare(b[0])));
      for (const [k, n] of Object.entries(by_kind)) total[k] = (total[k] ?? 0) + n;
      by_config[config] = { rows_redacted: this.rowsRedacted.get(config) ?? 0, by_kind };
    }
    return {
      enabled: true,
      rule_source: this.scanner.source,
      rule_license: this.scanner.license,
      rules: this.scanner.ruleCount + OWN_RULES,
      total: Object.fromEntries(Object.entries(total).sort((a, b) => a[0].localeCompare(b[0]))),
      by_config,
    };
  }
}
