/**
 * Why units fail, as a taxonomy with counts: a failure's stage and reason put in one of a few
 * kinds an analyst can act on (an environment that lacks a module, a suite that does not collect,
 * a build that failed, tests that time out...). `status` counts the ledger's failures by kind and
 * `audit` the repos rows'. The reason itself stays as written; this only groups.
 */

/** Ordered: the first rule that matches names the kind. */
const KINDS: [RegExp, string][] = [
  [/No module named|cannot import name|ImportError/, 'a module the environment lacks'],
  [
    /requires pytest-|minversion|unrecognized arguments|Missing required plugins|not found in `markers`|Unknown config option/,
    'pytest or a plugin the suite needs',
  ],
  [/SyntaxError|requires a different Python|python_requires/, 'a Python the code does not run on'],
  [/collection error|interrupted|before its session started/, 'a suite that does not collect'],
  [/no tests collected/, 'no tests'],
  [/timed out|timeout|exceeded its wall/, 'a timeout'],
  [/out of memory/, 'out of memory'],
  [/not traceable|no test passed/, 'no test passes'],
  [/tampered|not signed|refused/, 'contained (hostile or tampering)'],
  [/image build failed|setup returned|apt-get|pip install/, 'the image build'],
  [/clone|git /, 'the checkout'],
];

export function failureKind(stage: string | null, reason: string | null): string {
  const text = reason ?? '';
  return KINDS.find(([pattern]) => pattern.test(text))?.[1] ?? `other (${stage ?? 'unknown stage'})`;
}

/** Failures counted by kind, the most frequent first. */
export function countKinds(failures: { stage: string | null; reason: string | null }[]): { kind: string; count: number }[] {
  const counts = new Map<string, number>();
  for (const f of failures) {
    const kind = failureKind(f.stage, f.reason);
    counts.set(kind, (counts.get(kind) ?? 0) + 1);
  }
  return [...counts].map(([kind, count]) => ({ kind, count })).sort((a, b) => b.count - a.count || a.kind.localeCompare(b.kind));
}
