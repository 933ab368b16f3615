/**
 * What `worldline status --redis` adds to the ledger's counts: where the queue's units are now
 * (waiting, active, retrying, dead, per stage), how fast units finish, the ETA at that pace, and
 * the most common failure reasons. The ledger stays the record of what is done.
 */
import { Queue } from 'bullmq';
import { gb } from '../../core/disk.js';
import { table } from '../../core/table.js';
import { STAGES, type StageName } from '../runtime/ledger.js';
import type { StatusReport } from '../runtime/status.js';
import { redisConnection } from './connection.js';
import { stageOfReason, type UnitJobData, type UnitJobProgress, type UnitJobResult } from './unit_job.js';

type Where = StageName | 'queue';

export interface QueueStatus {
  queue: string;
  counts: { waiting: number; active: number; retrying: number; completed: number; dead: number };
  stages: Record<Where, { waiting: number; active: number; done: number; failed: number; retrying: number; dead: number }>;
  /** Units per minute over the most recent completions; null before two are done. */
  throughput_per_min: number | null;
  eta_s: number | null;
  top_failures: { stage: string; reason: string; units: number }[];
  dead_letters: { unit_id: string; repo: string; attempts: number; stage: string; reason: string }[];
}

/** Completions the throughput is measured over: recent enough to follow a change of pace. */
const RECENT = 200;

export async function readQueueStatus(redis: string, name: string, ledger: StatusReport): Promise<QueueStatus> {
  const q = new Queue<UnitJobData, UnitJobResult>(name, { connection: redisConnection(redis) });
  try {
    const c = await q.getJobCounts('waiting', 'prioritized', 'paused', 'active', 'delayed', 'completed', 'failed');
    const counts = { waiting: c.waiting + c.prioritized + c.paused, active: c.active, retrying: c.delayed, completed: c.completed, dead: c.failed };
    const zero = () => ({ waiting: 0, active: 0, done: 0, failed: 0, retrying: 0, dead: 0 });
    const stages = Object.fromEntries([...STAGES, 'queue'].map((s) => [s, zero()])) as QueueStatus['stages'];
    for (const s of STAGES) {
      stages[s].done = ledger.stages[s].ok;
      stages[s].failed = ledger.stages[s].failed;
    }
    for (const job of await q.getJobs(['active'])) {
      const at = (job.progress as UnitJobProgress | undefined)?.stage ?? job.data.stages[0];
      stages[at].active++;
    }
    for (const job of await q.getJobs(['delayed'])) stages[stageOfReason(job.failedReason) as Where].retrying++;
    const dead = await q.getJobs(['failed']);
    const dead_letters = dead.map((job) => ({
      unit_id: String(job.id),
      repo: job.data.unit.repo,
      attempts: job.attemptsMade,
      stage: stageOfReason(job.failedReason),
      reason: job.failedReason,
    }));
    for (const d of dead_letters) stages[d.stage as Where].dead++;
    // A unit not yet started waits for every stage it was enqueued for.
    for (const job of await q.getJobs(['waiting', 'prioritized', 'paused'])) for (const s of job.data.stages) stages[s].waiting++;
    const reasons = new Map<string, { stage: string; reason: string; units: number }>();
    const deadIds = new Set(dead_letters.map((d) => d.unit_id));
    const ledgerOnly = ledger.failures.filter((f) => !deadIds.has(f.unit_id)).map((f) => ({ stage: f.stage, reason: f.reason ?? '' }));
    for (const f of [...dead_letters, ...ledgerOnly]) {
      // The reason's first line groups alike failures (paths and counts after it differ per unit).
      const reason = f.reason
        .replace(/^[a-z]+: /, '')
        .split('\n')[0]
        .slice(0, 160);
      const key = `${f.stage}\0${reason}`;
      const r = reasons.get(key) ?? { stage: f.stage, reason, units: 0 };
      r.units++;
      reasons.set(key, r);
    }
    const top_failures = [...reasons.values()].sort((a, b) => b.units - a.units || a.reason.localeCompare(b.reason)).slice(0, 5);
    const recent = (await q.getJobs(['completed'], 0, RECENT - 1)).map((j) => j.finishedOn ?? 0).filter(Boolean);
    const span = recent.length > 1 ? Math.max(...recent) - Math.min(...recent) : 0;
    const throughput_per_min = span > 0 ? ((recent.length - 1) / span) * 60_000 : null;
    const left = counts.waiting + counts.active + counts.retrying;
    const eta_s = throughput_per_min ? Math.round((left / throughput_per_min) * 60) : left === 0 ? 0 : null;
    return { queue: name, counts, stages, throughput_per_min, eta_s, top_failures, dead_letters };
  } finally {
    await q.close();
  }
}

export function formatQueueStatus(s: QueueStatus, ledger: StatusReport): string {
  const { counts: c } = s;
  const rows = (Object.keys(s.stages) as Where[])
    .filter((w) => w !== 'queue' || Object.values(s.stages.queue).some(Boolean))
    .map((w) => {
      const r = s.stages[w];
      return [w, r.waiting, r.active, r.done, r.failed, r.retrying, r.dead];
    });
  const eta =
    s.eta_s === null ? 'unknown' : s.eta_s === 0 ? 'done' : `${Math.floor(s.eta_s / 3600)}h${String(Math.floor((s.eta_s % 3600) / 60)).padStart(2, '0')}m`;
  const parts = [
    `queue ${s.queue}: ${c.waiting} waiting, ${c.active} active, ${c.retrying} retrying, ${c.completed} done, ${c.dead} dead`,
    `throughput: ${s.throughput_per_min === null ? 'n/a' : `${s.throughput_per_min.toFixed(1)} units/min`}; ETA: ${eta}`,
    '',
    table([['stage', 'waiting', 'active', 'done', 'failed', 'retrying', 'dead'], ...rows]),
  ];
  if (ledger.mirrors) parts.push('', `mirrors cache: ${gb(ledger.mirrors.bytes)} in ${ledger.mirrors.path}`);
  if (s.top_failures.length) parts.push('', 'top failure reasons:', ...s.top_failures.map((f) => `  ${f.units} × ${f.stage}: ${f.reason}`));
  if (s.dead_letters.length)
    parts.push(
      '',
      'dead letters:',
      ...s.dead_letters.map((d) => `  ${d.unit_id}  after ${d.attempts} attempt(s)  ${d.stage}: ${d.reason.replace(/^[a-z]+: /, '')}`),
    );
  return parts.join('\n');
}
