import { bool, defineSchema, type Infer, int32, nullable, string } from './schema.js';

/**
 * One row per trace episode the `describe` stage described: a step-by-step natural-language
 * account of the episode (CWM rewrote its traces this way), kept only when the final return value
 * or exception it states is the trace's own.
 */
export const traceDescriptionsSchema = defineSchema({
  name: 'trace_descriptions',
  version: 1,
  doc: 'Natural-language step-by-step descriptions of trace episodes, with whether the final outcome they state matches the trace.',
  text: ['text'],
  fields: {
    unit_id: string('The unit the traced episode comes from'),
    repo: string('The repository as the manifest names it'),
    commit: string('Resolved commit SHA'),
    node_id: string('The episode: pytest node id of the test that ran the code (with unit_id and episode_index, the key of a traces row)'),
    episode_index: int32('The episode: its position among the episodes of its test'),
    function: string('Qualified name of the episode entry function'),
    describer: string('template (deterministic, no model) or model (an OpenAI-compatible server)'),
    model: nullable(string('The model that wrote the text (null for the template describer)')),
    text: string('The description; for a model, its answer as it came back (empty when the server failed)'),
    trace_outcome: string('The final outcome in the trace: "returns <repr>" or "raises <repr>"'),
    stated_outcome: nullable(string('The final outcome the text states, as parsed from it (null: none found)')),
    kept: bool('The stated final outcome matches the trace: the row is fit to train on'),
    reject_reason: nullable(string('Why it was not kept: no stated final outcome, a wrong final value, or a server error')),
  },
});

export type TraceDescriptionRecord = Infer<typeof traceDescriptionsSchema>;
