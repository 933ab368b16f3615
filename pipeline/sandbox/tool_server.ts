/**
 * The host's end of the agent's tool server (tracers/tool_server.py): one exec stream into the
 * rollout container that carries every later command, instead of one exec each (an exec is three
 * round trips to the engine, about 0.1 s). The command runs as an exec of it would (see the
 * Python's docstring). The server runs as the sandbox user, so the agent's own commands can kill,
 * stop or talk to it: that costs the agent nothing but its own observations, and the session then
 * goes back to one exec per command.
 */
import type { Duplex } from 'node:stream';
import type Docker from 'dockerode';
import { docker } from './engine.js';

/** A command's answer: its exit status, the first `cap` bytes of its output, and how many more there were. */
export interface ServedRun {
  exitCode: number;
  kept: Buffer;
  dropped: number;
}

/** Room for an answer's header line ("EXIT KEPT DROPPED", or the first "ready"). */
const HEADER_ROOM = 1 << 12;
/** The server answers a command within its timeout, the kill's grace, the output drain, and this much. */
const ANSWER_SLACK_S = 15;

export class ToolServer {
  private buffer = Buffer.alloc(0);
  /**
   * The most the channel may hold unread: the answer asked for (its cap) and a header. More is not
   * the server's (a process of the container that reached its output): the channel is given up, not
   * read into memory without end.
   */
  private room = HEADER_ROOM;
  private waiting: ((answer: ServedRun | null) => void) | null = null;
  private gone = false;
  private ready = false;

  private constructor(private readonly stream: Duplex) {
    const sink = {
      write: (chunk: Buffer) => {
        this.receive(chunk);
        return true;
      },
    };
    const ignore = { write: () => true };
    docker().modem.demuxStream(stream, sink as unknown as NodeJS.WritableStream, ignore as unknown as NodeJS.WritableStream);
    const end = () => this.stop();
    stream.on('end', end);
    stream.on('close', end);
    stream.on('error', end);
  }

  /**
   * Starts the server in `container` (`cmd` on our interpreter, with `env` of ours); `commands` says
   * how a command's environment differs from the server's. Null when it does not come up (the
   * session then execs each command).
   */
  static async start(
    container: Docker.Container,
    server: { cmd: string[]; env: Record<string, string>; commands: { set: Record<string, string>; drop: string[] } },
  ): Promise<ToolServer | null> {
    try {
      const ex = await container.exec({
        Cmd: server.cmd,
        Env: Object.entries(server.env).map(([k, v]) => `${k}=${v}`),
        AttachStdin: true,
        AttachStdout: true,
        AttachStderr: true,
        WorkingDir: '/repo',
      });
      const stream = (await ex.start({ hijack: true, stdin: true })) as Duplex;
      const served = new ToolServer(stream);
      stream.write(`${JSON.stringify(server.commands)}\n`);
      if (await served.next(10)) return served;
      served.stop();
      return null;
    } catch {
      return null;
    }
  }

  /**
   * Runs `cmd` under `timeout -k 5 timeoutS` (`own`: a program of ours, with the server's
   * environment, killed at timeoutS); null when the server is gone or did not answer (the
   * command's fate is then unknown).
   */
  run(cmd: string[], timeoutS: number, capBytes: number, own = false): Promise<ServedRun | null> {
    if (this.gone) return Promise.resolve(null);
    this.room = capBytes + HEADER_ROOM;
    const answer = this.next(timeoutS + ANSWER_SLACK_S);
    this.stream.write(`${JSON.stringify({ cmd, timeout: timeoutS, cap: capBytes, ...(own ? { own } : {}) })}\n`);
    return answer;
  }

  get alive(): boolean {
    return !this.gone;
  }

  /** Ends the channel; a command waiting for its answer gets null. */
  stop(): void {
    if (this.gone) return;
    this.gone = true;
    this.stream.destroy();
    this.settle(null);
  }

  private next(withinS: number): Promise<ServedRun | null> {
    return new Promise((resolve) => {
      const timer = setTimeout(() => this.stop(), withinS * 1000);
      this.waiting = (answer) => {
        clearTimeout(timer);
        resolve(answer);
      };
      this.parse();
    });
  }

  private settle(answer: ServedRun | null): void {
    const waiting = this.waiting;
    this.waiting = null;
    waiting?.(answer);
  }

  private receive(chunk: Buffer): void {
    this.buffer = Buffer.concat([this.buffer, chunk]);
    if (this.buffer.length > this.room) this.stop();
    else this.parse();
  }

  /** An answer is a line "EXIT KEPT DROPPED" and KEPT bytes; the first line of all is the server's "ready". */
  private parse(): void {
    if (!this.waiting) return;
    const eol = this.buffer.indexOf(10);
    if (eol < 0) return;
    const head = this.buffer.subarray(0, eol).toString();
    if (head === 'ready' && !this.ready) {
      this.ready = true;
      this.buffer = this.buffer.subarray(eol + 1);
      this.settle({ exitCode: 0, kept: Buffer.alloc(0), dropped: 0 });
      return;
    }
    // Anything else on the channel was not written by the server.
    if (!/^-?\d+ \d+ \d+$/.test(head)) {
      this.stop();
      return;
    }
    const [exitCode, kept, dropped] = head.split(' ').map(Number);
    if (eol + 1 + kept > this.room) {
      this.stop();
      return;
    }
    if (this.buffer.length < eol + 1 + kept) return;
    const body = Buffer.from(this.buffer.subarray(eol + 1, eol + 1 + kept));
    this.buffer = this.buffer.subarray(eol + 1 + kept);
    this.settle({ exitCode, kept: body, dropped });
  }
}
