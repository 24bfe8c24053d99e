"""Where sentences end: the one splitter every reader of text uses (claims, statements,
extractive summaries, the knowledge base, and the stream gate that releases whole sentences).

A sentence ends at . ! ? or … (optionally followed by closing quotes or brackets) and white
space, or at a line break. A full stop after a known abbreviation or a single capital ("Dr.",
"J. K.", "e.g.") does not end one, unless a line break follows.
"""

from __future__ import annotations

import re

_END = re.compile(r"(?<=[.!?…])[\"'”’)\]]*\s+|\n+")
_END_WITH_SEMICOLON = re.compile(r"(?<=[.!?…;])[\"'”’)\]]*\s+|\n+")
_ABBREVIATION = re.compile(r"(?:\b(?:Mr|Mrs|Ms|Dr|St|Sr|Jr|Prof|Mt|vs|etc|e\.g|i\.e|No|Vol|Inc|Ltd|Co)|\b[A-Z])\.$")
_STREAM_END = re.compile(r"[.!?…][\"'”’)\]]*\s+|\n+")


def sentence_spans(text: str, *, semicolons: bool = False) -> list[tuple[int, int]]:
    """(start, end) of each sentence, white space trimmed. `semicolons`: a ';' ends one too
    (statement readers treat "I fly Monday; my budget is 200" as two statements)."""
    spans: list[tuple[int, int]] = []
    start = 0
    for match in (_END_WITH_SEMICOLON if semicolons else _END).finditer(text):
        end = match.start()
        if "\n" not in match.group() and _ABBREVIATION.search(text, start, end):
            continue
        _add(spans, text, start, end)
        start = match.end()
    _add(spans, text, start, len(text))
    return spans


def abbreviation_at(text: str, end: int) -> bool:
    """The full stop just before `end` closes an abbreviation or an initial, not a sentence."""
    return bool(_ABBREVIATION.search(text, max(0, end - 8), end))


def split_sentences(text: str, *, semicolons: bool = False) -> list[str]:
    return [text[a:b] for a, b in sentence_spans(text, semicolons=semicolons)]


def last_sentence_end(text: str, start: int = 0) -> int:
    """The index just after the last sentence end in text[start:] (`start` when there is none).
    For streams: text up to there is whole sentences; an abbreviation's dot may end one early,
    which only releases a piece sooner."""
    end = start
    for match in _STREAM_END.finditer(text, start):
        end = match.end()
    return end


def piece_end(text: str, start: int, max_chars: int) -> int:
    """Where a stream's next piece to judge ends: after its last complete sentence, or, when more
    than `max_chars` arrived without one (a one-line JSON answer, a long line of code), at the last
    clause or word break within `max_chars` (as `bounded_sentences` cuts a claim); `start` when
    there is no piece yet. A sentence that never ended was scanned whole again at every chunk (a
    quadratic cost on the event loop: a 32 KB one-line answer stalled the proxy for 46 s); what is
    pending now stays within `max_chars` and a chunk, so a stream costs in proportion to its length."""
    end = last_sentence_end(text, start)
    if end > start or len(text) - start <= max_chars:
        return end
    return _cut(text, start, max_chars)


def _add(spans: list[tuple[int, int]], text: str, start: int, end: int) -> None:
    piece = text[start:end]
    stripped = piece.strip()
    if stripped:
        lead = len(piece) - len(piece.lstrip())
        spans.append((start + lead, start + lead + len(stripped)))


_BREAK = re.compile(r"[,;:}\])]\s*|\s+")
_SPACE = re.compile(r"\s*")


def _cut(text: str, start: int, max_chars: int) -> int:
    """Where a piece of `text` from `start` longer than `max_chars` is cut: after its last clause or
    word break within the limit, else at the limit."""
    breaks = [m.end() for m in _BREAK.finditer(text, start, start + max_chars)]
    return breaks[-1] if breaks else start + max_chars


def bounded_sentences(text: str, max_chars: int) -> list[str]:
    """The sentences of `text`, a sentence longer than `max_chars` cut at its last clause or word
    break before the limit (a log or a JSON tool result is one "sentence" of thousands of
    characters: every reader of claims would otherwise cost in proportion to its square)."""
    out: list[str] = []
    for sentence in split_sentences(text):
        if len(sentence) <= max_chars:
            if sentence:
                out.append(sentence)
            continue
        # Positions in the sentence, never a copy of its rest: copying the rest at each cut made a
        # 16 MB tool result cost ~20 s (quadratic), one answer of 100 MB minutes of CPU.
        start, end, tail = 0, len(sentence), len(sentence.rstrip())
        while end - start > max_chars:
            cut = _cut(sentence, start, max_chars)
            head = sentence[start:cut].strip()
            if head:
                out.append(head)
            start, end = _SPACE.match(sentence, cut, tail).end(), tail
        if start < end:
            out.append(sentence[start:end])
    return out
