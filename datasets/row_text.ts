/**
 * The free text of a row: every string inside its schema's text columns (a chat message's
 * content, role and tool-call arguments alike), in column order. Token counts and near-duplicate
 * removal both read a row through this, so they see the same text.
 */
import type { RecordSchema } from '../schemas/schema.js';

export function* textStrings(v: unknown): Generator<string> {
  if (typeof v === 'string') {
    if (v) yield v;
  } else if (Array.isArray(v)) for (const x of v) yield* textStrings(x);
  else if (v && typeof v === 'object') for (const x of Object.values(v)) yield* textStrings(x);
}

/** The row's text columns' strings joined by newlines. */
export function rowText(schema: RecordSchema, row: Record<string, unknown>): string {
  const parts: string[] = [];
  for (const c of schema.text ?? []) for (const s of textStrings(row[c])) parts.push(s);
  return parts.join('\n');
}
