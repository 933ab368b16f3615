import { describe, expect, it } from 'vitest';
import { debianUpstreamVersion } from '../pipeline/envs/debian/version.js';
import { readRequirementsFile } from '../pipeline/envs/requirements/file.js';
import { evaluateMarker, linuxMarkerEnv, parseMarker } from '../pipeline/envs/requirements/markers.js';
import { normalizeName } from '../pipeline/envs/requirements/names.js';
import { compareVersions, formatVersion, parseSpecifiers, parseVersion, satisfies, satisfiesAll } from '../pipeline/envs/requirements/pep440.js';
import { markerHolds, parseRequirement } from '../pipeline/envs/requirements/pep508.js';

const ok = (version: string, spec: string) => satisfiesAll(version, parseSpecifiers(spec));

describe('PEP 440 versions', () => {
  it('orders versions as packaging does', () => {
    const ordered = [
      '1.0.dev456',
      '1.0a1',
      '1.0a2.dev456',
      '1.0a12',
      '1.0b1.dev456',
      '1.0b2',
      '1.0rc1',
      '1.0',
      '1.0+abc.5',
      '1.0+5',
      '1.0.post456.dev34',
      '1.0.post456',
      '1.1.dev1',
      '1!0.1',
    ];
    for (let i = 0; i + 1 < ordered.length; i++) {
      expect(compareVersions(parseVersion(ordered[i]), parseVersion(ordered[i + 1])), `${ordered[i]} < ${ordered[i + 1]}`).toBe(-1);
    }
    expect(compareVersions(parseVersion('1.0'), parseVersion('1.0.0'))).toBe(0);
    expect(formatVersion(parseVersion('v1.0-Alpha.1-r2_DEV3+Ubuntu-1'))).toBe('1.0a1.post2.dev3+ubuntu.1');
    expect(formatVersion(parseVersion('2.0-3'))).toBe('2.0.post3');
    expect(() => parseVersion('1.0-beta.x')).toThrow(/not a PEP 440 version/);
  });

  it('checks specifiers, pre-releases and local versions included', () => {
    expect(ok('2.8.2', '>=2.7,<3')).toBe(true);
    expect(ok('3.0', '>=2.7,<3')).toBe(false);
    expect(ok('1.4.2', '~=1.4.1')).toBe(true);
    expect(ok('1.5', '~=1.4.1')).toBe(false);
    expect(ok('1.9', '~=1.4')).toBe(true);
    expect(ok('2.0', '~=1.4')).toBe(false);
    expect(ok('1.1.5', '==1.1.*')).toBe(true);
    expect(ok('1.10', '==1.1.*')).toBe(false);
    expect(ok('1.2', '!=1.1.*')).toBe(true);
    expect(ok('1.0+local.7', '==1.0')).toBe(true);
    expect(ok('1.0+local.7', '==1.0+other')).toBe(false);
    expect(ok('2.0rc1', '<2.0')).toBe(false);
    expect(ok('2.0rc1', '<2.0rc2')).toBe(true);
    expect(ok('2.0rc1', '>=1.9')).toBe(true);
    expect(ok('2.0.post1', '>2.0')).toBe(false);
    expect(ok('2.0.1', '>2.0')).toBe(true);
    expect(ok('2.0.post2', '>2.0.post1')).toBe(true);
    expect(ok('2.0+local', '>2.0')).toBe(false);
    expect(ok('1!1.0', '>=2.0')).toBe(true);
    expect(satisfies('1.0-foo', { op: '===', version: '1.0-foo' })).toBe(true);
    expect(ok('5', '')).toBe(true);
    expect(() => parseSpecifiers('>=1.*')).toThrow(/no wildcard/);
    expect(() => parseSpecifiers('~=1')).toThrow(/two release numbers/);
  });

  it('reads Debian versions as the upstream version they package', () => {
    const up = (v: string) => formatVersion(debianUpstreamVersion(v)!);
    expect(up('1:2.8.2-3+b1')).toBe('2.8.2');
    expect(up('22.2.0-1')).toBe('22.2.0');
    expect(up('1:1.26.4+ds-6')).toBe('1.26.4');
    expect(up('3.2+dfsg1-2')).toBe('3.2');
    expect(up('5.0.0~b1-1')).toBe('5.0.0b1');
    expect(up('2024.1~rc2-1')).toBe('2024.1rc2');
    expect(up('1.0.0~alpha.4-1')).toBe('1.0.0a4');
    expect(up('0.13.1+really0.12.0-1')).toBe('0.12.0');
    expect(up('0.9~git20230101.abcdef-1')).toBe('0.9.dev0');
    expect(up('2.0~dev3-1')).toBe('2.0.dev3');
    expect(up('20230101')).toBe('20230101');
    expect(debianUpstreamVersion('abc-1')).toBeUndefined();
  });
});

describe('PEP 508 requirements and markers', () => {
  it('normalises names (PEP 503)', () => {
    expect(normalizeName('Ruamel_Yaml')).toBe('ruamel-yaml');
    expect(normalizeName('zope.interface')).toBe('zope-interface');
    expect(normalizeName('a__-.b')).toBe('a-b');
  });

  it('parses names, extras, specifiers, URLs and markers', () => {
    const r = parseRequirement('Foo_Bar[Socks, tests] (>=1.0,<2) ; python_version < "3.11" and sys_platform == \'linux\'');
    expect(r).toMatchObject({
      name: 'Foo_Bar',
      key: 'foo-bar',
      extras: ['socks', 'tests'],
      markerText: 'python_version < "3.11" and sys_platform == \'linux\'',
    });
    expect(r.specifiers).toEqual([
      { op: '>=', version: '1.0' },
      { op: '<', version: '2' },
    ]);
    expect(markerHolds(r, linuxMarkerEnv('3.9.2'))).toBe(true);
    expect(markerHolds(r, linuxMarkerEnv('3.11.2'))).toBe(false);
    const u = parseRequirement('pip @ https://example.org/pip-1.0.whl;x=1 ; os_name == "posix"');
    expect(u).toMatchObject({ key: 'pip', url: 'https://example.org/pip-1.0.whl;x=1', markerText: 'os_name == "posix"' });
    expect(parseRequirement('requests>=2.0;python_version>="3"').specifiers).toEqual([{ op: '>=', version: '2.0' }]);
    expect(() => parseRequirement('foo bar')).toThrow(/not a version specifier/);
    expect(() => parseRequirement('foo ; bogus == "1"')).toThrow(/unknown marker variable/);
    expect(() => parseRequirement('-e .')).toThrow(/not a requirement/);
  });

  it('evaluates every marker variable for CPython on Linux, versions compared as versions', () => {
    const env = linuxMarkerEnv('3.13.5');
    const holds = (m: string) => evaluateMarker(parseMarker(m), env);
    expect(holds('python_version >= "3.9"')).toBe(true);
    expect(holds('python_version > "3.13"')).toBe(false);
    // "3.13" > "3.9" as versions, not as strings
    expect(holds('python_version < "3.9"')).toBe(false);
    expect(holds('python_full_version >= "3.13.1"')).toBe(true);
    expect(holds('python_version == "3.*"')).toBe(true);
    expect(holds('sys_platform == "win32" or (platform_system == "Linux" and os_name == "posix")')).toBe(true);
    expect(holds('implementation_name == "cpython" and platform_python_implementation != "PyPy"')).toBe(true);
    expect(holds('"linux" in sys_platform and platform_machine not in "arm64 aarch64"')).toBe(true);
    expect(holds('os.name == "posix"')).toBe(true);
    expect(holds('extra == "test"')).toBe(false);
    expect(evaluateMarker(parseMarker('extra == "Test_Suite"'), linuxMarkerEnv('3.11.2', 'test-suite'))).toBe(true);
    expect(() => parseMarker('python_version >= "3" and')).toThrow();
    expect(() => parseMarker('(python_version >= "3"')).toThrow(/unbalanced/);
  });
});

describe('requirements files', () => {
  const files: Record<string, string> = {
    'requirements.txt': ['# runtime', 'attrs>=20 # inline comment', 'requests[socks] \\', '  >=2.0', '-r requirements/base.txt', '-c constraints.txt', ''].join(
      '\n',
    ),
    'requirements/base.txt': [
      '--index-url https://pypi.example/simple',
      'six==1.16.0 --hash=sha256:abc',
      '-r ../requirements.txt',
      '-e .[test]',
      '.',
      'git+https://github.com/a/b.git@v1#egg=Bee',
      './vendored/pkg',
      'bad req !',
    ].join('\n'),
    'constraints.txt': 'idna<4\n',
  };
  const read = (f: string) => files[f];

  it('follows -r and -c includes, keeps the line of each entry and records options', () => {
    const entries = readRequirementsFile('requirements.txt', read);
    const summary = entries.map((e) => {
      if (e.kind === 'requirement') return `${e.source.file}:${e.source.line} ${e.requirement.key}${e.constraint ? ' (constraint)' : ''}`;
      if (e.kind === 'self') return `${e.source.file}:${e.source.line} self[${e.extras.join(',')}]${e.editable ? ' editable' : ''}`;
      if (e.kind === 'option') return `${e.source.file}:${e.source.line} ${e.option} ${e.value ?? ''}`.trim();
      return `${e.source.file}:${e.source.line} error`;
    });
    expect(summary).toEqual([
      'requirements.txt:2 attrs',
      'requirements.txt:3 requests',
      'requirements/base.txt:1 --index-url https://pypi.example/simple',
      'requirements/base.txt:2 six',
      'requirements/base.txt:4 self[test] editable',
      'requirements/base.txt:5 self[]',
      'requirements/base.txt:6 bee',
      'requirements/base.txt:7 path ./vendored/pkg',
      'requirements/base.txt:8 error',
      'constraints.txt:1 idna (constraint)',
    ]);
    const requests = entries.find((e) => e.kind === 'requirement' && e.requirement.key === 'requests');
    expect(requests?.kind === 'requirement' && requests.requirement.specifiers).toEqual([{ op: '>=', version: '2.0' }]);
    expect(readRequirementsFile('missing.txt', read)).toEqual([
      { kind: 'error', message: 'missing.txt: absent, or not a regular file inside the checkout', source: { file: 'missing.txt', line: 0 } },
    ]);
  });
});
