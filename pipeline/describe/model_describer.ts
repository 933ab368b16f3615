/**
 * The model describer: an OpenAI-compatible chat server (the `openai` package, with the server and
 * sampling options of `--policy openai`) reads an episode in CWM's trace format and writes the
 * step-by-step description, ending with the line the outcome check reads. A server error comes
 * back as the reason, never as a throw: the episode's row records it.
 */
import { type ChatServer, chatOnce } from '../../core/chat.js';

const SYSTEM = [
  'You explain Python execution traces.',
  'Given a function-level trace (source, then frames: each line run with the locals that changed, calls, returns and exceptions),',
  'describe step by step what the code does: which line runs, which local takes which value, what each call returns.',
  'End with one last line, exactly `Returns: `<repr>`` with the repr of the value the entry function returns,',
  'or `Raises: `<repr>`` with the repr of the exception it raises.',
].join(' ');

/** Characters of the episode's trace text sent: the start, and the end where the final outcome is. */
const HEAD = 20_000;
const TAIL = 4_000;

export type ModelAnswer = { text: string; error: null } | { text: ''; error: string };

export function modelDescriber(openai: ChatServer): (traceText: string) => Promise<ModelAnswer> {
  const ask = chatOnce(openai);
  return async (traceText) => {
    const shown =
      traceText.length > HEAD + TAIL
        ? `${traceText.slice(0, HEAD)}\n[... ${traceText.length - HEAD - TAIL} characters left out ...]\n${traceText.slice(-TAIL)}`
        : traceText;
    try {
      return { text: await ask(SYSTEM, shown), error: null };
    } catch (e) {
      return { text: '', error: `server error: ${(e as Error).message.slice(0, 200)}` };
    }
  };
}
