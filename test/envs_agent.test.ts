/**
 * The environment agent (`--env-policy openai`) through the real OpenAI client against a scripted
 * loopback server (the one thing that cannot exist here): a suite whose tests read a data file at
 * import (/usr/share/dict/words) stops collecting, no rule knows why, the model is shown the end of
 * the collect-only run and names the Debian package; only what can be checked is taken (a package
 * of the suite, plain pytest words), the rest recorded as refused. The unit validates, its
 * environment marked as the agent's.
 */
import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadDebianIndex } from '../pipeline/envs/debian/suite_index.js';
import { readAgentAnswer } from '../pipeline/envs/repair/agent.js';
import type { LedgerEntry } from '../pipeline/runtime/ledger.js';
import type { UnitEnv } from '../pipeline/runtime/manifest.js';
import type { BuildRecord, ValidateRecord } from '../pipeline/runtime/records.js';
import { completion, ScriptedServer } from './fixtures/scripted_openai.js';
import { cli, gitRepo, tempDir } from './helpers.js';

const ANSWER = {
  apt: ['wamerican', 'no-such-package-anywhere'],
  pytest_args: ['-p', 'no:cacheprovider', '$(rm -rf /)'],
  why: 'the tests read the system word list',
};

describe('the environment agent', () => {
  let server: ScriptedServer;
  let out: string;
  const entry = <R>(stage: string) => {
    const dir = join(out, 'ledger', stage);
    return JSON.parse(readFileSync(join(dir, readdirSync(dir)[0]), 'utf8')) as LedgerEntry<R>;
  };

  beforeAll(async () => {
    server = new ScriptedServer((i) =>
      completion(i, { content: `Here:\n\`\`\`json\n${JSON.stringify(ANSWER)}\n\`\`\`` }, { prompt_tokens: 100, completion_tokens: 30 }),
    );
    const url = await server.start();
    const dir = tempDir('envs-agent');
    const repo = gitRepo(join(dir, 'words'), {
      'tests/test_words.py': 'WORDS = open("/usr/share/dict/words").read().split()\n\n\ndef test_words():\n    assert "apple" in WORDS\n',
    });
    const manifest = join(dir, 'bare.jsonl');
    writeFileSync(manifest, `${JSON.stringify({ repo })}\n`);
    out = join(dir, 'out');
    const res = await cli(
      [
        'run',
        '--manifest',
        manifest,
        '--out',
        out,
        '--stages',
        'clone,resolve,build,validate',
        '--env-policy',
        'openai',
        '--base-url',
        url,
        '--model',
        'env-agent',
      ],
      { OPENAI_API_KEY: 'sk-test' },
    );
    expect(res.code, `${res.stdout}\n${res.stderr}`).toBe(0);
  }, 900_000);

  afterAll(() => server?.close());

  it('asks once with the collect-only run, takes the package, refuses what cannot be checked, and the suite validates', () => {
    expect(server.requests).toHaveLength(1);
    const asked = JSON.stringify(server.requests[0].body);
    expect(asked).toContain('env-agent');
    expect(asked).toMatch(/FileNotFoundError.*\/usr\/share\/dict\/words/);
    const build = entry<BuildRecord>('build').record!;
    expect(build.env_source).toBe('agent');
    expect(build.env!.apt).toContain('wamerican');
    expect(build.env!.pytest_args).toEqual(['-p', 'no:cacheprovider']);
    expect(build.attempts![0].refused).toEqual(['no-such-package-anywhere: no such package in bookworm', 'pytest argument "$(rm -rf /)": not a plain word']);
    expect(entry<ValidateRecord>('validate').record).toMatchObject({ collected: 1, passed: 1 });
  });

  it('reads an answer that is no JSON, or moves a base the line names, as nothing taken', async () => {
    const bookworm = await loadDebianIndex('bookworm');
    const env: UnitEnv = { apt: [], pip: [], setup: [], vars: {}, pytest_args: [] };
    expect(readAgentAnswer('I am not sure.', env, '3.11', () => bookworm, true)).toEqual({ repair: null, refused: [] });
    expect(readAgentAnswer('{"python": "3.13"}', env, '3.11', () => bookworm, false)).toEqual({
      repair: null,
      refused: ['python 3.13: the manifest line names its own Python'],
    });
  });
});
