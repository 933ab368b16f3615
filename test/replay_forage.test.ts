/**
 * Exact replay through `worldline run --policy replay --replay-from DIR`, end to end on real
 * containers: a run records its trajectories with the image id, the tool versions and the seed;
 * a second run replays them and stores the result (exact, no differences) in its dataset; a
 * recording with a tampered observation and another image is replayed with both differences
 * stored per step, read back by DuckDB; `audit` reports the share of exact replays.
 */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { packageRoot } from '../core/package.js';
import { writeDataset } from '../datasets/dataset_writer.js';
import { readRows } from '../datasets/reader.js';
import { defaultNormalize } from '../pipeline/agent/policies/replay.js';
import { trajectoriesSchema } from '../schemas/index.js';
import type { TaskRecord } from '../schemas/tasks.js';
import type { TrajectoryRecord } from '../schemas/trajectories.js';
import { cli, sql, tempDir } from './helpers.js';

const RUN = ['--validate-runs', '1', '--mutations-per-unit', '1', '--mutation-tries', '30', '--issue-candidates', '0'];

async function rows<T>(dataset: string, config: string): Promise<T[]> {
  const out: T[] = [];
  for await (const r of readRows(dataset, { config })) out.push(r as unknown as T);
  return out;
}

const replayAudit = async (dataset: string) => {
  const res = await cli(['audit', dataset, '--json']);
  expect(res.code, res.stderr).toBe(0);
  return (JSON.parse(res.stdout) as { outcomes: { replay: unknown } }).outcomes.replay;
};

describe('forage --policy replay --replay-from DIR', () => {
  let dir: string;
  let manifest: string;
  let recorded: TrajectoryRecord;
  let task: TaskRecord;

  beforeAll(async () => {
    dir = tempDir('replay');
    manifest = join(dir, 'manifest.jsonl');
    writeFileSync(manifest, `${JSON.stringify({ repo: join(packageRoot, 'examples', 'repos', 'calc') })}\n`);
    const res = await cli(['run', '--manifest', manifest, '--out', join(dir, 'recorded'), ...RUN]);
    expect(res.code, res.stderr).toBe(0);
    [recorded] = await rows<TrajectoryRecord>(join(dir, 'recorded', 'dataset'), 'trajectories');
    [task] = await rows<TaskRecord>(join(dir, 'recorded', 'dataset'), 'tasks');
  }, 900_000);

  it('records the image id, the tool versions and the seed with every trajectory', () => {
    expect(recorded).toMatchObject({
      policy: 'oracle',
      task_id: task.instance_id,
      image_id: task.image_id,
      seed: 0,
      replay_of: null,
      replay_exact: null,
      replay_diffs: [],
    });
    expect(recorded.image_id).toMatch(/^sha256:[0-9a-f]{64}$/);
    expect(recorded.tool_versions).toMatch(/^worldline \S+; agent_tools [0-9a-f]{12}$/);
  });

  it('replays a recording exactly in a fresh run, tells a tampered one apart step by step, and audits the share', async () => {
    const out = join(dir, 'replayed');
    const res = await cli(['run', '--manifest', manifest, '--out', out, ...RUN, '--policy', 'replay', '--replay-from', join(dir, 'recorded', 'dataset')]);
    expect(res.code, res.stderr).toBe(0);
    expect(res.stderr).toContain(`replay ${task.instance_id}: replayed exactly`);
    const [exact] = await sql<{ policy: string; replay_of: string; replay_exact: boolean; n: bigint; resolved: boolean; image_id: string }>(
      `select policy, replay_of, replay_exact, len(replay_diffs) as n, resolved, image_id from '${out}/dataset/trajectories/data/*.parquet'`,
    );
    expect(exact).toEqual({ policy: 'replay', replay_of: recorded.trajectory_id, replay_exact: true, n: 0n, resolved: true, image_id: recorded.image_id });
    expect(await replayAudit(join(out, 'dataset'))).toEqual({ trajectories: 1, exact: 1, share: 1 });

    // A recording from another image, with one observation that the tools never print.
    const tampered: TrajectoryRecord = structuredClone(recorded);
    tampered.image_id = 'sha256:another-image';
    tampered.steps[0].observation = 'tampered';
    const recordings = join(dir, 'tampered');
    await writeDataset(recordings, [{ schema: trajectoriesSchema, rows: [tampered] }]);
    const again = await cli(['run', '--manifest', manifest, '--out', out, ...RUN, '--policy', 'replay', '--replay-from', recordings]);
    expect(again.code, again.stderr).toBe(0);
    expect(again.stderr).toContain(`replay ${task.instance_id}: differs at image_id, step 0`);
    const diffs = await sql<{ step: number | null; what: string; action: string | null; recorded: string | null; observed: string | null }>(
      `select d.step, d.what, d.action, d.recorded, d.observed from (select unnest(replay_diffs) as d from '${out}/dataset/trajectories/data/*.parquet')`,
    );
    expect(diffs).toEqual([
      { step: null, what: 'image_id', action: null, recorded: 'sha256:another-image', observed: recorded.image_id },
      { step: 0, what: 'observation', action: recorded.steps[0].action, recorded: 'tampered', observed: expect.any(String) },
    ]);
    // The replay saw what the recording had before it was tampered with (addresses and timings aside).
    expect(defaultNormalize(diffs[1].observed!)).toBe(defaultNormalize(recorded.steps[0].observation));
    const [row] = await sql<{ replay_exact: boolean }>(`select replay_exact from '${out}/dataset/trajectories/data/*.parquet'`);
    expect(row.replay_exact).toBe(false);
    expect(await replayAudit(join(out, 'dataset'))).toEqual({ trajectories: 1, exact: 0, share: 0 });
  }, 900_000);
});
