/**
 * CWM's trace token format in TypeScript: rendering episodes from stored frames and parsing the
 * text back. The Python tracer renders at trace time; this second implementation re-renders every
 * stored episode in tests, so the two cannot disagree silently.
 */
export const TOKENS = {
  contextStart: '<|trace_context_start|>',
  frame: '<|frame_sep|>',
  action: '<|action_sep|>',
  ret: '<|return_sep|>',
  call: '<|call_sep|>',
  line: '<|line_sep|>',
  exception: '<|exception_sep|>',
  arg: '<|arg_sep|>',
} as const;

export interface CwmFrame {
  kind: 'call' | 'line' | 'return' | 'exception';
  source: string;
  locals?: { name: string; value: string }[];
  value?: string | null;
}

const KIND_TOKEN: Record<CwmFrame['kind'], string> = { call: TOKENS.call, line: TOKENS.line, return: TOKENS.ret, exception: TOKENS.exception };

/** Python's `json.dumps` of a string with its defaults (ensure_ascii: everything outside space..~ escaped). */
export function pyJsonString(s: string): string {
  let out = '"';
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    const ch = s[i];
    if (ch === '"') out += '\\"';
    else if (ch === '\\') out += '\\\\';
    else if (c >= 0x20 && c <= 0x7e) out += ch;
    else if (ch === '\n') out += '\\n';
    else if (ch === '\r') out += '\\r';
    else if (ch === '\t') out += '\\t';
    else if (ch === '\b') out += '\\b';
    else if (ch === '\f') out += '\\f';
    else out += '\\u' + c.toString(16).padStart(4, '0');
  }
  return out + '"';
}

/** `json.dumps(dict)` with Python's default separators. */
function pyJsonLocals(locals: { name: string; value: string }[]): string {
  // A dict keeps the last value of a repeated key at the position of the first.
  const merged = new Map<string, string>();
  for (const { name, value } of locals) merged.set(name, value);
  return '{' + [...merged].map(([n, v]) => `${pyJsonString(n)}: ${pyJsonString(v)}`).join(', ') + '}';
}

export function renderFrame(f: CwmFrame): string {
  const head = KIND_TOKEN[f.kind];
  if (f.kind === 'call' || f.kind === 'line') return `${head}${pyJsonLocals(f.locals ?? [])}${TOKENS.action}${f.source}${TOKENS.frame}`;
  return `${head}${TOKENS.action}${f.source}${TOKENS.arg}${pyJsonString(f.value ?? '')}${TOKENS.frame}`;
}

export function renderEpisode(context: string, frames: CwmFrame[]): string {
  return TOKENS.contextStart + context + TOKENS.frame + frames.map(renderFrame).join('');
}

export class CwmParseError extends Error {}

/** Reads a rendered episode back into its context and frames; throws CwmParseError with the frame index. */
export function parseEpisode(text: string): { context: string; frames: CwmFrame[] } {
  if (!text.startsWith(TOKENS.contextStart)) throw new CwmParseError(`does not start with ${TOKENS.contextStart}`);
  if (!text.endsWith(TOKENS.frame)) throw new CwmParseError(`does not end with ${TOKENS.frame}`);
  const parts = text.slice(TOKENS.contextStart.length, -TOKENS.frame.length).split(TOKENS.frame);
  const context = parts[0];
  const frames = parts.slice(1).map((raw, i): CwmFrame => {
    const kind = (Object.keys(KIND_TOKEN) as CwmFrame['kind'][]).find((k) => raw.startsWith(KIND_TOKEN[k]));
    if (!kind) throw new CwmParseError(`frame ${i}: no kind token at its start`);
    const body = raw.slice(KIND_TOKEN[kind].length);
    const action = body.indexOf(TOKENS.action);
    if (action < 0) throw new CwmParseError(`frame ${i}: no ${TOKENS.action}`);
    if (kind === 'call' || kind === 'line') {
      let parsed: Record<string, string>;
      try {
        parsed = JSON.parse(body.slice(0, action)) as Record<string, string>;
      } catch (e) {
        throw new CwmParseError(`frame ${i}: locals are not JSON (${(e as Error).message})`);
      }
      return { kind, locals: Object.entries(parsed).map(([name, value]) => ({ name, value })), source: body.slice(action + TOKENS.action.length) };
    }
    if (action !== 0) throw new CwmParseError(`frame ${i}: a ${kind} frame carries no locals`);
    const rest = body.slice(TOKENS.action.length);
    const arg = rest.lastIndexOf(TOKENS.arg);
    if (arg < 0) throw new CwmParseError(`frame ${i}: no ${TOKENS.arg}`);
    try {
      return { kind, source: rest.slice(0, arg), value: JSON.parse(rest.slice(arg + TOKENS.arg.length)) as string };
    } catch (e) {
      throw new CwmParseError(`frame ${i}: value is not a JSON string (${(e as Error).message})`);
    }
  });
  return { context, frames };
}
