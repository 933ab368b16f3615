/**
 * Stage `describe`: a seeded share of the unit's trace episodes (`--describe-share`) described in
 * natural language, step by step, by the template describer or, with `--describe-model`, by the
 * OpenAI-compatible server of `--base-url`/`--model`. Each description is kept only when the final
 * outcome it states is the trace's (describe/outcome.ts); rejected ones are written too, with the
 * reason, so the dataset shows what the filter removed.
 */
import { existsSync } from 'node:fs';
import { sha256 } from '../../core/hashing.js';
import { readLines, writeJsonl } from '../../core/jsonl.js';
import type { TraceDescriptionRecord } from '../../schemas/trace_descriptions.js';
import type { TraceRecord } from '../../schemas/traces.js';
import { modelDescriber } from '../describe/model_describer.js';
import { outcomeMismatch, outcomeText, statedOutcome, traceOutcome } from '../describe/outcome.js';
import { describeByTemplate } from '../describe/template_describer.js';
import { outLayout } from '../runtime/layout.js';
import type { DescribeRecord } from '../runtime/records.js';
import { ok, requireRecord, type Stage, type StageContext } from '../runtime/stage.js';

const DESCRIBE_REVISION = 1;

/**
 * Whether an episode is described: a hash of the seed and the episode's key, so the choice is the
 * same on every run and machine and does not depend on which other episodes exist.
 */
function chosen(seed: number, share: number, unitId: string, nodeId: string, episodeIndex: number): boolean {
  if (share >= 1) return true;
  const h = Number.parseInt(sha256(`${seed}\u0000${unitId}\u0000${nodeId}\u0000${episodeIndex}`).slice(0, 8), 16);
  return h / 0x1_0000_0000 < share;
}

export const describeStage: Stage<'describe'> = {
  name: 'describe',
  key(ctx) {
    requireRecord(ctx, 'trace');
    const o = ctx.options;
    const m = o.describeModel ? o.openai : undefined;
    return {
      // the trace stage's own key: a traced suite that changed is described again
      trace: ctx.ledger.get('trace', ctx.unit.id)?.key,
      share: o.describeShare,
      seed: o.traceSeed,
      model: m ? [m.baseURL, m.model, m.temperature, m.topP, m.maxTokens, m.seed] : null,
      revision: DESCRIBE_REVISION,
    };
  },
  async run(ctx: StageContext) {
    const { unit, options } = ctx;
    requireRecord(ctx, 'trace');
    const model = options.describeModel && options.openai ? options.openai : null;
    const ask = model ? modelDescriber(model) : null;
    const record: DescribeRecord = { episodes: 0, described: 0, kept: 0, without_outcome: 0, describer: model ? 'model' : 'template', rejected: {} };
    const traces = outLayout.part(options.out, 'traces', unit.id);
    async function* rows(): AsyncGenerator<TraceDescriptionRecord> {
      if (!existsSync(traces)) return;
      for (const line of readLines(traces)) {
        const t = JSON.parse(line) as TraceRecord;
        record.episodes += 1;
        if (!chosen(options.traceSeed, options.describeShare, unit.id, t.node_id, t.episode_index)) continue;
        const traced = traceOutcome(t.frames);
        // an episode cut by a cap has no final outcome a description could be checked against
        if (!traced) {
          record.without_outcome += 1;
          continue;
        }
        let text: string;
        let error: string | null = null;
        if (ask) ({ text, error } = await ask(t.text));
        else text = describeByTemplate(t) ?? '';
        const stated = error ? null : statedOutcome(text);
        const reason = error ?? outcomeMismatch(stated, traced);
        record.described += 1;
        if (reason) {
          // counted by the reason's kind: the values in a wrong-outcome reason differ row to row
          const kind = reason.split(':')[0];
          record.rejected[kind] = (record.rejected[kind] ?? 0) + 1;
        } else record.kept += 1;
        yield {
          unit_id: t.unit_id,
          repo: t.repo,
          commit: t.commit,
          node_id: t.node_id,
          episode_index: t.episode_index,
          function: t.function,
          describer: record.describer,
          model: model?.model ?? null,
          text,
          trace_outcome: outcomeText(traced),
          stated_outcome: stated ? outcomeText(stated) : null,
          kept: reason === null,
          reject_reason: reason,
        };
      }
    }
    await writeJsonl(outLayout.part(options.out, 'trace_descriptions', unit.id), rows());
    ctx.log(
      `describe ${unit.id}: ${record.described} of ${record.episodes} episodes described (${record.describer}), ${record.kept} kept` +
        `${Object.entries(record.rejected)
          .map(([r, n]) => `, ${n} ${r}`)
          .join('')}${record.without_outcome ? `; ${record.without_outcome} chosen without a final outcome in the trace` : ''}`,
    );
    return ok(record);
  },
};
