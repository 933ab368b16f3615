/** Text from a repository on its way to a terminal (core/terminal.ts): control characters escaped, the rest as it is. */
import { describe, expect, it } from 'vitest';
import { table } from '../core/table.js';
import { forTerminal, machineJson, terminalSafe } from '../core/terminal.js';

const EVIL = '\x1b[2J\x1b]0;pwned\x07\r\nbenign  ok\x9b31m\u202etxt.exe\x7f';

describe('terminal-safe text', () => {
  it('escapes C0 and C1 controls, DEL, line separators and bidirectional overrides, and leaves the rest alone', () => {
    expect(terminalSafe(EVIL)).toBe('\\x1b[2J\\x1b]0;pwned\\x07\\r\\nbenign  ok\\x9b31m\\u202etxt.exe\\x7f');
    expect(terminalSafe('tests/test_x.py::test_y[é-日本-\\u00e9]')).toBe('tests/test_x.py::test_y[é-日本-\\u00e9]');
    // A text whose lines are its own keeps its newlines and tabs.
    expect(terminalSafe('a\n\tb\x1b[0m\r', true)).toBe('a\n\tb\\x1b[0m\\r');
  });

  it('escapes every string of a report, whatever its depth, and only strings', () => {
    const report = { units: [{ id: 'u', reason: EVIL, seconds: 1.5, ran: ['validate'] }], ok: null, n: 2 };
    const safe = forTerminal(report);
    expect(safe.units[0].reason).toBe(terminalSafe(EVIL));
    expect(safe).toMatchObject({ units: [{ id: 'u', seconds: 1.5, ran: ['validate'] }], ok: null, n: 2 });
    expect(report.units[0].reason).toBe(EVIL);
  });

  it('escapes in machine-readable JSON what JSON.stringify leaves raw (a C1 CSI of a test id), and decodes to the same data', () => {
    const line = machineJson({ event: 'log', message: EVIL });
    expect([...line].filter((c) => c < ' ' || (c >= '\x7f' && c <= '\x9f') || c === '\u202e')).toEqual([]);
    expect(line).toContain('ok\\u009b31m\\u202etxt.exe\\u007f');
    expect(JSON.parse(line)).toEqual({ event: 'log', message: EVIL });
    // JSON.stringify alone (what the progress lines were) left the C1 CSI and the override raw.
    expect(JSON.stringify({ message: EVIL })).toContain('\x9b31m\u202e');
    expect(JSON.parse(machineJson({ a: [EVIL] }, 2))).toEqual({ a: [EVIL] });
  });

  it("keeps a table's rows one line each, aligned on the escaped text", () => {
    const lines = table([
      ['unit', 'reason'],
      ['a', EVIL],
      ['b', 'fine'],
    ]).split('\n');
    expect(lines).toHaveLength(3);
    expect(lines[1]).toBe(`a     ${terminalSafe(EVIL)}`);
  });
});
