/**
 * The `openai` policy: any OpenAI-compatible chat-completions server (vLLM, SGLang, llama.cpp,
 * Ollama) through the official `openai` package, with tool calling. Our conversation goes out in
 * the API's message format (assistant messages with `tool_calls`, tool messages with
 * `tool_call_id`); the reply's content, tool calls and token usage come back verbatim. A tool call
 * the model got wrong (arguments that are not JSON, a tool that does not exist) passes through
 * unchanged: the environment answers it with an error observation.
 *
 * Retries are ours, not the client's (its maxRetries is 0): 408, 429, 5xx and connection errors
 * (timeouts included) are retried up to `maxRetries` times with exponential backoff and jitter,
 * bounded by `maxRetryDelayMs`; a `retry-after-ms` or `retry-after` header (seconds or an HTTP
 * date) is honoured when present. Anything else (400, 401, 404, ...) fails the turn at once.
 */
import OpenAI, { APIConnectionError, APIError, APIUserAbortError } from 'openai';
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
  /** First backoff delay (default 1000 ms); attempt n waits about base * 2^n. */
  retryBaseMs?: number;
  /** No single wait is longer than this, retry-after included (default 60 000 ms). */
  maxRetryDelayMs?: number;
  /** Told about every retry before its wait (for logs and tests). */
  onRetry?: (info: RetryInfo) => void;
  /** Overrides for tests: the sleep and the jitter source. */
  sleep?: (ms: number) => Promise<void>;
  random?: () => number;
}

export interface RetryInfo {
  /** 0 for the first retry. */
  attempt: number;
  /** HTTP status, or null for a connection error or timeout. */
  status: number | null;
  delayMs: number;
  message: string;
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
    const tc = (raw ?? {}) as { id?: unknown; type?: unknown; function?: { name?: unknown; arguments?: unknown }; custom?: { name?: unknown; input?: unknown } };
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

function isRetryable(e: unknown): boolean {
  if (e instanceof APIUserAbortError) return false;
  if (e instanceof APIConnectionError) return true; // timeouts are a subclass
  if (e instanceof APIError) {
    const s = e.status;
    return s === 408 || s === 429 || (typeof s === 'number' && s >= 500);
  }
  return false;
}

/** How long a server asked us to wait, in ms, or null when it did not say (or said nonsense). */
export function retryAfterMs(headers: Headers | undefined | null, now = Date.now()): number | null {
  if (!headers) return null;
  const ms = headers.get('retry-after-ms');
  if (ms !== null && ms.trim() !== '' && Number.isFinite(Number(ms)) && Number(ms) >= 0) return Number(ms);
  const ra = headers.get('retry-after');
  if (ra === null || ra.trim() === '') return null;
  if (/^\s*\d+(\.\d+)?\s*$/.test(ra)) return Number(ra) * 1000;
  const at = Date.parse(ra);
  return Number.isNaN(at) ? null : Math.max(0, at - now);
}

/** The wait before retry number `attempt` (0-based): the server's retry-after if given, else backoff with jitter. */
export function retryDelayMs(e: unknown, attempt: number, opts: { retryBaseMs?: number; maxRetryDelayMs?: number; random?: () => number } = {}): number {
  const base = opts.retryBaseMs ?? 1000;
  const cap = opts.maxRetryDelayMs ?? 60_000;
  const asked = e instanceof APIError ? retryAfterMs(e.headers as Headers | undefined) : null;
  if (asked !== null) return Math.min(cap, asked);
  const backoff = Math.min(cap, base * 2 ** Math.min(attempt, 30));
  // "Equal jitter": between half and all of the backoff, so waits grow but retries spread out.
  return Math.round(backoff / 2 + (backoff / 2) * (opts.random ?? Math.random)());
}

const defaultSleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

export function openaiPolicy(config: OpenAIPolicyConfig): OpenAIPolicy {
  const maxRetries = config.maxRetries ?? 6;
  const client = new OpenAI({
    baseURL: config.baseURL,
    apiKey: config.apiKey ?? process.env.OPENAI_API_KEY ?? 'none',
    maxRetries: 0,
    timeout: config.timeoutMs ?? 600_000,
    defaultHeaders: config.headers,
  });
  const sleep = config.sleep ?? defaultSleep;
  const stats: OpenAIPolicyStats = { requests: 0, retries: 0, completions: 0 };
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
      let completion: OpenAI.Chat.Completions.ChatCompletion;
      for (let attempt = 0; ; attempt++) {
        stats.requests += 1;
        try {
          completion = await client.chat.completions.create(body, { maxRetries: 0 });
          break;
        } catch (e) {
          if (!isRetryable(e) || attempt >= maxRetries) {
            const status = e instanceof APIError && e.status !== undefined ? ` (HTTP ${e.status})` : '';
            const tries = attempt + 1;
            throw new Error(`chat completion failed after ${tries} ${tries === 1 ? 'try' : 'tries'}${status}: ${(e as Error).message}`, { cause: e });
          }
          const delayMs = retryDelayMs(e, attempt, config);
          stats.retries += 1;
          config.onRetry?.({ attempt, status: e instanceof APIError && typeof e.status === 'number' ? e.status : null, delayMs, message: (e as Error).message });
          await sleep(delayMs);
        }
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
