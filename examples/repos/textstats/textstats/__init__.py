"""Small text statistics: words, sentences, frequencies, readability."""

from .core import (
    average_word_length,
    flesch_reading_ease,
    sentences,
    syllables,
    top_words,
    word_count,
    words,
)

__all__ = [
    "average_word_length",
    "flesch_reading_ease",
    "sentences",
    "syllables",
    "top_words",
    "word_count",
    "words",
]
