"""What the local checker reads from a text, read once: its slots, content words and sentences.

One claim's features read the same texts many times (the question, each evidence window, the
windows of one document joined, all of them joined), the claims of one answer share a question
and most of their evidence, and KB windows recur across answers. Each reading is kept in one
bounded LRU (policies/cache.py) per kind, keyed by the text. Texts longer than
CACHED_TEXT_CHARS (a whole tool result with no sentence end) are read each time and not kept:
one entry of such a text held ~47 KB, and 50,000 of them were the proxy's largest memory growth.
"""

from __future__ import annotations

from typing import Any, Callable

from ...cache import LRU
from ...text.sentences import split_sentences
from ...text.slots import Slot, content_words, slots

CACHED_TEXT_CHARS = 2000
CACHED_TEXTS = 20_000
CACHED_BYTES = 32 * 1024 * 1024  # a reading's size: its text's characters plus ~200 bytes per item

def _size(text: str, value: tuple) -> int:
    return len(text) + 200 * len(value) + 100


_SLOTS: LRU[str, tuple[Slot, ...]] = LRU(CACHED_TEXTS, max_bytes=CACHED_BYTES, sizeof=_size)
_WORDS: LRU[str, frozenset[str]] = LRU(CACHED_TEXTS, max_bytes=CACHED_BYTES, sizeof=lambda t, v: len(t) + 60 * len(v) + 100)
_SENTENCES: LRU[str, tuple[str, ...]] = LRU(CACHED_TEXTS // 4, max_bytes=CACHED_BYTES // 4, sizeof=lambda t, v: 2 * len(t) + 100)
_MISSING = object()


def _read(cache: LRU, text: str, reader: Callable[[str], Any]) -> Any:
    if len(text) > CACHED_TEXT_CHARS:
        return reader(text)
    value = cache.get(text, _MISSING)
    if value is _MISSING:
        value = reader(text)
        cache.put(text, value)
    return value


def slots_of(text: str) -> tuple[Slot, ...]:
    """Every date, quantity and name in the text (policies/text/slots.py)."""
    return _read(_SLOTS, text, lambda t: tuple(slots(t)))


def words_of(text: str) -> frozenset[str]:
    """The text's content words, folded and stemmed."""
    return _read(_WORDS, text, lambda t: frozenset(content_words(t)))


def names_of(text: str) -> list[Slot]:
    return [s for s in slots_of(text) if s.kind == "name"]


def sentences_of(text: str) -> tuple[str, ...]:
    return _read(_SENTENCES, text, lambda t: tuple(split_sentences(t)))


def subjects_of(text: str) -> list[Slot]:
    """The names a text is about: each sentence's opening name ("Robert Anthony Eden, 1st Earl
    of Avon, (1897 - 1977) was ..."), not every name it mentions in passing ("a British ...")."""
    out = []
    for sentence in sentences_of(text):
        first = next((n for n in names_of(sentence) if len(n.value) >= 2), None)
        if first is not None and not words_of(sentence[:first.start]):
            out.append(first)
    return out


def forget() -> None:
    """Drop every cached reading (tests that count readings start from none)."""
    for cache in (_SLOTS, _WORDS, _SENTENCES):
        cache.clear()
