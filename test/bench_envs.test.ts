/**
 * bench:envs --set counts why units did not collect by kind (issue 41): the reasons here are ones
 * the set's repositories gave, as the records hold them.
 */
import { describe, expect, it } from 'vitest';
import { kindOf } from '../bench/envs_set.js';

describe('bench:envs kinds of cause', () => {
  it("names each recorded reason's kind, the first real cause first", () => {
    expect(kindOf('clone: internal error in clone: Error: git archive exited 255: error: invalid object 100644 d208ea6')).toBe('clone');
    expect(kindOf('resolve: the Python index gives no lock: python 3.11: invalid peer certificate: UnknownIssuer')).toBe('index not trusted');
    expect(
      kindOf('resolve: the Python index gives no lock: python 3.13: Because torch==2.0.0 has no wheels with a matching Python ABI tag (e.g., `cp313`)'),
    ).toBe('no wheel for its Python');
    expect(kindOf('resolve: the Python index gives no lock: python 3.11: Because 2-0 was not found in the package registry')).toBe('no lock');
    expect(kindOf('build: image build failed: ... (last output: E: Unable to locate package python3-zstandard')).toBe('Debian package');
    expect(kindOf("validate: run 1: pytest exited 4 before its session started: ModuleNotFoundError: No module named 'agents'")).toBe('module missing');
    expect(kindOf('10 module(s) did not collect')).toBe('modules did not collect');
    expect(kindOf('validate: not traceable: no test passed in every run (0 collected, 0 passed)')).toBe('no test passed');
    expect(kindOf('not run')).toBe('not run yet');
    expect(kindOf('something new')).toBe('other');
  });
});
