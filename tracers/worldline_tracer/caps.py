"""Caps on what one test and one unit (one pytest run) may write: episodes and bytes.

Past a test's cap, the episodes kept are a seeded sample (``random.Random("SEED|nodeid|caps")``
shuffles them; they are kept in that order while they fit, then written in trace order), so a
rerun keeps the same ones. The unit's caps are a running budget shared across the run's tests: a
test may use at most what is left divided by the tests still to come (itself included; ``tests``
is the number collected), so what a small test leaves flows on to later ones and a large early test
cannot starve them. Whenever the unit has any budget left, a test that built episodes keeps at
least one (the first of its sample that fits), so every passing test stays in the data while the
unit's caps allow it. Without ``tests`` (0), a test may use the whole remainder. pytest's
collection order is fixed, so the cut is reproducible. Every test's line records what it built,
what it kept, its bytes and why it was sampled.
"""
import random


class OutputCaps(object):
    """``keep(nodeid, episodes)``: the episodes (JSON texts) one test may write, and what to record
    of the cut; ``choose(nodeid, sizes)`` the same from the texts' sizes alone. A cap of 0 or None
    is no cap; ``tests`` (settable once collection is done) is how many tests the run will write."""

    def __init__(self, seed, test_episodes=None, test_bytes=None, unit_episodes=None, unit_bytes=None,
                 tests=0):
        self.seed = seed
        self.test_episodes = test_episodes or None
        self.test_bytes = test_bytes or None
        self.unit_episodes_left = unit_episodes or None
        self.unit_bytes_left = unit_bytes or None
        self.tests = tests
        self.seen = 0

    def keep(self, nodeid, episodes):
        chosen, record = self.choose(nodeid, [len(ep) for ep in episodes])  # ASCII: len is bytes
        return (episodes if chosen is None else [episodes[i] for i in chosen]), record

    def choose(self, nodeid, sizes):
        """(the ascending indices of the episodes kept, or None when all are, what to record) for a
        test whose episodes' JSON texts have these sizes in bytes."""
        tests_left = max(1, self.tests - self.seen)
        self.seen += 1
        unit_n, unit_b = self.unit_episodes_left, self.unit_bytes_left
        max_n, reason_n = _tighter(self.test_episodes, None if unit_n is None else unit_n // tests_left)
        max_b, reason_b = _tighter(self.test_bytes, None if unit_b is None else unit_b // tests_left)
        total = sum(sizes)
        over_n = max_n is not None and len(sizes) > max_n
        over_b = max_b is not None and total > max_b
        if not over_n and not over_b:
            chosen, reason = None, None
            used = total
        else:
            reason = reason_n if over_n else reason_b
            order = list(range(len(sizes)))
            random.Random("%s|%s|caps" % (self.seed, nodeid)).shuffle(order)
            chosen = []
            used = 0
            for i in order:
                if max_n is not None and len(chosen) >= max_n:
                    break
                if max_b is not None and used + sizes[i] > max_b:
                    continue
                chosen.append(i)
                used += sizes[i]
            if not chosen:
                # the unit's share was too small for any: one episode that fits the test's own
                # caps and what the unit has left
                room_b = _tighter(self.test_bytes, unit_b)[0]
                if (self.test_episodes is None or self.test_episodes >= 1) and (unit_n is None or unit_n >= 1):
                    for i in order:
                        if room_b is None or sizes[i] <= room_b:
                            chosen.append(i)
                            used = sizes[i]
                            break
            chosen.sort()
        if unit_n is not None:
            self.unit_episodes_left = unit_n - (len(sizes) if chosen is None else len(chosen))
        if unit_b is not None:
            self.unit_bytes_left = unit_b - used
        return chosen, {"episodes_built": len(sizes), "episode_bytes": used, "sampled": reason}


def _tighter(test_cap, unit_share):
    """The tighter of a per-test cap and the test's share of the unit, and which one it is."""
    if unit_share is not None and (test_cap is None or unit_share < test_cap):
        return unit_share, "unit_cap"
    return test_cap, "test_cap"
