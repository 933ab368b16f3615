#!/usr/bin/env bash
# Builds examples/history/ledger: a small money library with a real git history that holds a bug
# fix with its test (commit 3: apply_discount returned the discount instead of the discounted
# total; the test added with the fix fails before it). It is the history's only commit that changes
# code and tests together, so the one issue-fix candidate (commit 2 adds code alone, 4 a README). Fixed authors and dates make every SHA the
# same on every machine, so the demo's issue-fix task is the same task everywhere.
# Usage: bash examples/make-history-repo.sh [DEST]   (default: examples/history/ledger)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
dest=${1:-$here/history/ledger}
rm -rf "$dest"
mkdir -p "$dest/ledger" "$dest/tests"
cd "$dest"
export GIT_AUTHOR_NAME="Ledger Dev" GIT_AUTHOR_EMAIL="dev@ledger.example" GIT_COMMITTER_NAME="Ledger Dev" GIT_COMMITTER_EMAIL="dev@ledger.example"
git init -q -b main .
git config commit.gpgsign false
n=0
commit() {
  n=$((n + 1))
  export GIT_AUTHOR_DATE="2024-03-0${n}T12:00:00Z" GIT_COMMITTER_DATE="2024-03-0${n}T12:00:00Z"
  git add -A
  git commit -q -m "$1"
}

cat > LICENSE <<'TXT'
MIT License

Copyright (c) 2024 Ledger Dev

Permission is hereby granted, free of charge, to any person obtaining a copy of this software and
associated documentation files (the "Software"), to deal in the Software without restriction,
including without limitation the rights to use, copy, modify, merge, publish, distribute,
sublicense, and/or sell copies of the Software, and to permit persons to whom the Software is
furnished to do so, subject to the following conditions:

The above copyright notice and this permission notice shall be included in all copies or
substantial portions of the Software.

THE SOFTWARE IS PROVIDED "AS IS", WITHOUT WARRANTY OF ANY KIND, EXPRESS OR IMPLIED.
TXT
cat > pyproject.toml <<'TXT'
[project]
name = "ledger"
version = "0.1.0"
requires-python = ">=3.8"

[project.optional-dependencies]
test = ["pytest", "hypothesis"]
TXT
cat > ledger/__init__.py <<'PY'
from .money import format_amount, parse_amount

__all__ = ["format_amount", "parse_amount"]
PY
cat > ledger/money.py <<'PY'
"""Amounts of money as integer cents."""


def parse_amount(text):
    """'12.34' -> 1234 cents; a leading '-' makes it negative."""
    text = text.strip()
    sign = -1 if text.startswith("-") else 1
    text = text.lstrip("-")
    whole, _, frac = text.partition(".")
    if len(frac) > 2:
        raise ValueError("more than two decimals: %r" % text)
    cents = int(whole or "0") * 100 + int((frac + "00")[:2])
    return sign * cents


def format_amount(cents):
    """1234 -> '12.34'."""
    sign = "-" if cents < 0 else ""
    cents = abs(cents)
    return "%s%d.%02d" % (sign, cents // 100, cents % 100)
PY
cat > tests/test_money.py <<'PY'
import pytest
from hypothesis import given, settings, strategies as st

from ledger.money import format_amount, parse_amount


def test_parse_whole_and_cents():
    assert parse_amount("12.34") == 1234
    assert parse_amount("7") == 700
    assert parse_amount("0.5") == 50


def test_parse_negative():
    assert parse_amount("-3.10") == -310


def test_parse_rejects_three_decimals():
    with pytest.raises(ValueError):
        parse_amount("1.234")


def test_format_round_trip():
    for text in ["0.00", "12.34", "-3.10", "1000.01"]:
        assert format_amount(parse_amount(text)) == text


@settings(max_examples=25, deadline=None, derandomize=True, database=None)
@given(st.integers(min_value=-10**9, max_value=10**9))
def test_parse_inverts_format(cents):
    assert parse_amount(format_amount(cents)) == cents
PY
commit "Amounts as integer cents: parse and format"

cat >> ledger/money.py <<'PY'


def apply_discount(cents, percent):
    """The total after taking `percent` percent off (rounded down to a cent)."""
    if not 0 <= percent <= 100:
        raise ValueError("percent out of range: %r" % percent)
    discount = cents * percent // 100
    return discount
PY
commit "Add apply_discount"

python3 - <<'PY'
p = "ledger/money.py"
s = open(p).read()
s = s.replace("    discount = cents * percent // 100\n    return discount\n",
              "    discount = cents * percent // 100\n    return cents - discount\n")
open(p, "w").write(s)
PY
cat >> tests/test_money.py <<'PY'


def test_discount_reduces_the_total():
    from ledger.money import apply_discount

    assert apply_discount(1000, 10) == 900
    assert apply_discount(999, 0) == 999
    assert apply_discount(250, 100) == 0
PY
commit "Fix apply_discount returning the discount instead of the discounted total

A 10% discount on 10.00 gave 1.00; it gives 9.00 now. The new test fails before this fix."

cat > README.md <<'TXT'
# ledger

Amounts of money as integer cents: `parse_amount`, `format_amount`, `apply_discount`.
TXT
commit "Add a README"
git gc -q --prune=now 2>/dev/null || true
echo "$dest at $(git rev-parse HEAD)"
