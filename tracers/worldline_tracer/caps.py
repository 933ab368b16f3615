"""Caps on what one test and one unit (one pytest run) may write: episodes and bytes.

Past a test's cap, the episodes kept are a seeded sample (``random.Random("SEED|nodeid|caps")``
shuffles them; they are kept in that order while they fit, then written in trace order), so a
rerun keeps the same ones. The unit's caps are a running budget over the run: each test may use
what earlier tests left, so once a unit is full, later tests keep nothing (pytest's collection order
is fixed, so which tests those are is reproducible too). Every test's line records what it built,
what it kept, its bytes and why it was sampled.
"""
import random


class OutputCaps(object):
    """``keep(nodeid, episodes)``: the episodes (JSON texts) one test may write, and what to record
    of the cut. A cap of 0 or None is no cap."""

    def __init__(self, seed, test_episodes=None, test_bytes=None, unit_episodes=None, unit_bytes=None):
        self.seed = seed
        self.test_episodes = test_episodes or None
        self.test_bytes = test_bytes or None
        self.unit_episodes_left = unit_episodes or None
        self.unit_bytes_left = unit_bytes or None

    def keep(self, nodeid, episodes):
        max_n, max_b, reason = self.test_episodes, self.test_bytes, "test_cap"
        unit_n, unit_b = self.unit_episodes_left, self.unit_bytes_left
        if unit_n is not None and (max_n is None or unit_n < max_n):
            max_n, reason_n = unit_n, "unit_cap"
        else:
            reason_n = "test_cap"
        if unit_b is not None and (max_b is None or unit_b < max_b):
            max_b, reason_b = unit_b, "unit_cap"
        else:
            reason_b = "test_cap"
        sizes = [len(ep) for ep in episodes]  # the texts are ASCII (JSON with ensure_ascii)
        total = sum(sizes)
        over_n = max_n is not None and len(episodes) > max_n
        over_b = max_b is not None and total > max_b
        if not over_n and not over_b:
            kept, reason = episodes, None
            used = total
        else:
            reason = reason_n if over_n else reason_b
            order = list(range(len(episodes)))
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
            chosen.sort()
            kept = [episodes[i] for i in chosen]
        if unit_n is not None:
            self.unit_episodes_left = unit_n - len(kept)
        if unit_b is not None:
            self.unit_bytes_left = unit_b - used
        return kept, {"episodes_built": len(episodes), "episode_bytes": used, "sampled": reason}
