/**
 * A graceful stop for `run`, `worker` and `shard`. The first SIGINT or SIGTERM stops the process's
 * work (runtime/job_scope.ts `stopAll`: no unit, stage, container or image build starts, and what is
 * in flight records nothing in the ledger) and removes its containers at once, so their runs end and
 * their work disks are released on the way out; a worker puts its jobs back on the queue. What is
 * left has STOP_GRACE_S to unwind; then the process detaches the work disks it still has mounted and
 * exits. A second signal exits at once. Either way the exit status is 128 + the signal's number
 * (130 for SIGINT, 143 for SIGTERM), and the next run (or `gc`) removes what a stop left behind.
 */
import { constants } from 'node:os';
import { stopAll } from './runtime/job_scope.js';
import { removeOwnContainers } from './sandbox/engine.js';
import { detachWorkDisks } from './sandbox/work_disk.js';

/** Seconds a stopped process gives its work in flight to unwind (containers are removed at once). */
export const STOP_GRACE_S = 20;

/** The command was stopped by a signal: exit 128 + its number. */
export class Stopped extends Error {
  readonly exitCode: number;
  constructor(
    readonly signal: NodeJS.Signals,
    what: string,
  ) {
    super(`stopped by ${signal}: ${what}`);
    this.exitCode = exitCodeOf(signal);
  }
}

const exitCodeOf = (signal: NodeJS.Signals) => 128 + (constants.signals[signal] ?? 15);

/** The signal that stopped this process, if one did. */
let caught: NodeJS.Signals | null = null;

/** Installs the stop on SIGINT and SIGTERM for one command; `dispose` takes it off again. */
export function stopOnSignals(log: (m: string) => void): { dispose(): Promise<void> } {
  let removal: Promise<unknown> = Promise.resolve();
  const handler = (signal: NodeJS.Signals) => {
    if (caught) {
      log(`${signal} again: exiting now; the next run or worldline gc removes what is left`);
      process.exit(exitCodeOf(signal));
    }
    caught = signal;
    log(`${signal}: stopping: no new work, this process's containers removed, nothing in flight recorded (another ${signal} exits at once)`);
    stopAll(`stopped by ${signal}`);
    removal = removeOwnContainers().catch(() => 0);
    const timer = setTimeout(() => {
      const disks = detachWorkDisks();
      log(`still stopping after ${STOP_GRACE_S} s: ${disks} work disk(s) detached; exiting`);
      void removeOwnContainers()
        .catch(() => 0)
        .finally(() => process.exit(exitCodeOf(signal)));
    }, STOP_GRACE_S * 1000);
    // It must not keep a process that finished unwinding alive.
    timer.unref();
  };
  process.on('SIGINT', handler);
  process.on('SIGTERM', handler);
  return {
    /** Takes the handlers off; after a stop, once its containers' removal is done (the engine confirmed it). */
    async dispose() {
      process.off('SIGINT', handler);
      process.off('SIGTERM', handler);
      await removal;
    },
  };
}

/** Throws Stopped when a signal stopped this process: what it was doing (`what`) did not finish. */
export function throwIfStopped(what: string): void {
  if (caught) throw new Stopped(caught, what);
}
