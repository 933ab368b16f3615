/**
 * The one check every description passes, whoever wrote it: the final outcome it states (its last
 * `returns ...` / `raises ...` line) must be the trace's own. CWM dropped the descriptions whose
 * stated final output disagreed with the trace; this is that filter.
 */
import type { TraceRecord } from '../../schemas/traces.js';

export interface Outcome {
  kind: 'returns' | 'raises';
  /** The Python repr, as the tracer wrote it. */
  value: string;
}

export const outcomeText = (o: Outcome) => `${o.kind} ${o.value}`;

/**
 * How the episode's entry function ended: its last frame at depth 0 is a return; when the depth-0
 * frame before it is an exception, the exception left the function (both tracer backends record
 * an unwind as an exception, then a return of None). Null when the episode has no final return
 * (a trace cut by a cap).
 */
export function traceOutcome(frames: TraceRecord['frames']): Outcome | null {
  const top = frames.filter((f) => f.depth === 0);
  const last = top.at(-1);
  if (last?.kind !== 'return') return null;
  const before = top.at(-2);
  if (before?.kind === 'exception') return { kind: 'raises', value: before.value ?? '' };
  return { kind: 'returns', value: last.value ?? '' };
}

// A line that starts with the outcome (markdown emphasis allowed): "Returns: `21`",
// "**Final outcome:** raises `ValueError('x')`", "returns 21.". A sentence that merely mentions a
// return ("the helper returns 5") is no statement of the final outcome.
const STATED = /^\s*(?:[*_]*final(?:\s+outcome)?[*_]*\s*[:-][*_]*\s*)?[*_]*(returns?|raises?)[*_]*\s*:?\s+(.+?)\s*$/i;

/** The final outcome a description states: its last line that says returns or raises something; null when none does. */
export function statedOutcome(text: string): Outcome | null {
  const lines = text.trim().split('\n');
  for (let i = lines.length - 1; i >= 0; i--) {
    const m = STATED.exec(lines[i]);
    if (!m) continue;
    let value = m[2];
    const quoted = /^`(.*)`\.?$/.exec(value);
    // Without backticks a sentence's full stop is not part of the value.
    value = quoted ? quoted[1] : value.replace(/\.$/, '');
    return { kind: m[1].toLowerCase().startsWith('raise') ? 'raises' : 'returns', value: value.trim() };
  }
  return null;
}

/**
 * Null when the stated outcome is the trace's, else why not. A raised exception may be named by
 * its repr or by its class alone (`raises CalcError`): the class is what a reader can state for
 * certain; a returned value must be the repr itself.
 */
export function outcomeMismatch(stated: Outcome | null, traced: Outcome): string | null {
  if (!stated) return 'no stated final outcome';
  const same =
    stated.kind === traced.kind && (stated.value === traced.value.trim() || (traced.kind === 'raises' && stated.value === exceptionClass(traced.value)));
  if (same) return null;
  const cut = (s: string) => (s.length > 120 ? `${s.slice(0, 120)}...` : s);
  return `wrong final outcome: states ${cut(outcomeText(stated))}, the trace ${cut(outcomeText(traced))}`;
}

const exceptionClass = (repr: string) => /^[\w.]+/.exec(repr.trim())?.[0] ?? repr;
