/**
 * The tree's rules (docs/architecture.md says why). `npm run lint` runs them; a violation fails CI.
 * Type-only imports count: the 15-file cycle this tree replaced was closed by one type import.
 */
const layer = (name) => `^pipeline/${name}/`;
module.exports = {
  forbidden: [
    { name: 'no-cycles', severity: 'error', comment: 'Modules form a DAG: a cycle makes load order and ownership ambiguous.', from: {}, to: { circular: true } },
    {
      name: 'no-stage-imports-a-stage',
      severity: 'error',
      comment: 'A stage reads earlier stages through the ledger (runtime/records.ts) and paths through runtime/layout.ts, never by importing another stage.',
      from: { path: '^pipeline/stages/([^/]+)\\.ts$' },
      to: { path: '^pipeline/stages/', pathNot: '^pipeline/stages/$1\\.ts$' },
    },
    {
      name: 'only-run-imports-stages',
      severity: 'error',
      comment: 'Stages are leaves of the pipeline: run.ts (and the CLI and benches above it) compose them.',
      from: { path: '^pipeline/', pathNot: ['^pipeline/stages/', '^pipeline/run\\.ts$'] },
      to: { path: '^pipeline/stages/' },
    },
    { name: 'datasets-without-pipeline', severity: 'error', comment: 'datasets/ reads and writes data for anyone; the pipeline passes in what it needs (status, paths).', from: { path: '^datasets/' }, to: { path: '^pipeline/' } },
    { name: 'core-is-a-leaf', severity: 'error', comment: 'core/ holds small shared pieces and depends on nothing of ours.', from: { path: '^core/' }, to: { path: '^(pipeline|datasets|schemas|bin|bench|test)/' } },
    { name: 'schemas-stand-alone', severity: 'error', comment: 'One truth per record kind, importable by anything.', from: { path: '^schemas/' }, to: { path: '^(pipeline|datasets|bin|bench|test)/' } },
    {
      name: 'runtime-is-the-base',
      severity: 'error',
      comment: 'runtime/ (stage contract, executor, ledger, layout, options) is what the other pipeline folders build on.',
      from: { path: layer('runtime') },
      to: { path: '^pipeline/(sandbox|agent|tasks|stages|envs)/|^pipeline/run\\.ts$' },
    },
    {
      name: 'envs-read-text-only',
      severity: 'error',
      comment: 'pipeline/envs/ derives environments from text and Debian indexes: it runs no container and no stage, so it builds on runtime/ and core/ alone.',
      from: { path: layer('envs') },
      to: { path: '^pipeline/(sandbox|agent|tasks|describe|queue|stages)/|^pipeline/(run|gc|trace_script)\\.ts$|^(datasets|bin|bench)/' },
    },
    { name: 'sandbox-below-agent-and-tasks', severity: 'error', from: { path: layer('sandbox') }, to: { path: '^pipeline/(agent|tasks|stages)/' } },
    { name: 'agent-below-tasks', severity: 'error', comment: 'Tasks are made, then worked by the agent: the agent does not make tasks.', from: { path: layer('agent') }, to: { path: '^pipeline/tasks/' } },
    {
      name: 'only-sandbox-talks-to-docker',
      severity: 'error',
      comment: 'Every Docker Engine call lives in pipeline/sandbox/: one place for limits, labels, timeouts and hardening.',
      from: { pathNot: '^pipeline/sandbox/' },
      to: { path: '(^|/)node_modules/(@types/)?dockerode/' },
    },
    {
      name: 'serve-on-top',
      severity: 'error',
      comment: 'pipeline/serve/ offers the tasks as environments through agent/ (the same episode, tools and grading as forage); nothing in the pipeline depends on it, and it runs no stage.',
      from: { path: '^pipeline/', pathNot: '^pipeline/serve/' },
      to: { path: '^pipeline/serve/' },
    },
    { name: 'no-test-code-in-product', severity: 'error', from: { path: '^(bin|core|pipeline|datasets|schemas)/' }, to: { path: '^test/' } },
  ],
  options: {
    doNotFollow: { path: 'node_modules' },
    tsPreCompilationDeps: true,
    tsConfig: { fileName: 'tsconfig.check.json' },
    enhancedResolveOptions: { exportsFields: ['exports'], conditionNames: ['import', 'require', 'node', 'default', 'types'], extensions: ['.ts', '.js', '.d.ts'] },
  },
};
