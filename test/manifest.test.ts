import { describe, expect, it } from 'vitest';
import { parseManifest, slugFor } from '../pipeline/runtime/manifest.js';

describe('manifest', () => {
  it('parses good lines and reports each bad line with its number while the others go on', () => {
    const text = [
      '{"repo": "https://github.com/pytoolz/toolz.git", "commit": "abc123"}',
      '{"repo": "x", "bogus": 1}',
      'not json',
      '',
      '# a comment',
      '{"repo": "./local/h11", "python": "3.13", "env": {"apt": ["python3-six"], "vars": {"MODE": "strict"}, "pytest_args": ["-k", "fast"]}}',
      '{"repo": "y", "env": {"pip": ["a"], "aptt": []}}',
      '{"repo": "z", "python": "2.7"}',
      '{"repo": "https://github.com/pytoolz/toolz.git", "commit": "abc123"}',
      '{"repo": "w", "env": {"vars": {"X": 1}}}',
      '{"repo": "https://github.com/pytoolz/toolz.git", "commit": "abc123", "python": "3.9"}',
    ].join('\n');
    const m = parseManifest(text, '/data/manifest.jsonl');
    expect(m.units.map((u) => u.line)).toEqual([1, 6, 11]);
    expect(m.errors.map((e) => [e.line, e.message])).toEqual([
      [2, 'unknown key: bogus (allowed: repo, commit, env, python)'],
      [3, expect.stringMatching(/^not valid JSON/)],
      [7, 'unknown key in "env": aptt (allowed: apt, pip, setup, vars, pytest_args, lock)'],
      [8, '"python" must be one of 3.9, 3.11, 3.13 (got "2.7")'],
      [9, 'duplicate of line 1 (same repository, commit and python)'],
      [10, '"env.vars.X" must be a string'],
    ]);
    const [toolz, h11, toolz39] = m.units;
    // The same commit on another Python is another unit (old histories need an old Python).
    expect(toolz39).toMatchObject({ slug: 'pytoolz__toolz', commit: 'abc123', python: '3.9' });
    expect(toolz39.id).not.toBe(toolz.id);
    expect(toolz).toMatchObject({ slug: 'pytoolz__toolz', sourceKind: 'git-url', commit: 'abc123', python: '3.11' });
    expect(toolz.id).toMatch(/^pytoolz__toolz-[0-9a-f]{8}$/);
    expect(h11).toMatchObject({ location: '/data/local/h11', sourceKind: 'local', python: '3.13' });
    expect(h11.env).toEqual({ apt: ['python3-six'], pip: [], setup: [], vars: { MODE: 'strict' }, pytest_args: ['-k', 'fast'] });
  });

  it("takes a line's lock (wheels, an sdist and its build-only wheels), and refuses one whose file name could leave the cache or whose hash is no sha256", () => {
    const dist = { name: 'wl-beta', version: '1.0', filename: 'wl_beta-1.0-py3-none-any.whl', url: 'https://i.example/f.whl', sha256: 'a'.repeat(64) };
    const sdist = { name: 'wl-sdist', version: '1.0', filename: 'wl_sdist-1.0.tar.gz', url: 'https://i.example/s.tar.gz', sha256: 'b'.repeat(64) };
    const tool = { ...dist, name: 'wl-buildtool', filename: 'wl_buildtool-1.0-py3-none-any.whl', build_only: true };
    const line = (lock: unknown) => JSON.stringify({ repo: 'x', env: { lock } });
    const m = parseManifest(
      [
        line([dist, sdist, tool]),
        line([{ ...dist, filename: '../../etc/x.whl' }]),
        line([{ ...dist, sha256: 'abc' }]),
        line([{ ...dist, extra: 1 }]),
        line('x'),
        line([{ ...dist, build_only: 'yes' }]),
        line([{ ...sdist, filename: 'wl_sdist-1.0.zip' }]),
      ].join('\n'),
      '/data/m.jsonl',
    );
    expect(m.units[0].env.lock).toEqual([dist, sdist, tool]);
    expect(m.errors.map((e) => [e.line, e.message])).toEqual([
      [2, '"env.lock[0].filename" must be a wheel\'s or an sdist\'s file name'],
      [3, '"env.lock[0].sha256" must be 64 hex digits'],
      [4, '"env.lock[0]" must be an object of name, version, filename, url, sha256 (and build_only)'],
      [5, '"env.lock" must be a list of files'],
      [6, '"env.lock[0].build_only" must be true where given'],
      [7, '"env.lock[0].filename" must be a wheel\'s or an sdist\'s file name'],
    ]);
  });

  it('gives stable, readable slugs for URLs and local paths', () => {
    expect(slugFor('git@github.com:psf/Requests.git', 'git-url')).toBe('psf__requests');
    expect(slugFor('file:///srv/repos/My Lib/', 'git-url')).toBe('my-lib');
    expect(slugFor('/home/me/code/toolz', 'local')).toBe('toolz');
    const a = parseManifest('{"repo": "/a/toolz"}', 'm').units[0];
    const b = parseManifest('{"repo": "/b/toolz"}', 'm').units[0];
    expect(a.slug).toBe(b.slug);
    expect(a.id).not.toBe(b.id);
  });
});
