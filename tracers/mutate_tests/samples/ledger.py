# -*- coding: utf-8 -*-
"""A tiny double-entry ledger: accounts, postings and a plain-text parser.

Written to look like ordinary library code for the mutation tests: decorators,
docstrings, comments, multi-line calls, f-strings, comprehensions, nested
functions, keyword-only and positional-only parameters, non-ASCII text (€).
"""

from __future__ import annotations

import re
import functools
from collections import defaultdict, namedtuple
from decimal import Decimal, InvalidOperation

__all__ = ["Posting", "Ledger", "parse_amount", "parse_journal", "LedgerError"]

Posting = namedtuple("Posting", "account amount memo")

_AMOUNT_RE = re.compile(r"^(?P<sign>[-+])?(?P<units>\d+)(?:\.(?P<cents>\d{1,2}))?\s*(?P<cur>€|EUR|USD)?$")
CURRENCY_SYMBOLS = {"€": "EUR", "$": "USD"}


class LedgerError(ValueError):
    """Raised for unbalanced transactions and malformed journal lines."""

    def __init__(self, message, *, line=None):
        if line is not None:
            message = "line %d: %s" % (line, message)
        super().__init__(message)
        self.line = line


def parse_amount(text, /, default_currency="EUR"):
    """Parse ``"12.50 €"`` into ``(Decimal('12.50'), 'EUR')``."""
    match = _AMOUNT_RE.match(text.strip())
    if match is None:
        raise LedgerError(f"bad amount {text!r}")
    units, cents = match.group("units"), match.group("cents") or "0"
    value = Decimal(units) + Decimal(cents) / (10 ** len(cents))
    if match.group("sign") == "-":
        value = -value
    currency = match.group("cur") or default_currency
    return value, CURRENCY_SYMBOLS.get(currency, currency)


def _balanced(postings, tolerance=Decimal("0.005")):
    total = sum((p.amount for p in postings), Decimal(0))
    return abs(total) <= tolerance


class Ledger:
    """Accounts are dotted names (``assets.bank``); balances roll up to parents."""

    def __init__(self, name="main", *, strict=True):
        self.name = name
        self.strict = strict
        self._postings = []
        self._balances = defaultdict(Decimal)

    def __len__(self):
        return len(self._postings)

    @property
    def accounts(self):
        return sorted(self._balances)

    def post(self, *postings, memo=""):
        """Record one balanced transaction made of several postings."""
        if len(postings) < 2:
            raise LedgerError("a transaction needs at least two postings")
        if self.strict and not _balanced(postings):
            total = sum(p.amount for p in postings)
            raise LedgerError("transaction does not balance (off by %s)" % total)
        for posting in postings:
            account = posting.account.lower()
            self._postings.append(Posting(account, posting.amount, posting.memo or memo))
            # roll the amount up to every parent account
            parts = account.split(".")
            while parts:
                self._balances[".".join(parts)] += posting.amount
                parts.pop()
        return len(self._postings)

    def balance(self, account, depth=None):
        account = account.lower()
        if depth is not None and account.count(".") >= depth:
            return Decimal(0)
        return self._balances.get(account, Decimal(0))

    def history(self, account, limit=10, reverse=False):
        """The last ``limit`` postings touching ``account`` (or a child of it)."""
        prefix = account.lower() + "."
        rows = [p for p in self._postings if p.account == account or p.account.startswith(prefix)]
        if reverse:
            rows = rows[::-1]
        else:
            rows = rows[-limit:]
        return rows[:limit]

    @functools.lru_cache(maxsize=None)
    def describe(self, width=40):
        lines = []
        for account in self.accounts:
            amount = self._balances[account]
            indent = "  " * account.count(".")
            label = (indent + account.rsplit(".", 1)[-1]).ljust(width - 12)
            lines.append(f"{label}{amount:>12.2f}")
        return "\n".join(lines)


def parse_journal(text, ledger=None, *, on_error="raise"):
    """Parse a journal: a date line starting a transaction, then indented postings.

    ``on_error`` is ``"raise"`` or ``"skip"``.
    """
    ledger = ledger if ledger is not None else Ledger()
    pending, date = [], None
    skipped = 0

    def flush(lineno):
        nonlocal pending
        if pending:
            try:
                ledger.post(*pending, memo=date)
            except LedgerError as exc:
                if on_error == "raise":
                    raise LedgerError(str(exc), line=lineno) from None
            pending = []

    for lineno, raw in enumerate(text.splitlines(), 1):
        line = raw.split(";", 1)[0].rstrip()
        if not line:
            continue
        if not raw[:1].isspace():
            flush(lineno)
            date = line.split()[0]
            continue
        try:
            account, amount = line.split(None, 1)
            value, _currency = parse_amount(amount)
        except (ValueError, LedgerError):
            if on_error == "skip":
                skipped += 1
                continue
            raise LedgerError("cannot parse posting %r" % line.strip(), line=lineno)
        pending.append(Posting(account, value, ""))
    flush(lineno if text else 0)
    return ledger, skipped


def total_by_prefix(ledger, prefixes):
    totals = {prefix: Decimal(0) for prefix in prefixes}
    for posting in ledger._postings:
        for prefix in prefixes:
            if posting.account == prefix or posting.account.startswith(prefix + "."):
                totals[prefix] += posting.amount
                break
    return {k: v for k, v in totals.items() if v}


def round_half_even(value, places=2):
    try:
        quantum = Decimal(1).scaleb(-places)
        return Decimal(value).quantize(quantum)
    except InvalidOperation:
        return None


async def replay(ledger, source, batch=50):
    """Feed transactions from an async iterator into ``ledger``; returns how many were posted."""
    count = 0
    async for postings in source:
        ledger.post(*postings)
        count += 1
        if count % batch == 0 and ledger.strict:
            pass
    return count
