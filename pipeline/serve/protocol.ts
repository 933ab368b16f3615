/**
 * OpenEnv's wire protocol (shared/research/rl-envs.md), as `worldline serve` speaks it: the
 * WebSocket messages a client sends (reset, step, state, close), the replies (observation,
 * state, error with OpenEnv's codes), the agent's tools as MCP-style actions (`list_tools`,
 * `call_tool`) and the JSON Schemas `/schema` gives. Parsing never throws: anything malformed
 * becomes an error reply, and the connection goes on.
 */
import { TOOL_NAMES, TOOL_SPECS } from '../agent/agent_env.js';

export const ERROR_CODES = [
  'INVALID_JSON',
  'UNKNOWN_TYPE',
  'VALIDATION_ERROR',
  'EXECUTION_ERROR',
  'CAPACITY_REACHED',
  'FACTORY_ERROR',
  'SESSION_ERROR',
] as const;
export type ErrorCode = (typeof ERROR_CODES)[number];

/** A failure the client is told about with its code; the connection stays open. */
export class ProtocolError extends Error {
  constructor(
    readonly code: ErrorCode,
    message: string,
  ) {
    super(message);
  }
}

/** The largest message a client may send: a tool call's arguments are capped far below (agent_env.ts). */
export const MAX_MESSAGE_BYTES = 1 << 20;

/** What reset takes: a task by id, or a seed that picks one among the tasks a filter keeps; who the policy is. */
export interface ResetRequest {
  task_id?: string;
  seed?: number;
  kind?: string;
  repo?: string;
  split?: string;
  difficulty?: string;
  policy?: string;
  model?: string;
  episode_id?: string;
}

/** The agent's actions: list the tools, or call one. */
export type Action = { type: 'list_tools' } | { type: 'call_tool'; tool_name: string; arguments: Record<string, unknown> };

export type ClientMessage = { type: 'reset'; data: ResetRequest } | { type: 'step'; data: Action } | { type: 'state' } | { type: 'close' };

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

function optional<T>(data: Record<string, unknown>, key: string, type: 'string' | 'number'): T | undefined {
  const v = data[key];
  if (v === undefined || v === null) return undefined;
  if (typeof v !== type || (type === 'number' && !Number.isSafeInteger(v)))
    throw new ProtocolError('VALIDATION_ERROR', `reset: "${key}" must be ${type === 'number' ? 'an integer' : 'a string'}`);
  return v as T;
}

function parseReset(data: unknown): ResetRequest {
  const d = data === undefined || data === null ? {} : data;
  if (!isObject(d)) throw new ProtocolError('VALIDATION_ERROR', 'reset: "data" must be an object');
  const known = ['task_id', 'seed', 'kind', 'repo', 'split', 'difficulty', 'policy', 'model', 'episode_id'];
  const unknown = Object.keys(d).filter((k) => !known.includes(k));
  if (unknown.length) throw new ProtocolError('VALIDATION_ERROR', `reset: unknown field(s) ${unknown.join(', ')}; known: ${known.join(', ')}`);
  const req: ResetRequest = {};
  for (const k of ['task_id', 'kind', 'repo', 'split', 'difficulty', 'policy', 'model', 'episode_id'] as const) {
    const v = optional<string>(d, k, 'string');
    if (v !== undefined) req[k] = v;
  }
  const seed = optional<number>(d, 'seed', 'number');
  if (seed !== undefined) req.seed = seed;
  return req;
}

/** An action: `{type: list_tools}` or `{type: call_tool, tool_name, arguments}` (OpenEnv's MCP actions). */
export function parseAction(data: unknown): Action {
  if (!isObject(data)) throw new ProtocolError('VALIDATION_ERROR', 'step: the action must be an object');
  if (data.type === 'list_tools') return { type: 'list_tools' };
  if (data.type !== 'call_tool') throw new ProtocolError('VALIDATION_ERROR', 'step: the action\'s "type" must be list_tools or call_tool');
  if (typeof data.tool_name !== 'string' || !(TOOL_NAMES as readonly string[]).includes(data.tool_name))
    throw new ProtocolError('VALIDATION_ERROR', `step: "tool_name" must be one of ${TOOL_NAMES.join(', ')}`);
  const args = data.arguments ?? {};
  if (!isObject(args)) throw new ProtocolError('VALIDATION_ERROR', 'step: "arguments" must be an object');
  return { type: 'call_tool', tool_name: data.tool_name, arguments: args };
}

/** One message from the client, or the ProtocolError that says what is wrong with it. */
export function parseMessage(raw: string): ClientMessage {
  let msg: unknown;
  try {
    msg = JSON.parse(raw);
  } catch (e) {
    throw new ProtocolError('INVALID_JSON', `not valid JSON: ${(e as Error).message}`);
  }
  if (!isObject(msg) || typeof msg.type !== 'string') throw new ProtocolError('VALIDATION_ERROR', 'a message is an object with a "type"');
  switch (msg.type) {
    case 'reset':
      return { type: 'reset', data: parseReset(msg.data) };
    case 'step':
      return { type: 'step', data: parseAction(msg.data) };
    case 'state':
      return { type: 'state' };
    case 'close':
      return { type: 'close' };
    default:
      throw new ProtocolError('UNKNOWN_TYPE', `unknown message type "${msg.type.slice(0, 40)}" (reset, step, state, close)`);
  }
}

/** The tools as `list_tools` gives them: name, description and the arguments' JSON Schema. */
export const TOOLS = TOOL_SPECS.map((t) => ({ name: t.function.name, description: t.function.description, input_schema: t.function.parameters }));

/** An observation reply: the observation's own fields, then the reward (null until the episode ends) and whether it is done. */
export const observationReply = (observation: Record<string, unknown>, reward: number | null, done: boolean, metadata: Record<string, unknown> = {}) => ({
  type: 'observation',
  data: { observation: { ...observation, metadata }, reward, done, metadata },
});

export const errorReply = (code: ErrorCode, message: string) => ({ type: 'error', data: { message, code } });

/** `/schema`: what an action, an observation and the state look like. */
export const SCHEMAS = {
  action: {
    oneOf: [
      { type: 'object', properties: { type: { const: 'list_tools' } }, required: ['type'] },
      {
        type: 'object',
        properties: { type: { const: 'call_tool' }, tool_name: { enum: [...TOOL_NAMES] }, arguments: { type: 'object' } },
        required: ['type', 'tool_name'],
      },
    ],
  },
  observation: {
    type: 'object',
    properties: {
      task_id: { type: 'string' },
      prompt: { type: 'string', description: 'The system message the agent gets: the rules and the tools' },
      problem_statement: { type: 'string' },
      tools: { type: 'array' },
      tool_name: { type: 'string' },
      result: {
        type: ['object', 'null'],
        properties: { output: { type: 'string' }, exit_code: { type: ['integer', 'null'] }, duration_s: { type: 'number' } },
      },
      error: { type: ['object', 'null'], properties: { error_type: { type: 'string' }, message: { type: 'string' } } },
      done: { type: 'boolean' },
      reward: { type: ['number', 'null'] },
      metadata: { type: 'object' },
    },
  },
  state: {
    type: 'object',
    properties: {
      episode_id: { type: ['string', 'null'] },
      step_count: { type: 'integer' },
      task_id: { type: ['string', 'null'] },
      done: { type: 'boolean' },
      exit_status: { type: ['string', 'null'] },
    },
    required: ['episode_id', 'step_count'],
  },
};
