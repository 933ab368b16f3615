import re
from collections import Counter

_WORD = re.compile(r"[A-Za-z']+")
_SENTENCE_END = re.compile(r"[.!?]+")


def words(text):
    return [w.lower().strip("'") for w in _WORD.findall(text) if w.strip("'")]


def word_count(text):
    return len(words(text))


def sentences(text):
    return [s.strip() for s in _SENTENCE_END.split(text) if s.strip()]


def average_word_length(text):
    ws = words(text)
    if not ws:
        return 0.0
    return sum(len(w) for w in ws) / len(ws)


def top_words(text, n=3):
    counts = Counter(words(text))
    # Most frequent first; ties broken alphabetically so the result is deterministic.
    return sorted(counts.items(), key=lambda item: (-item[1], item[0]))[:n]


def syllables(word):
    """A rough syllable count: groups of vowels, minus a silent final 'e'."""
    word = word.lower()
    groups = re.findall(r"[aeiouy]+", word)
    count = len(groups)
    if word.endswith("e") and not word.endswith("le") and count > 1:
        count -= 1
    return max(count, 1)


def flesch_reading_ease(text):
    ws = words(text)
    ss = sentences(text)
    if not ws or not ss:
        raise ValueError("text has no words")
    total_syllables = sum(syllables(w) for w in ws)
    return 206.835 - 1.015 * (len(ws) / len(ss)) - 84.6 * (total_syllables / len(ws))
