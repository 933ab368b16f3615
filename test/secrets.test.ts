/**
 * The secret scanner and row redaction on known positives (one per kind the issue names, plus
 * vendor tokens from the ported gitleaks rules), on negatives that ordinary code is full of, and
 * on the real corpus's Python sources; license allow-list and benchmark repository matching.
 */
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, inject, it } from 'vitest';
import { licenseAllowed, PERMISSIVE_LICENSES } from '../core/license.js';
import { BenchmarkRepos, normalizeRepo } from '../datasets/benchmarks.js';
import { UnitFilter } from '../datasets/content_policy.js';
import { parseEpisode, renderEpisode } from '../datasets/cwm_format.js';
import { Redactor } from '../datasets/redact.js';
import { SecretScanner, shannonEntropy } from '../datasets/secrets.js';
import { CORPUS_NAMES } from './global-setup.js';

const RSA = [
  '-----BEGIN RSA PRIVATE KEY-----',
  'MIICXAIBAAKBgQCqGKukO1De7zhZj6+H0qtjTkVxwTCpvKe4eCZ0FPqri0cb2JZfXJ/DgYSF6vUp',
  'wmJG8wVQZKjeGcjDOL5UlsuusFncCzWBQ7RKNUSesmQRMSGkVb1/3j+skZ6UtW+5u09lHNsj6tQ5',
  '1s1SPrCBkedbNf0Tp0GbMJDyR4e9T04ZZwIDAQABAoGAFijko56+qGyN8M0RVyaRAXz++xTqHBLh',
  '-----END RSA PRIVATE KEY-----',
].join('\n');

const POSITIVES: [string, string][] = [
  ["key = 'AKIAY2GRRRZPYRAY64HM'", 'AWS_ACCESS_KEY'],
  ['aws_secret_access_key = "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"', 'AWS_SECRET_KEY'],
  [RSA, 'PRIVATE_KEY'],
  [
    '-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQAAAAAAAAABAAAAMwAAAAtzc2gtZW\n-----END OPENSSH PRIVATE KEY-----',
    'PRIVATE_KEY',
  ],
  ['write to maria.planted@corp-mail.co.uk today', 'EMAIL'],
  ['connect("34.201.17.88", 443)', 'IP_ADDRESS'],
  ["GITHUB_TOKEN = 'ghp_0gyMDtiNUsS5HQQYRCiYCQ9aHWdtCNveKjGp'", 'GITHUB_PAT'],
  ["slack = 'xoxb-244798866055-9857312225358-dQofLoWTx4liBRUzj2nrFJyR'", 'SLACK_BOT_TOKEN'],
  ['url = "https://hooks.slack.com/services/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aH1sJ6uFo0iG"', 'SLACK_WEBHOOK_URL'],
  ["stripe.api_key = 'sk_live_4eC39HqLyjWDarjtT1zdp7dc9Tz'", 'STRIPE_ACCESS_TOKEN'],
  ["hf = 'hf_XzQwLmNoPqRsTuVwXyZaBcDeFgHiJkLmNo'", 'HUGGINGFACE_ACCESS_TOKEN'],
  ['session = "Zk3qP9vLx2RtY7mN4bW8cJ1hD6sF0gA5eU"', 'HIGH_ENTROPY_TOKEN'],
];

/** Ordinary code: hashes, UUIDs, base64 test data, identifiers, versions, paths, reserved addresses. */
const NEGATIVES = [
  "commit = 'c2424167fcbd70958f8f2b6d526992cc7914a0c3'",
  "digest = 'sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08'",
  "run_id = '550e8400-e29b-41d4-a716-446655440000'",
  "payload = 'SGVsbG8sIFdvcmxkISBUaGlzIGlzIGEgdGVzdC4='",
  'def test_parse_isoformat_with_timezone_offset2(): relativeLinkBaseForRFC3986 = 1',
  "__version__ = '1.2.3.4'; see RFC 3986 6.2.2.3",
  "path = 'JSON_checker/test/fail19.json'",
  "hosts = ['127.0.0.1', '10.0.0.8', '192.168.1.1', '203.0.113.9', '0.0.0.0']",
  "author = 'Jane <jane@example.com>'; remote = 'git@github.com:pytoolz/toolz.git'",
  "password = 'secret'",
  '@property\ndef value(self): return self._value @ other',
];

describe('the secret scanner', () => {
  const scanner = new SecretScanner();

  it('ports gitleaks rules as data, with their source and licence', () => {
    expect(scanner.ruleCount).toBeGreaterThan(200);
    expect(scanner.source).toMatch(/^https:\/\/github\.com\/gitleaks\/gitleaks\/blob\/[0-9a-f]{40}\/config\/gitleaks\.toml$/);
    expect(scanner.license).toMatch(/^MIT/);
  });

  it.each(POSITIVES)('redacts %s as %s', (text, kind) => {
    const tally = new Map<string, number>();
    const out = scanner.redact(text, tally);
    expect(out).toContain(`<${kind}>`);
    expect(tally.get(kind)).toBe(1);
    // Nothing of the secret survives: no run of 12 of its characters is left.
    for (const f of scanner.findings(text)) expect(out).not.toContain(text.slice(f.start, f.end).slice(0, 12));
  });

  it('keeps JSON strings and Python reprs valid: a key with escaped newlines, an address after an escape', () => {
    const tally = new Map<string, number>();
    const json = JSON.stringify({ pem: RSA, who: '\nmaria.planted@corp-mail.co.uk', u: '\u00e9maria.planted@corp-mail.co.uk' });
    const out = scanner.redact(json, tally);
    expect(JSON.parse(out)).toEqual({ pem: '<PRIVATE_KEY>', who: '\n<EMAIL>', u: '\u00e9<EMAIL>' });
    const repr = `'${RSA.replace(/\n/g, '\\n')}\\n'`;
    expect(scanner.redact(repr, tally)).toBe("'<PRIVATE_KEY>\\n'");
  });

  it('redacts a truncated key block (a capped repr has no END line)', () => {
    expect(scanner.redact(`'${RSA.split('\n').slice(0, 3).join('\\n')}'`, new Map())).toBe("'<PRIVATE_KEY>'");
  });

  it.each(NEGATIVES)('leaves ordinary code alone: %s', (text) => {
    expect(scanner.findings(text)).toEqual([]);
  });

  it('redacts exact values handed to it (secret env.vars), wherever they appear', () => {
    const s = new SecretScanner({ literals: new Map([['staple-horse-battery-correct-4242', 'ENV_SECRET']]) });
    expect(s.redact("{'VAULT_API_TOKEN': 'staple-horse-battery-correct-4242'}", new Map())).toBe("{'VAULT_API_TOKEN': '<ENV_SECRET>'}");
  });

  it('finds nothing but e-mail addresses and IPv4 literals in the real corpus sources', () => {
    const root = inject('corpusRoot');
    const files = execFileSync('find', [...CORPUS_NAMES.map((n) => join(root, n)), '-name', '*.py', '-not', '-path', '*/.git/*'], { encoding: 'utf8' })
      .trim()
      .split('\n');
    expect(files.length).toBeGreaterThan(100);
    const kinds = new Map<string, number>();
    for (const f of files) for (const x of scanner.findings(readFileSync(f, 'utf8'))) kinds.set(x.kind, (kinds.get(x.kind) ?? 0) + 1);
    // Authors' addresses (simplejson's __author__, hyperlink's mailto tests) and the IPv4 parts of
    // hyperlink's IPv6 test URLs: real addresses, so found; no secret rule and no high-entropy hit.
    expect([...kinds.keys()].sort()).toEqual(['EMAIL', 'IP_ADDRESS']);
    expect([...kinds.values()].reduce((a, b) => a + b)).toBeLessThan(15);
  });

  it('computes Shannon entropy as gitleaks does', () => {
    expect(shannonEntropy('aaaa')).toBe(0);
    expect(shannonEntropy('abcd')).toBe(2);
  });
});

describe('row redaction', () => {
  it('re-renders a trace whose locals held a secret, so its CWM text parses and agrees with its frames', () => {
    const frames = [
      {
        kind: 'call',
        line: 1,
        depth: 0,
        function: 'f',
        source: 'def f(pem, who):\n',
        locals: [{ name: 'pem', value: `'${RSA.replace(/\n/g, '\\n')}'` }],
        value: null,
      },
      {
        kind: 'line',
        line: 2,
        depth: 0,
        function: 'f',
        source: '    return who\n',
        locals: [{ name: 'who', value: "'maria.planted@corp-mail.co.uk'" }],
        value: null,
      },
      { kind: 'return', line: 2, depth: 0, function: 'f', source: '    return who\n', locals: [], value: "'maria.planted@corp-mail.co.uk'" },
    ] as const;
    const context = 'def f(pem, who):  # << START_OF_TRACE\n    return who\n';
    const row = { unit_id: 'u', context, frames, text: renderEpisode(context, frames as never) };
    const r = new Redactor();
    const out = r.row('traces', row);
    expect(out.text).not.toContain('planted');
    expect(out.text).not.toContain('MIICXAIBAAKBgQCqGKukO1De7zhZj6');
    const parsed = parseEpisode(out.text);
    expect(parsed.frames[0].locals).toEqual([{ name: 'pem', value: "'<PRIVATE_KEY>'" }]);
    expect(parsed.frames[2].value).toBe("'<EMAIL>'");
    expect(renderEpisode(out.context, out.frames as never)).toBe(out.text);
    expect(r.summary().by_config.traces).toEqual({ rows_redacted: 1, by_kind: { EMAIL: 2, PRIVATE_KEY: 1 } });
    // A row with nothing to redact is the same object: no copy, no re-render.
    const clean = { unit_id: 'u', context, frames: [], text: renderEpisode(context, []) };
    expect(r.row('traces', clean)).toBe(clean);
  });

  it("redacts a tool call's JSON arguments value by value, so they stay JSON", () => {
    const args = JSON.stringify({ command: 'export TOKEN=ghp_0gyMDtiNUsS5HQQYRCiYCQ9aHWdtCNveKjGp\ncat ~/.ssh/id_rsa' });
    const row = {
      messages: [
        {
          role: 'assistant',
          content: 'mail maria.planted@corp-mail.co.uk',
          tool_calls: [{ id: '1', type: 'function', function: { name: 'bash', arguments: args } }],
        },
      ],
    };
    const r = new Redactor();
    const out = r.row('trajectories', row);
    const msg = out.messages[0];
    expect(msg.content).toBe('mail <EMAIL>');
    expect(JSON.parse(msg.tool_calls[0].function.arguments)).toEqual({ command: 'export TOKEN=<GITHUB_PAT>\ncat ~/.ssh/id_rsa' });
    expect(r.summary().total).toEqual({ EMAIL: 1, GITHUB_PAT: 1 });
  });
});

describe('license allow-list and benchmark repositories', () => {
  it('allows permissive licenses by default, an OR expression when one side is allowed, and unknown only when named', () => {
    expect(licenseAllowed('MIT', PERMISSIVE_LICENSES)).toBe(true);
    expect(licenseAllowed('MIT OR AFL-2.1', PERMISSIVE_LICENSES)).toBe(true);
    expect(licenseAllowed('GPL-3.0-only', PERMISSIVE_LICENSES)).toBe(false);
    expect(licenseAllowed('unknown', PERMISSIVE_LICENSES)).toBe(false);
    expect(licenseAllowed('unknown', [...PERMISSIVE_LICENSES, 'unknown'])).toBe(true);
  });

  it('normalizes repository locations the ways a manifest may write them', () => {
    for (const loc of [
      'https://github.com/Django/django.git',
      'http://www.github.com/django/django/',
      'git@github.com:django/django.git',
      'ssh://git@github.com/django/django',
      'git+https://github.com/django/django',
      'django/django',
    ])
      expect(normalizeRepo(loc)).toBe('django/django');
    expect(normalizeRepo('/srv/repos/django')).toBeNull();
  });

  it("matches SWE-bench's and SWE-Gym's repositories and says which list", () => {
    const b = new BenchmarkRepos();
    expect(b.match('https://github.com/sympy/sympy')).toEqual({ benchmark: expect.stringMatching(/^SWE-bench/), repo: 'sympy/sympy' });
    expect(b.match('/local/path', 'getmoto/moto')).toEqual({ benchmark: 'SWE-Gym', repo: 'getmoto/moto' });
    expect(b.match('https://github.com/pytoolz/toolz')).toBeNull();
    expect(b.sources.map((s) => s.repos)).toEqual([18, 11]);
  });

  it('gives each excluded unit its reason and counts it', () => {
    const f = new UnitFilter({ redact: true, licenses: PERMISSIVE_LICENSES, excludeBenchmarks: true });
    expect(f.reason({ repo: 'x', url: 'https://github.com/psf/requests.git', license: 'Apache-2.0' })).toMatch(
      /^benchmark repository: psf\/requests is in SWE-bench/,
    );
    expect(f.reason({ repo: 'y', url: '/tmp/y', license: 'GPL-2.0-only' })).toBe(
      `license GPL-2.0-only is not in --licenses (${PERMISSIVE_LICENSES.join(', ')})`,
    );
    expect(f.reason({ repo: 'z', url: '/tmp/z', license: 'BSD-3-Clause' })).toBeNull();
    expect(f.result().license_excluded).toEqual({ 'GPL-2.0-only': 1 });
    expect(Object.values(f.result().benchmark_excluded)).toEqual([1]);
  });
});
