/**
 * The `openai` policy: any OpenAI-compatible chat-completions server (vLLM, SGLang, llama.cpp,
 * Ollama) through the official `openai` package, with tool calling. Our conversation goes out in
 * the API's message format (assistant messages with `tool_calls`, tool messages with
 * `tool_call_id`); the reply's content, tool calls and token usage come back verbatim. A tool call
 * the model got wrong (arguments that are not JSON, a tool that does not exist) passes through
 * unchanged: the environment answers it with an error observation.
 *
 * Retries are the client's (the SDK's): 408, 409, 429, 5xx and connection errors (timeouts
 * included) are retried up to `maxRetries` times, after the wait a `retry-after-ms` or
 * `retry-after` header asks for (however long), else an exponential backoff with jitter (0.5 s
 * doubling up to 8 s). Anything else (400, 401, 404, ...) fails the turn at once. Every attempt
 * goes through our `fetch`, which is where attempts and retries are counted and reported.
 */
import OpenAI, { APIError } from 'openai';
import { TOOL_SPECS, type ToolCall } from '../agent_env.js';
import type { ChatMessage, Policy, PolicyTurn } from '../policy.js';

export interface OpenAIPolicyConfig {
  /** e.g. http://127.0.0.1:8000/v1 */
  baseURL: string;
  model: string;
  /** Defaults to $OPENAI_API_KEY, else "none" (local servers ignore it). */
  apiKey?: string;
  temperature?: number;
  topP?: number;
  /** Completion tokens per turn (sent as `max_tokens`, which every compatible server takes). */
  maxTokens?: number;
  seed?: number;
  /** Extra HTTP headers on every request. */
  headers?: Record<string, string>;
  /** Extra request-body fields for server-specific knobs (vLLM's top_k, chat_template_kwargs, ...). */
  extraBody?: Record<string, unknown>;
  /** Retries after the first attempt (default 6). */
  maxRetries?: number;
  /** Per-request timeout (default 600 000 ms). */
  timeoutMs?: number;
  /** Told about every retry as it is sent (for logs and tests). */
  onRetry?: (info: RetryInfo) => void;
}

export interface RetryInfo {
  /** 0 for the first retry. */
  attempt: number;
  /** HTTP status of the attempt that failed, or null for a connection error or timeout. */
  status: number | null;
  /** How long the client waited after that failure, as measured here. */
  delayMs: number;
}

export interface OpenAIPolicyStats {
  /** HTTP requests sent, failed ones included. */
  requests: number;
  retries: number;
  /** Completions that came back. */
  completions: number;
}

export interface OpenAIPolicy extends Policy {
  stats(): OpenAIPolicyStats;
}

type ApiMessage = OpenAI.Chat.Completions.ChatCompletionMessageParam;

/** Our conversation in the chat-completions message format. */
export function toApiMessages(messages: ChatMessage[]): ApiMessage[] {
  return messages.map((m): ApiMessage => {
    switch (m.role) {
      case 'system':
        return { role: 'system', content: m.content };
      case 'user':
        return { role: 'user', content: m.content };
      case 'tool':
        return { role: 'tool', content: m.content, tool_call_id: m.tool_call_id ?? '' };
      case 'assistant': {
        const calls = m.tool_calls ?? [];
        if (!calls.length) return { role: 'assistant', content: m.content };
        return {
          role: 'assistant',
          // The API's own convention for a message that only calls tools.
          content: m.content === '' ? null : m.content,
          tool_calls: calls.map((tc) => ({ id: tc.id, type: 'function' as const, function: { name: tc.name, arguments: tc.arguments } })),
        };
      }
      default:
        throw new Error(`unknown message role "${(m as ChatMessage).role}"`);
    }
  });
}

/** The tool calls of a reply, as the model wrote them; nothing is validated here. */
export function toolCallsOf(message: unknown, turn: number): ToolCall[] {
  const calls = (message as { tool_calls?: unknown })?.tool_calls;
  if (!Array.isArray(calls)) return [];
  return calls.map((raw, i) => {
    const tc = (raw ?? {}) as {
      id?: unknown;
      type?: unknown;
      function?: { name?: unknown; arguments?: unknown };
      custom?: { name?: unknown; input?: unknown };
    };
    const fn = tc.type === 'custom' && tc.custom ? { name: tc.custom.name, arguments: tc.custom.input } : (tc.function ?? {});
    const args = fn.arguments;
    return {
      // Some servers leave ids out; the conversation still needs one to pair the observation.
      id: typeof tc.id === 'string' && tc.id ? tc.id : `call_${turn}_${i}`,
      name: typeof fn.name === 'string' ? fn.name : '',
      arguments: typeof args === 'string' ? args : args === undefined || args === null ? '' : JSON.stringify(args),
    };
  });
}

export function openaiPolicy(config: OpenAIPolicyConfig): OpenAIPolicy {
  const stats: OpenAIPolicyStats = { requests: 0, retries: 0, completions: 0 };
  // Attempts of the current turn, and the last one's failure. A policy serves one conversation,
  // one turn at a time, so the second and later attempts of a turn are the client's retries.
  let attempts = 0;
  let failed: { status: number | null; at: number } | null = null;
  const client = new OpenAI({
    baseURL: config.baseURL,
    apiKey: config.apiKey ?? process.env.OPENAI_API_KEY ?? 'none',
    maxRetries: config.maxRetries ?? 6,
    timeout: config.timeoutMs ?? 600_000,
    defaultHeaders: config.headers,
    fetch: async (input, init) => {
      if (attempts > 0 && failed) {
        stats.retries += 1;
        config.onRetry?.({ attempt: attempts - 1, status: failed.status, delayMs: Date.now() - failed.at });
      }
      attempts += 1;
      stats.requests += 1;
      try {
        const res = await fetch(input, init);
        failed = res.ok ? null : { status: res.status, at: Date.now() };
        return res;
      } catch (e) {
        failed = { status: null, at: Date.now() };
        throw e;
      }
    },
  });
  let turn = 0;
  return {
    name: 'openai',
    model: config.model,
    stats: () => ({ ...stats }),
    async next(messages: ChatMessage[]): Promise<PolicyTurn> {
      turn += 1;
      const body = {
        ...(config.extraBody ?? {}),
        model: config.model,
        messages: toApiMessages(messages),
        tools: TOOL_SPECS,
        tool_choice: 'auto' as const,
        ...(config.temperature !== undefined ? { temperature: config.temperature } : {}),
        ...(config.topP !== undefined ? { top_p: config.topP } : {}),
        ...(config.maxTokens !== undefined ? { max_tokens: config.maxTokens } : {}),
        ...(config.seed !== undefined ? { seed: config.seed } : {}),
        stream: false as const,
      } as OpenAI.Chat.Completions.ChatCompletionCreateParamsNonStreaming;
      attempts = 0;
      let completion: OpenAI.Chat.Completions.ChatCompletion;
      try {
        completion = await client.chat.completions.create(body);
      } catch (e) {
        const status = e instanceof APIError && e.status !== undefined ? ` (HTTP ${e.status})` : '';
        throw new Error(`chat completion failed after ${attempts} ${attempts === 1 ? 'try' : 'tries'}${status}: ${(e as Error).message}`, { cause: e });
      }
      stats.completions += 1;
      const choice = completion.choices?.[0];
      if (!choice?.message) throw new Error(`the server returned no choices: ${JSON.stringify(completion).slice(0, 500)}`);
      return {
        content: typeof choice.message.content === 'string' ? choice.message.content : '',
        toolCalls: toolCallsOf(choice.message, turn),
        promptTokens: completion.usage?.prompt_tokens ?? 0,
        completionTokens: completion.usage?.completion_tokens ?? 0,
      };
    },
  };
}
