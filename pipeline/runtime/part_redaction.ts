/**
 * Secrets never reach the disk raw: the rows a stage writes to `out/parts` and the log tails it
 * writes to `out/logs` go through the same redaction `shard` applies (datasets/redact.ts), with
 * the unit's own secret `env.vars` values as literals, unless the run says `--no-redact`.
 * `shard` scans them again (a part written with `--no-redact` is redacted there) and counts the
 * placeholders the parts already hold, so the card's counts are the same either way.
 */
import { DEFAULT_CONTENT_POLICY } from '../../datasets/content_policy.js';
import { Redactor } from '../../datasets/redact.js';
import type { Unit } from './manifest.js';
import type { PipelineOptions } from './options.js';

/** Manifest env.vars whose names say they hold a secret: their values are redacted wherever they appear. */
const SECRET_VAR = /key|token|secret|pass|auth|cred|private/i;

/** The secret `env.vars` values of `units`, each of kind ENV_SECRET. */
export function envSecrets(units: Unit[]): Map<string, string> {
  const values = new Map<string, string>();
  for (const u of units) for (const [name, v] of Object.entries(u.env.vars)) if (SECRET_VAR.test(name)) values.set(v, 'ENV_SECRET');
  return values;
}

/** What a stage writes for `unit` goes through this; null under --no-redact. */
export function unitRedactor(options: PipelineOptions, unit: Unit): Redactor | null {
  return (options.content ?? DEFAULT_CONTENT_POLICY).redact ? new Redactor({ literals: envSecrets([unit]) }) : null;
}

/** `rows` as they are written to a part of `config`, redacted. */
export function redactRows<T extends object>(redactor: Redactor | null, config: string, rows: T[]): T[] {
  return redactor ? rows.map((r) => redactor.row(config, r as Record<string, unknown>) as T) : rows;
}

/** A log's text as it is written to `out/logs`, redacted. */
export function redactText(redactor: Redactor | null, text: string): string {
  return redactor ? redactor.text('logs', text) : text;
}
