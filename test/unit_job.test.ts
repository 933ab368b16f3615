/**
 * A queue job's options: one enqueued by an older build lacks the options added since, and the
 * worker runs it with today's defaults (forage's --task-concurrency: two tasks at a time, not none).
 */
import { describe, expect, it } from 'vitest';
import { jobPipelineOptions, type UnitJobData } from '../pipeline/queue/unit_job.js';
import { DEFAULTS, type PipelineOptions } from '../pipeline/runtime/options.js';

const job = (options: Partial<Omit<PipelineOptions, 'out'>>): UnitJobData => ({
  unit: {} as UnitJobData['unit'],
  stages: ['forage'],
  options: options as Omit<PipelineOptions, 'out'>,
  timeoutS: 0,
});

describe("a queue job's options", () => {
  it('gives a job without taskConcurrency the default of 2, and keeps what a job names', () => {
    const { taskConcurrency: _, ...older } = { ...DEFAULTS, policy: 'none' as const };
    expect('taskConcurrency' in older).toBe(false);
    const options = jobPipelineOptions(job(older));
    expect(options.taskConcurrency).toBe(2);
    expect(options.policy).toBe('none');
    expect(jobPipelineOptions(job({ ...older, taskConcurrency: 1 })).taskConcurrency).toBe(1);
  });
});
