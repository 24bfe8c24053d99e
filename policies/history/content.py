"""Reading archived content: what type a text is (json, log, code, text), the words in it, and
what the later conversation mentions. Shared by the digests (digest.py, json_digest.py) and the
search inside archived texts (archive_search.py).

File listings (`ls -l`, `find`, `tree` output), tables (CSV/TSV/pipes) and runs of near-identical
lines count as "log": line data, digested and searched line by line.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Callable

from ..cache import cache_short

Count = Callable[[str], int]

SAMPLE_LINES = 400  # lines content_type reads
RARE_LINES = 50  # a mentioned term held by more than 1/RARE_LINES of the lines (and 3+) keeps none of them


def estimate_tokens(text: str) -> int:
    """The default counter: about four characters a token."""
    return (len(text) + 3) // 4


# ---------------------------------------------------------------------------- content types

_FENCE = re.compile(r"^```[\w+-]*[ \t]*\n(.*?)\n?```\s*$", re.DOTALL)
_DECODER = json.JSONDecoder()
_TIMESTAMP = (r"\d{4}-\d\d-\d\d[T ]\d\d:\d\d(?::\d\d(?:[.,]\d+)?)?(?:Z|[+-]\d\d:?\d\d)?"
              r"|\d\d:\d\d:\d\d(?:[.,]\d+)?|[A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d")
LOG_LINE = re.compile(rf"^.{{0,40}}?(?:{_TIMESTAMP})|^\W{{0,2}}\d{{10}}(?:\.\d+)?\b"
                       r"|^.{0,40}?\b(?:TRACE|DEBUG|INFO|NOTICE|WARN(?:ING)?|ERROR|FATAL|CRITICAL|SEVERE)\b"
                       r"|^\{.{0,40}?\"(?:level|severity|time|timestamp|ts|@timestamp)\""
                       r"|^.{0,40}?\b(?:level|lvl|severity)=\w|^(?:time|ts|timestamp)=")
_LISTING = re.compile(r"^(?:[dlcbps-][rwxsStT-]{9}[.@+]?\s+\d+\s|total \d+$|[│├└ ]*[├└]── "
                      r"|\.{0,2}/?(?:[\w.@+-]+/)+[\w.@+-]*$|[\w@+-]+\.\w{1,8}$)")
_JSON_LINE = re.compile(r"^\s*(?:\{.*\}|\[.*\])\s*$")
IMPORT = re.compile(r"^\s*(?:import\s+[\w.{*]|from\s+[\w.]+\s+import\s|#\s*include\s*[<\"]|using\s+[\w.]+\s*;"
                     r"|package\s+[\w.]+|use\s+[\w:]+|(?:const|let|var)\s+.+=\s*require\(|extern crate\s)")
_MODIFIERS = r"(?:export|default|pub(?:\([\w:]+\))?|public|private|protected|internal|static|final|abstract" \
             r"|override|virtual|async|unsafe|extern|inline|synchronized)"
SIGNATURE = re.compile(
    rf"^\s*(?:{_MODIFIERS}\s+)*(?:def|class|function\*?|func|fn|interface|struct|enum|trait|impl|module"
    r"|namespace|record|object)\b"
    rf"|^\s*(?:{_MODIFIERS}\s+)+[\w<>\[\],.? ]+\s+\w+\s*\("
    r"|^\s*(?:export\s+)?(?:const|let|var)\s+\w+\s*=\s*(?:async\s+)?(?:function\b|\([^)]*\)[^=]*=>|\w+\s*=>)"
    r"|^type\s+\w+\s+(?:struct|interface)\b")
DECORATOR = re.compile(r"^\s*@[\w.]+")
DIFF = re.compile(r"^(?:diff --git |@@ -\d|\+\+\+ |--- a/|index [0-9a-f]{7,})")
_CODE_LINE = re.compile(
    r"[{};]\s*$|^\s*[})\]]+[;,)]*\s*$|^\s*(?:return\b|if\s.*:\s*$|for\s.*\sin\s.*:\s*$|elif\s|else\s*:"
    r"|try\s*:|except\b.*:\s*$|while\s.*:\s*$)|^\s*[\w.\[\]'\"]+\s*(?:[-+*/%|&]?=|:=)\s*[^=\s]")
VARIABLE = re.compile(
    rf"(?P<ts>{_TIMESTAMP})|(?P<hex>\b[0-9a-fA-F]{{8}}-[0-9a-fA-F]{{4}}-[0-9a-fA-F-]{{14,}}\b|\b0x[0-9a-fA-F]+\b"
    r"|\b(?=[a-fA-F]*\d)(?=\d*[a-fA-F])[0-9a-fA-F]{8,}\b)|(?P<n>\d+(?:\.\d+)?)")


def parse_json(text: str) -> tuple[Any, str] | None:
    """The JSON object or array a text holds (inside a ```json fence too) and the short text after it."""
    body = text.strip()
    fenced = _FENCE.match(body)
    if fenced:
        body = fenced.group(1).strip()
    if not body or body[0] not in "[{":
        return None
    try:
        value, end = _DECODER.raw_decode(body)
    except (ValueError, RecursionError):
        return None
    rest = body[end:].strip()
    if len(rest) > 200 or rest[:1] in ("{", "["):  # JSON lines, or a value with a story after it
        return None
    return value, rest


def _share(lines: list[str], pattern: re.Pattern) -> float:
    return sum(1 for line in lines if pattern.search(line)) / len(lines)


def _is_table(lines: list[str]) -> bool:
    """CSV/TSV/pipe tables: most lines hold the same number (2+) of one delimiter."""
    for delimiter in (",", "\t", "|"):
        common, times = Counter(line.count(delimiter) for line in lines).most_common(1)[0]
        if common >= 2 and times >= 0.8 * len(lines):
            return True
    return False


def content_type(text: str) -> str:
    """"json" | "log" | "code" | "text". File listings and tables count as "log": line data."""
    if parse_json(text) is not None:
        return "json"
    lines = [line for line in text.split("\n", SAMPLE_LINES)[:SAMPLE_LINES] if line.strip()]
    if len(lines) < 2:
        return "text"
    if _share(lines, LOG_LINE) >= 0.5:
        return "log"
    if _share(lines, _JSON_LINE) >= 0.8:
        return "log"  # JSON lines: one record a line
    code = sum(1 for line in lines if IMPORT.match(line) or SIGNATURE.match(line) or _CODE_LINE.search(line))
    if sum(1 for line in lines if DIFF.match(line)) >= 2 or (code >= 2 and code >= 0.3 * len(lines)):
        return "code"
    masked = Counter(VARIABLE.sub("#", line.strip()) for line in lines)
    if len(lines) >= 6 and sum(c for c in masked.values() if c > 1) >= 0.5 * len(lines):
        return "log"  # many near-identical lines
    if len(lines) >= 3 and (_share(lines, _LISTING) >= 0.6 or (len(lines) >= 5 and _is_table(lines))):
        return "log"
    return "text"


# ---------------------------------------------------------------------------- words and mentions

_TOKEN = re.compile(r"\w(?:[\w.\-:/@#+]*\w)?")
_SEGMENT = re.compile(r"[/:@=#]+")
_PART = re.compile(r"[\W_]+")
_DISTINCT = re.compile(r"\d|\w[_\-.:/@]\w|[a-z][A-Z]|^[A-Z]{3,}$")


def tokens(text: str) -> list[str]:
    """Lower-case words: the joined forms ("ord-4711", "user_id", "src/app.py"), then the segments
    ("app.py") and parts ("ord", "4711") of each, so an identifier is found whole or in pieces."""
    words = _TOKEN.findall(text.lower())
    return words + [piece for word in words if not word.isalnum() for piece in _pieces(word)]


@cache_short(maxsize=65536, max_chars=64)  # a long token (a base64 blob) is not kept
def _pieces(word: str) -> tuple[str, ...]:
    pieces = [s for s in _SEGMENT.split(word) if s] + [p for p in _PART.split(word) if p]
    return tuple(p for p in dict.fromkeys(pieces) if p != word)


def distinctive_terms(text: str) -> frozenset[str]:
    """Identifier-like words (digits, inner separators, camelCase, ACRONYMS) and their numeric parts."""
    terms: set[str] = set()
    for word in _TOKEN.findall(text):
        if len(word) >= 3 and _DISTINCT.search(word):
            terms.update(t for t in tokens(word) if len(t) >= 3 and (t == word.lower() or not t.isalpha()))
    return frozenset(terms)


class Mentions:
    """What the later conversation names, asked two ways: does it name this value, this line?"""

    def __init__(self, text: str) -> None:
        self.text = " " + " ".join(text.lower().split()) + " "
        self.words = frozenset(_TOKEN.findall(text.lower()))
        self.all = frozenset(tokens(text))
        self.terms = distinctive_terms(text)
        self._memo: dict[str, bool] = {}
        self._keys: frozenset[str] | None = None  # the terms' key runs, made at the first lines_naming

    def names(self, value: str) -> bool:
        """A scalar (id, name, …) of 3+ characters appears in the mentions, as a word or a phrase."""
        v = " ".join(value.lower().split())
        if len(v) < 3 or len(v) > 200 or not self.words:
            return False
        if _TOKEN.fullmatch(v):
            return v in self.all
        hit = self._memo.get(v)
        if hit is None:
            first = _TOKEN.search(v)
            hit = self._memo[v] = bool(first) and first.group() in self.all and _has_phrase(self.text, v)
        return hit

    def lines_naming(self, lines: list[str], extra: frozenset[str] = frozenset()) -> list[bool]:
        """Which lines name a mentioned term (or one of `extra`) that few of the lines hold: an id
        is worth keeping its lines for, a status code on every line is not. Only the lines holding
        a term's key run (`_key_runs`) are read word by word: the mentions of a long tail name
        thousands of terms, and a regex of all of them (compiled per event, searched per line) was
        most of what a compaction event's digests cost."""
        terms = self.terms | extra
        if not terms:
            return [False] * len(lines)
        if self._keys is None:
            self._keys = _key_runs(self.terms)
        extra_keys = _key_runs(extra - self.terms) if extra else frozenset()
        keys = None if self._keys is ALL or extra_keys is ALL else self._keys | extra_keys
        found = [terms.intersection(tokens(line)) if keys is None or not keys.isdisjoint(_RUN.findall(line.lower()))
                 else set() for line in lines]
        lines_with = Counter(t for terms_in_line in found for t in terms_in_line)
        limit = max(3, len(lines) // RARE_LINES)
        return [any(lines_with[t] <= limit for t in terms_in_line) for terms_in_line in found]


_RUN = re.compile(r"[^\W_]+")  # a run of letters and digits
ALL: frozenset[str] = frozenset({"\0all"})  # _key_runs of terms with no run: every line is read


def _key_runs(terms: frozenset[str]) -> frozenset[str]:
    """Per term, its longest run of letters and digits. A term `tokens` finds in a line starts and
    ends where a run of the line does (tokens and their pieces are cut at characters that are not
    letters or digits), so each of its runs is a whole run of the line: a line without any term's
    key run names no term, and only the others need reading."""
    keys = set()
    for term in terms:
        runs = _RUN.findall(term)
        if not runs:
            return ALL
        keys.add(max(runs, key=len))
    return frozenset(keys)


def _has_phrase(text: str, phrase: str) -> bool:
    at = text.find(phrase)
    while at >= 0:
        if not text[at - 1].isalnum() and not text[at + len(phrase)].isalnum():  # text is space-padded
            return True
        at = text.find(phrase, at + 1)
    return False


@dataclass
class DigestContext:
    """What one digest is made with: the mentions, the counter, the budget and the recall hint."""

    mentions: Mentions
    count: Count
    budget: int
    hint: str
    memo: dict[tuple[str, int], Any] = field(default_factory=dict)  # per JSON value, across levels of detail

    def recall(self, what: str = "any of them") -> str:
        return f"; context_recall({self.hint}, query=...) finds {what}" if self.hint else ""

    def full(self) -> str:
        return f"; full text: context_recall({self.hint})" if self.hint else ""


def clip_to_budget(text: str, budget: int, count: Count, note: str = "") -> str:
    """`text` if it fits, else its longest run of whole lines (plus `note`) that does; at worst
    the first line's longest prefix."""
    if count(text) <= budget:
        return text
    lines = text.split("\n")
    tail = [note] if note and count(note) < budget else []
    fits = largest(len(lines), lambda k: count("\n".join(lines[:k] + tail)) <= budget)
    if fits:
        return "\n".join(lines[:fits] + tail)
    first = lines[0][: 32 * budget]
    cut = largest(len(first), lambda k: count(first[:k] + "…") <= budget)
    return first[:cut] + "…" if cut else ""


def largest(n: int, fits: Callable[[int], bool]) -> int:
    """The largest k in [0, n] with fits(k) (0 when none), fits being monotone."""
    lo, hi = 0, n
    while lo < hi:
        mid = (lo + hi + 1) // 2
        lo, hi = (mid, hi) if fits(mid) else (lo, mid - 1)
    return lo


def clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: max(0, limit - 1)] + "…"


def starts_block(line: str) -> bool:
    """A signature or decorator at the left margin: where a top-level block of code begins."""
    return not line[:1].isspace() and bool(SIGNATURE.match(line) or DECORATOR.match(line))
