/**
 * `worldline serve`: the verified tasks as reinforcement-learning environments over OpenEnv's
 * protocol. A WebSocket connection on `/ws` is a session (reset, step, state, close); HTTP gives
 * `/health`, `/schema`, `/metadata` and the stateless `/reset` and `/step`. Sessions are bounded
 * (past `maxSessions` a reset gets CAPACITY_REACHED at once), each ends at its idle limit, and a
 * client gone takes its container with it. Closed by default: loopback unless told otherwise, and
 * off loopback only with a bearer token.
 */
import { timingSafeEqual } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { type WebSocket, WebSocketServer } from 'ws';
import { toolVersion } from '../../core/package.js';
import { forOutput, outIdentity } from '../runtime/job_scope.js';
import { removeOrphanContainers } from '../sandbox/engine.js';
import { errorReply, MAX_MESSAGE_BYTES, observationReply, ProtocolError, parseAction, parseMessage, type ResetRequest, SCHEMAS, TOOLS } from './protocol.js';
import { recordEpisode } from './recorder.js';
import { type Reply, Session, type SessionConfig } from './session.js';
import type { TaskCatalog } from './task_picker.js';

export interface ServeOptions extends SessionConfig {
  host: string;
  port: number;
  /** Sessions with a container at once; a reset past them gets CAPACITY_REACHED. */
  maxSessions: number;
  /** A session that hears nothing for this long is closed and its container removed. */
  idleS: number;
  /** Required as `Authorization: Bearer <token>` when set; a non-loopback host must set it. */
  token?: string;
  /** Write each finished episode's trajectory row under the output folder. */
  record: boolean;
  log: (message: string) => void;
}

const LOOPBACK = new Set(['127.0.0.1', '::1', 'localhost']);

/** Messages past this are not read at all (the socket closes, 1009); between MAX_MESSAGE_BYTES and it, an error reply. */
const HARD_PAYLOAD_BYTES = 4 * MAX_MESSAGE_BYTES;

export interface RunningServer {
  url: string;
  port: number;
  /** Sessions holding a container now. */
  sessions(): number;
  close(): Promise<void>;
}

export async function serve(catalog: TaskCatalog, opts: ServeOptions): Promise<RunningServer> {
  if (!LOOPBACK.has(opts.host) && !opts.token)
    throw new Error(`--host ${opts.host} is not loopback: a bearer token is required (--token or WORLDLINE_SERVE_TOKEN)`);
  if (!catalog.size) throw new Error('the dataset has no tasks to serve');
  const out = catalog.out;
  // A killed server's containers (its pid dead) go before this one starts its own.
  const orphans = await removeOrphanContainers(outIdentity(out));
  if (orphans) opts.log(`removed ${orphans} container(s) a killed run or server left`);
  const live = new Set<Session>();
  let starting = 0;

  const authorized = (req: IncomingMessage): boolean => {
    if (!opts.token) return true;
    const given = Buffer.from(req.headers.authorization ?? '');
    const wanted = Buffer.from(`Bearer ${opts.token}`);
    return given.length === wanted.length && timingSafeEqual(given, wanted);
  };

  /** A session started within capacity, its containers labelled for this output folder (the orphan sweep's). */
  const startSession = async (req: ResetRequest): Promise<{ session: Session; reply: Reply }> => {
    const picked = catalog.pick(req);
    if (live.size + starting >= opts.maxSessions)
      throw new ProtocolError('CAPACITY_REACHED', `all ${opts.maxSessions} sessions are in use; retry after one closes`);
    starting += 1;
    try {
      const started = await forOutput(out, () => Session.start(picked, req, opts)).catch((e: unknown) => {
        throw new ProtocolError('FACTORY_ERROR', `cannot start the task's container: ${(e as Error).message}`);
      });
      live.add(started.session);
      return started;
    } finally {
      starting -= 1;
    }
  };

  const closeSession = async (session: Session | null): Promise<void> => {
    if (!session) return;
    live.delete(session);
    await session.close().catch((e: unknown) => opts.log(`closing session ${session.episodeId}: ${(e as Error).message}`));
  };

  const stepSession = async (session: Session, data: Parameters<Session['step']>[0]): Promise<Reply> => {
    const reply = await forOutput(out, () => session.step(data)).catch((e: unknown) => {
      if (e instanceof ProtocolError) throw e;
      throw new ProtocolError('EXECUTION_ERROR', `the action failed: ${(e as Error).message}`);
    });
    const row = session.trajectory;
    if (reply.done && row) {
      live.delete(session);
      if (opts.record) {
        try {
          recordEpisode(out, session.episodeId, row);
        } catch (e) {
          opts.log(`episode ${session.episodeId}: not recorded: ${(e as Error).message}`);
        }
      }
      opts.log(`episode ${session.episodeId} (${row.task_id}, ${row.policy}): ${row.exit_status}, reward ${row.reward}`);
    }
    return reply;
  };

  const wss = new WebSocketServer({ noServer: true, maxPayload: HARD_PAYLOAD_BYTES });
  wss.on('connection', (ws: WebSocket) => {
    let session: Session | null = null;
    let gone = false;
    // Messages are handled one at a time, in order: a step never overtakes its reset.
    let queue: Promise<void> = Promise.resolve();
    let idle: NodeJS.Timeout | undefined;
    const send = (msg: object) => {
      if (!gone) ws.send(JSON.stringify(msg));
    };
    const armIdle = () => {
      clearTimeout(idle);
      idle = setTimeout(() => {
        send(errorReply('SESSION_ERROR', `idle for ${opts.idleS} s: the session is closed and its container removed`));
        ws.close(1000, 'idle');
      }, opts.idleS * 1000);
    };
    const handle = async (raw: Buffer): Promise<void> => {
      if (raw.length > MAX_MESSAGE_BYTES) throw new ProtocolError('VALIDATION_ERROR', `message of ${raw.length} bytes; at most ${MAX_MESSAGE_BYTES}`);
      const msg = parseMessage(raw.toString('utf8'));
      if (msg.type === 'close') {
        ws.close(1000, 'closed by the client');
        return;
      }
      if (msg.type === 'state') {
        send({ type: 'state', data: session ? session.state() : { episode_id: null, step_count: 0, done: false } });
        return;
      }
      if (msg.type === 'reset') {
        const old = session;
        session = null;
        await closeSession(old);
        const started = await startSession(msg.data);
        if (gone) {
          await closeSession(started.session);
          return;
        }
        session = started.session;
        send(observationReply(started.reply.observation, started.reply.reward, started.reply.done, started.reply.metadata));
        return;
      }
      if (!session) {
        if (msg.data.type === 'list_tools') {
          send(observationReply({ tools: TOOLS }, null, false));
          return;
        }
        throw new ProtocolError('SESSION_ERROR', 'no episode: send reset first');
      }
      const reply = await stepSession(session, msg.data);
      send(observationReply(reply.observation, reply.reward, reply.done, reply.metadata));
    };
    armIdle();
    // Idle is the client's silence: the clock stops while a message is handled (a long bash call,
    // grading) and starts again at the reply.
    let pending = 0;
    ws.on('message', (data: Buffer) => {
      pending += 1;
      clearTimeout(idle);
      queue = queue
        .then(() =>
          handle(data).catch((e: unknown) => {
            const err = e instanceof ProtocolError ? e : new ProtocolError('EXECUTION_ERROR', (e as Error).message);
            send(errorReply(err.code, err.message));
          }),
        )
        .then(() => {
          pending -= 1;
          if (!pending && !gone) armIdle();
        });
    });
    const end = () => {
      if (gone) return;
      gone = true;
      clearTimeout(idle);
      // After what is in flight: a reset still starting closes its own session when it sees `gone`.
      queue = queue.then(() => closeSession(session));
    };
    ws.on('close', end);
    ws.on('error', end);
  });

  const json = (res: ServerResponse, status: number, body: unknown) => {
    res.writeHead(status, { 'content-type': 'application/json' });
    res.end(JSON.stringify(body));
  };
  const readBody = (req: IncomingMessage): Promise<unknown> =>
    new Promise((resolve, reject) => {
      const chunks: Buffer[] = [];
      let size = 0;
      req.on('data', (c: Buffer) => {
        size += c.length;
        if (size > MAX_MESSAGE_BYTES) {
          reject(new ProtocolError('VALIDATION_ERROR', `body over ${MAX_MESSAGE_BYTES} bytes`));
          req.destroy();
        } else chunks.push(c);
      });
      req.on('end', () => {
        const text = Buffer.concat(chunks).toString('utf8');
        try {
          resolve(text.trim() ? JSON.parse(text) : {});
        } catch (e) {
          reject(new ProtocolError('INVALID_JSON', `not valid JSON: ${(e as Error).message}`));
        }
      });
      req.on('error', reject);
    });
  const httpStatus = (e: ProtocolError) =>
    ({ INVALID_JSON: 400, VALIDATION_ERROR: 422, SESSION_ERROR: 409, CAPACITY_REACHED: 503, UNKNOWN_TYPE: 400 })[e.code as string] ?? 500;

  const routes: Record<string, (req: IncomingMessage) => Promise<unknown>> = {
    'GET /health': async () => ({ status: 'healthy' }),
    'GET /schema': async () => SCHEMAS,
    'GET /metadata': async () => ({
      name: 'worldline',
      description:
        "Verified Python repository tasks: fix the bug with the agent's tools (bash, view, edit, create, submit); reward 1 when the hidden tests pass.",
      version: toolVersion(),
      tasks: catalog.size,
      max_sessions: opts.maxSessions,
    }),
    'GET /state': async () => ({ episode_id: null, step_count: 0, sessions: live.size }),
    // Stateless, as OpenEnv's HTTP routes are: a fresh environment per request, gone after it.
    'POST /reset': async (req) => {
      const body = (await readBody(req)) as Record<string, unknown>;
      const msg = parseMessage(JSON.stringify({ type: 'reset', data: body }));
      const { session, reply } = await startSession((msg as { data: ResetRequest }).data);
      await closeSession(session);
      return { observation: { ...reply.observation, metadata: reply.metadata }, reward: reply.reward, done: reply.done };
    },
    'POST /step': async (req) => {
      const body = (await readBody(req)) as Record<string, unknown>;
      const action = parseAction(body?.action);
      if (action.type === 'list_tools') return { observation: { tools: TOOLS, metadata: {} }, reward: null, done: false };
      throw new ProtocolError('SESSION_ERROR', 'a tool call needs an episode, and HTTP /step has none: open a session on the WebSocket /ws');
    },
  };

  const http: Server = createServer((req, res) => {
    if (!authorized(req)) return json(res, 401, { detail: 'a bearer token is required' });
    const route = routes[`${req.method} ${(req.url ?? '').split('?')[0]}`];
    if (!route) return json(res, 404, { detail: 'not found' });
    route(req).then(
      (body) => json(res, 200, body),
      (e: unknown) => {
        const err = e instanceof ProtocolError ? e : new ProtocolError('EXECUTION_ERROR', (e as Error).message);
        json(res, httpStatus(err), { detail: err.message, code: err.code });
      },
    );
  });
  http.on('upgrade', (req, socket, head) => {
    if ((req.url ?? '').split('?')[0] !== '/ws' || !authorized(req)) {
      socket.end(`HTTP/1.1 ${authorized(req) ? '404 Not Found' : '401 Unauthorized'}\r\nConnection: close\r\n\r\n`);
      return;
    }
    wss.handleUpgrade(req, socket, head, (ws) => wss.emit('connection', ws, req));
  });
  await new Promise<void>((resolve, reject) => {
    http.once('error', reject);
    http.listen(opts.port, opts.host, resolve);
  });
  const port = (http.address() as AddressInfo).port;
  const host = opts.host.includes(':') ? `[${opts.host}]` : opts.host;
  return {
    url: `http://${host}:${port}`,
    port,
    sessions: () => live.size,
    async close() {
      for (const ws of wss.clients) ws.terminate();
      await Promise.all([...live].map((s) => closeSession(s)));
      await new Promise<void>((resolve) => http.close(() => resolve()));
    },
  };
}
