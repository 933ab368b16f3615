/**
 * The template describer: a deterministic step-by-step account of an episode, written from its
 * frames with no model ("line 12 `total += x`: `total` is now 6"), ending with the line the
 * outcome check reads ("Returns: `21`"). It follows the entry function (depth 0) and names the
 * calls it makes (depth 1) with what they return or raise; deeper frames are the callees' own.
 */
import type { TraceRecord } from '../../schemas/traces.js';
import { type Outcome, traceOutcome } from './outcome.js';

/** Steps written at most; past them one line says how many were left out (the final outcome is always written). */
const MAX_STEPS = 200;
/** Characters of a repr or a source line inside a step; the final outcome is written whole. */
const SHOWN = 160;

const cut = (s: string) => (s.length > SHOWN ? `${s.slice(0, SHOWN)}...` : s);
const code = (s: string) => `\`${cut(s.trim())}\``;
/** The locals a frame shows a value for ('..': unchanged), as `name` is value (or = for a call's arguments). */
const assignments = (locals: TraceRecord['frames'][number]['locals'], verb = 'is') =>
  locals
    .filter((l) => l.value !== '..')
    .map((l) => `${code(l.name)} ${verb} ${cut(l.value)}`)
    .join(', ');

/** The closing line every description ends with; the outcome check parses it back. */
export const finalLine = (o: Outcome) => `${o.kind === 'returns' ? 'Returns' : 'Raises'}: \`${o.value}\``;

/** The episode described, or null when its trace has no final outcome to state (cut by a cap). */
export function describeByTemplate(row: Pick<TraceRecord, 'function' | 'file' | 'frames'>): string | null {
  const outcome = traceOutcome(row.frames);
  if (!outcome) return null;
  const steps: string[] = [];
  // the changes a line frame shows were made by the line before it
  let previousLine: number | null = null;
  let callee: string | null = null;
  // an exception leaving a callee is followed by its return of None: the exception is what happened
  let calleeRaised = false;
  for (const f of row.frames) {
    if (f.depth === 0) {
      if (f.kind === 'call') {
        const args = assignments(f.locals, '=');
        steps.push(`${code(row.function)} (${row.file}) is called${args ? ` with ${args}` : ''}.`);
      } else if (f.kind === 'line') {
        const changed = assignments(f.locals);
        if (changed && previousLine !== null) steps.push(`After line ${previousLine}: ${changed}.`);
        steps.push(`line ${f.line} ${code(f.source)}`);
        previousLine = f.line;
      } else if (f.kind === 'exception') {
        steps.push(`line ${f.line} raises ${cut(f.value ?? '')}.`);
      }
    } else if (f.depth === 1) {
      if (f.kind === 'call') {
        callee = f.function;
        calleeRaised = false;
        const args = assignments(f.locals, '=');
        steps.push(`  calls ${code(f.function)}${args ? ` with ${args}` : ''}`);
      } else if (f.kind === 'return' && !calleeRaised) steps.push(`  ${code(callee ?? f.function)} returns ${cut(f.value ?? 'None')}`);
      else if (f.kind === 'exception') {
        calleeRaised = true;
        steps.push(`  ${code(f.function)} raises ${cut(f.value ?? '')}`);
      } else if (f.kind === 'line') calleeRaised = false;
    }
  }
  const shown = steps.length > MAX_STEPS ? [...steps.slice(0, MAX_STEPS), `... ${steps.length - MAX_STEPS} more steps.`] : steps;
  return [...shown, finalLine(outcome)].join('\n');
}
