"""history/content.py: Mentions.lines_naming reads word by word only the lines holding a term's key
run. What it finds must be what reading every line finds (the regex over every mentioned term it
replaced, compiled per event and searched per line, was most of a compaction event's digest time)."""

from __future__ import annotations

import re
from collections import Counter

from hypothesis import given, settings
from hypothesis import strategies as st

from ctxwarden.policies.history.content import RARE_LINES, Mentions, tokens


def every_line_read(mentions: Mentions, lines: list[str], extra: frozenset[str] = frozenset()) -> list[bool]:
    """lines_naming as it was: every line searched for every term, then read word by word."""
    terms = mentions.terms | extra
    if not terms:
        return [False] * len(lines)
    maybe = re.compile("|".join(re.escape(t) for t in sorted(terms, key=lambda t: (-len(t), t))))
    found = [terms.intersection(tokens(line)) if maybe.search(line.lower()) else set() for line in lines]
    lines_with = Counter(t for in_line in found for t in in_line)
    limit = max(3, len(lines) // RARE_LINES)
    return [any(lines_with[t] <= limit for t in in_line) for in_line in found]


PIECES = ["ord", "4711", "ORD-4711", "user_id", "src/app.py", "worker-12", "İstanbul", "x__y", "___", "a.b.c",
          "RETRY_SALT_42", "http://h.io/p?q=1", "v2.0-rc1", "naïve-Ünï", "status", "ok", "ref=ar_9f2c", "#42",
          "userId", "HTTP", "ß-7", "e-mail@x.org", "..", "-", "/", ":", " ", "\t", "=", "_", "١٢٣-x"]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.lists(st.sampled_from(PIECES), max_size=8).map("".join), min_size=1, max_size=4).map(" ".join),
       st.lists(st.lists(st.sampled_from(PIECES), max_size=10).map("".join), max_size=30),
       st.frozensets(st.lists(st.sampled_from(PIECES), min_size=1, max_size=3).map("".join).map(str.lower), max_size=3))
def test_lines_naming_finds_what_reading_every_line_finds(said, lines, extra):
    mentions = Mentions(said)
    assert mentions.lines_naming(lines, extra) == every_line_read(mentions, lines, extra)
    assert mentions.lines_naming(lines) == every_line_read(mentions, lines)  # the key runs, kept, serve again


def test_a_term_with_no_letters_or_digits_makes_every_line_read():
    mentions = Mentions("the separator ___ and the id ord-4711")
    lines = ["a ___ b", "ord-4711 shipped", "nothing here"]
    assert mentions.lines_naming(lines) == every_line_read(mentions, lines) == [True, True, False]
