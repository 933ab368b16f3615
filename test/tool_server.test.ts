/**
 * The agent's tool server (tracers/tool_server.py): a command run through it answers exactly as
 * one exec of it does, in real containers of the 3.11 base image; a command that kills or stops
 * the server costs that command's observation only, and the next one runs by exec.
 */
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { docker } from '../pipeline/sandbox/engine.js';
import { SandboxSession } from '../pipeline/sandbox/sandbox.js';

const start = (toolServer: boolean) =>
  SandboxSession.start({
    image: inject('base311'),
    env: { UNIT_VAR: 'from the unit' },
    limits: { memoryMb: 256, pids: 64, cpus: 1 },
    labels: { 'worldline.role': 'test-tool-server' },
    toolServer,
  });

/** An agent's bash command that kills (or stops) every process whose command line names the server, but itself. */
const signalServer = (signal: string) =>
  `for p in /proc/[0-9]*; do [ "\${p#/proc/}" != $$ ] && grep -q tool_server.py $p/cmdline 2>/dev/null && kill -${signal} \${p#/proc/}; done; echo signalled`;

describe('the tool server', () => {
  let exec: SandboxSession;
  let served: SandboxSession;
  beforeAll(async () => {
    [exec, served] = await Promise.all([start(false), start(true)]);
  }, 120_000);
  afterAll(async () => {
    await Promise.all([exec?.close(), served?.close()]);
  });

  it('answers every command as one exec of it does: folder, environment, descriptors, session, limits, privileges, exit status, timeout, output caps', async () => {
    expect(exec.served).toBe(false);
    expect(served.served).toBe(true);
    const commands: [string, number, number][] = [
      ['pwd; env | sort; umask; ulimit -a', 10, 20_000],
      // stdin from /dev/null, stdout and stderr on pipes, `timeout` leads the command's own session.
      [
        'readlink /proc/self/fd/0; [ -p /proc/self/fd/1 ] && [ -p /proc/self/fd/2 ] && echo pipes; read -r _ _ _ ppid pgid sid _ < /proc/$$/stat; [ $pgid = $sid ] && [ $sid = $ppid ] && echo timeout leads the session',
        10,
        20_000,
      ],
      ['grep -E "^(Uid|Gid|Groups|CapEff|CapBnd|NoNewPrivs|Seccomp|SigBlk|SigIgn):" /proc/self/status', 10, 20_000],
      // Only stderr: the engine reads stdout and stderr as two streams, so their order is a race there (the server's is below).
      ['echo err >&2; exit 7', 10, 20_000],
      // As pytest does on a pipe: stderr at once, stdout buffered and flushed at exit; the engine sees them apart.
      [`python3 -c "import sys, time; print('summary'); sys.stderr.write('not found\\n'); sys.stderr.flush(); time.sleep(0.5)"`, 10, 20_000],
      ['kill -TERM $$', 10, 20_000],
      ['sleep 30', 1, 20_000],
      // A background child that keeps the pipes open: cut when the engine would cut it.
      ['echo early; (sleep 4; echo late) &', 10, 20_000],
      [`python3 -c "print('é' * 5000)"`, 10, 1000],
      ['head -c 5000000 /dev/zero | tr "\\0" a', 10, 20_000],
      ['printf "\\xff\\xfe not utf-8"', 10, 20_000],
      ['true', 10, 20_000],
    ];
    for (const [command, timeoutS, cap] of commands) {
      const byExec = await exec.exec(['bash', '-c', command], timeoutS, cap);
      const byServer = await served.exec(['bash', '-c', command], timeoutS, cap);
      expect(byServer, command).toEqual(byExec);
    }
    expect(served.served).toBe(true);
    // Not vacuous: the answers carry what they should.
    const status = await served.exec(['bash', '-c', 'echo $UNIT_VAR; pwd; exit 3'], 10, 100);
    expect(status).toEqual({ output: 'from the unit\n/repo\n', exitCode: 3 });
    expect((await served.exec(['sleep', '30'], 1, 100)).exitCode).toBe(124);
    // One pipe: the order the command wrote in, however close together.
    expect(await served.exec(['bash', '-c', 'echo out; echo err >&2; echo out again'], 10, 100)).toEqual({ output: 'out\nerr\nout again\n', exitCode: 0 });
    const seq = Array.from({ length: 1000 }, (_, n) => `${n + 1}\n`).join('');
    expect((await served.exec(['seq', '1000'], 10, 50)).output).toBe(`${seq.slice(0, 50)}\n[output capped at 50 characters]`);
  }, 300_000);

  it("runs the session's setup as the server's first command: the container's only exec is the server's", async () => {
    const label = `setup-${process.pid}-${Date.now()}`;
    const since = Math.floor(Date.now() / 1000) - 1;
    const session = await SandboxSession.start({
      image: inject('base311'),
      env: {},
      limits: { memoryMb: 256, pids: 64, cpus: 1 },
      labels: { 'worldline.role': 'test-tool-server', 'worldline.test': label },
      toolServer: true,
      setup: { script: 'echo "$1" > /tmp/set-up', args: ['by the setup'] },
    });
    try {
      const [found] = await docker().listContainers({ filters: { label: [`worldline.test=${label}`] } });
      // The engine's own account of the execs made in this container so far.
      const events = await docker().getEvents({
        since,
        until: Math.ceil(Date.now() / 1000) + 1,
        filters: { type: ['container'], event: ['exec_create'], container: [found.Id] },
      });
      const text = await new Promise<string>((done) => {
        let all = '';
        events.on('data', (chunk: Buffer) => (all += chunk.toString()));
        events.on('end', () => done(all));
      });
      const execs = text
        .split('\n')
        .filter(Boolean)
        .map((l) => (JSON.parse(l) as { Action: string }).Action);
      expect(execs).toHaveLength(1);
      // Our own interpreter (its loader, from our mount), not the image's python3.
      expect(execs[0]).toMatch(
        /^exec_create: \/worldline\/py\/\S+ --inhibit-cache --library-path \S+ \/worldline\/py\/\S+ -I -S -B \/worldline\/lib\/tool_server\.py/,
      );
      expect(session.served).toBe(true);
      expect(await session.exec(['cat', '/tmp/set-up'], 10, 100)).toEqual({ output: 'by the setup\n', exitCode: 0 });
    } finally {
      await session.close();
    }
  }, 120_000);

  it('a command that kills the server loses its own output only: the next command runs by exec', async () => {
    const session = await start(true);
    try {
      expect(session.served).toBe(true);
      const killing = await session.exec(['bash', '-c', signalServer('KILL')], 10, 1000);
      expect(killing.exitCode).toBeNull();
      expect(session.served).toBe(false);
      expect(await session.exec(['bash', '-c', 'echo next; pwd; exit 5'], 10, 1000)).toEqual({ output: 'next\n/repo\n', exitCode: 5 });
    } finally {
      await session.close();
    }
  }, 120_000);

  it("a command that floods the server's channel (its stdout, opened through /proc) is cut at the answer's room, not read without end", async () => {
    const session = await start(true);
    try {
      // 256 MiB, no newline, written into the channel the host reads the server's answers from.
      const flood = `for p in /proc/[0-9]*; do grep -q tool_server.py $p/cmdline 2>/dev/null && head -c 268435456 /dev/zero > $p/fd/1; done; echo flooded`;
      const started = Date.now();
      const flooding = await session.exec(['bash', '-c', flood], 30, 1000);
      expect(flooding.exitCode).toBeNull();
      // Given up at the first chunk past the room: read into one growing buffer, it held the host until the answer's deadline (45 s).
      expect(Date.now() - started).toBeLessThan(20_000);
      expect(session.served).toBe(false);
      expect(await session.exec(['bash', '-c', 'echo next'], 10, 1000)).toEqual({ output: 'next\n', exitCode: 0 });
    } finally {
      await session.close();
    }
  }, 120_000);

  it('a command that stops the server is answered at its deadline, and the next runs by exec', async () => {
    const session = await start(true);
    try {
      const stopping = await session.exec(['bash', '-c', signalServer('STOP')], 1, 1000);
      expect(stopping.exitCode).toBeNull();
      expect(session.served).toBe(false);
      expect(await session.exec(['bash', '-c', 'echo next'], 10, 1000)).toEqual({ output: 'next\n', exitCode: 0 });
    } finally {
      await session.close();
    }
  }, 120_000);
});
