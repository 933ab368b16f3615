/**
 * One question to an OpenAI-compatible chat-completions server (vLLM, SGLang, llama.cpp, Ollama)
 * through the official `openai` package: a system prompt and a user message in, the answer's text
 * out. Retries are the client's (408, 409, 429, 5xx, connection errors); what still fails throws.
 * The agent's multi-turn, tool-calling client is `pipeline/agent/policies/openai.ts`.
 */
import OpenAI from 'openai';

/** The server and sampling, as `--base-url`, `--model` and the sampling options give them; the key comes from OPENAI_API_KEY. */
export interface ChatServer {
  baseURL: string;
  model: string;
  temperature?: number;
  topP?: number;
  maxTokens?: number;
  seed?: number;
  maxRetries?: number;
  timeoutMs?: number;
}

/** A function asking `server` one question; it resolves to the answer's text ('' when the answer has none). */
export function chatOnce(server: ChatServer): (system: string, user: string) => Promise<string> {
  const client = new OpenAI({
    baseURL: server.baseURL,
    apiKey: process.env.OPENAI_API_KEY ?? 'none',
    maxRetries: server.maxRetries ?? 6,
    timeout: server.timeoutMs ?? 600_000,
  });
  return async (system, user) => {
    const res = await client.chat.completions.create({
      model: server.model,
      messages: [
        { role: 'system', content: system },
        { role: 'user', content: user },
      ],
      temperature: server.temperature,
      top_p: server.topP,
      max_tokens: server.maxTokens,
      seed: server.seed,
    });
    return res.choices?.[0]?.message?.content ?? '';
  };
}
