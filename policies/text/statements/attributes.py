"""Categorical values: the alternatives of a common dimension (a file format, a tone, a frequency).

"Export it as CSV" … "JSON would be better for the export"; "keep the client emails casual" … "use a
formal tone in the client emails": the values are words, not numbers, but they are alternatives
of one dimension, so two of them said about the same subject cannot both hold, whatever the
sentence around them. Like units for quantities (typed.py), the dimensions are a vocabulary of
values agents are commonly asked to set, not sentences: the sentence's clause gives the subject
(subject.py) and the comparison is the typed one (compare.py).
"""

from __future__ import annotations

import re

from .lexicon import LANGUAGES

# dimension → canonical value → the phrases that say it (a phrase's last word may take a plural "s")
DIMENSIONS: dict[str, dict[str, tuple[str, ...]]] = {
    "format": {
        "csv": ("csv",), "json": ("json",), "pdf": ("pdf",), "excel": ("xlsx", "excel"), "markdown": ("markdown",),
        "html": ("html",), "xml": ("xml",), "yaml": ("yaml", "yml"), "docx": ("docx", "word document", "word doc", "word file"),
        "text": ("plain text", "txt"), "parquet": ("parquet",), "png": ("png",), "jpeg": ("jpg", "jpeg"), "svg": ("svg",),
    },
    "programming language": {
        "python": ("python",), "typescript": ("typescript",), "javascript": ("javascript",), "java": ("java",),
        "golang": ("golang",), "rust": ("rust",), "c++": ("c++",), "c#": ("c#",), "ruby": ("ruby",), "php": ("php",),
        "kotlin": ("kotlin",), "swift": ("swift",), "scala": ("scala",),
    },
    "language": {lang: (lang,) for lang in LANGUAGES},
    "tone": {
        "formal": ("formal", "professional"), "casual": ("casual", "informal", "relaxed", "laid back", "chatty", "conversational"),
    },
    "length": {
        "short": ("short", "brief", "concise", "succinct", "terse"),
        "long": ("long", "lengthy", "detailed", "in depth", "thorough", "comprehensive"),
    },
    "frequency": {
        "hourly": ("hourly", "every hour"), "daily": ("daily", "every day", "each day"),
        "weekly": ("weekly", "every week", "each week"), "monthly": ("monthly", "every month", "each month"),
        "quarterly": ("quarterly",), "yearly": ("yearly", "annually", "annual"),
    },
    "order": {
        "ascending": ("ascending", "oldest first", "lowest first"),
        "descending": ("descending", "newest first", "latest first", "highest first"),
    },
    "theme": {"dark": ("dark mode", "dark theme"), "light": ("light mode", "light theme")},
    "unit system": {"metric": ("metric",), "imperial": ("imperial",)},
    "size": {"small": ("small",), "medium": ("medium",), "large": ("large", "extra large")},
    "chart": {
        "bar": ("bar chart", "bar graph", "bar plot"), "line": ("line chart", "line graph", "line plot"),
        "pie": ("pie chart", "pie graph"), "scatter": ("scatter plot", "scatterplot", "scatter chart"),
        "histogram": ("histogram",), "heatmap": ("heatmap", "heat map"),
    },
    "operating system": {
        "linux": ("linux", "ubuntu", "debian"), "windows": ("windows",), "macos": ("macos", "mac os", "osx", "os x"),
        "android": ("android",), "ios": ("ios",),
    },
    "cloud": {"aws": ("aws", "amazon web services"), "gcp": ("gcp", "google cloud"), "azure": ("azure",)},
    "database": {
        "postgres": ("postgres", "postgresql"), "mysql": ("mysql", "mariadb"), "sqlite": ("sqlite",), "mongodb": ("mongo", "mongodb"),
    },
    "meeting mode": {
        "in person": ("in person", "on site", "onsite", "face to face"),
        "remote": ("remote", "remotely", "virtual", "virtually", "video call", "video visit", "video appointment",
                   "video consultation", "telehealth", "online appointment", "online session", "online meeting",
                   "online class", "online course", "online lesson", "fully online"),
    },
    "colour": {c: (c,) for c in ("black", "white", "red", "blue", "navy", "green", "yellow", "orange", "purple", "pink",
                                 "brown", "beige", "silver", "gold", "teal", "maroon")} | {"grey": ("grey", "gray")},
    "spice": {"mild": ("mild", "not spicy"), "hot": ("spicy", "hot")},
    "payment": {"card": ("credit card", "debit card"), "cash": ("cash",), "bank transfer": ("bank transfer", "wire transfer"),
                "paypal": ("paypal",)},
}

_TOKEN = re.compile(r"[a-z0-9][a-z0-9+#]*")
_VERSION = re.compile(r"\s*\d")  # "Python 3.12" is a version, compared as an identifier
# "as long as", "how long", "long before", "no longer": not a length
_NOT_A_LENGTH_AFTER = re.compile(r"\s*(?:as|before|after|ago|enough)\b")
_NOT_A_LENGTH_BEFORE = re.compile(r"(?:\bas|\bhow|\bso|\btoo|\bno|\ball day|\bthis)\s+$")


def _index() -> dict[str, list[tuple[tuple[str, ...], str, str]]]:
    """First word → (phrase words, dimension, value), longest phrases first."""
    index: dict[str, list[tuple[tuple[str, ...], str, str]]] = {}
    for dimension, values in DIMENSIONS.items():
        for value, phrases in values.items():
            for phrase in phrases:
                words = tuple(_TOKEN.findall(phrase))
                index.setdefault(words[0], []).append((words, dimension, value))
    for entries in index.values():
        entries.sort(key=lambda e: -len(e[0]))
    return index


_PHRASES = _index()


def _matches(words: tuple[str, ...], tokens: list[re.Match[str]], i: int) -> bool:
    if i + len(words) > len(tokens):
        return False
    for k, word in enumerate(words):
        token = tokens[i + k].group(0)
        if token != word and not (k == len(words) - 1 and token == word + "s"):
            return False
    return True


def attributes(text: str) -> list[tuple[str, str, int, int]]:
    """(dimension, canonical value, start, end) for each categorical value in `text`."""
    lower = text.lower()
    tokens = list(_TOKEN.finditer(lower))
    out: list[tuple[str, str, int, int]] = []
    i = 0
    while i < len(tokens):
        found = _at(text, lower, tokens, i)
        if found is None:
            i += 1
            continue
        out.append(found[0])
        i += found[1]
    return out


def _at(text: str, lower: str, tokens: list[re.Match[str]], i: int) -> tuple[tuple[str, str, int, int], int] | None:
    first = tokens[i].group(0)
    if first == "go" and text[tokens[i].start():tokens[i].end()] == "Go" and tokens[i].start() > 0:
        entries = [(("go",), "programming language", "golang")]  # the language is capitalised; the verb is not
    else:
        entries = _PHRASES.get(first) or _PHRASES.get(first[:-1] if first.endswith("s") else "", [])
    for words, dimension, value in entries:
        if not _matches(words, tokens, i):
            continue
        start, end = tokens[i].start(), tokens[i + len(words) - 1].end()
        if _VERSION.match(lower, end):
            return None
        if dimension == "length" and (_NOT_A_LENGTH_AFTER.match(lower, end)
                                      or _NOT_A_LENGTH_BEFORE.search(lower[max(0, start - 8):start])):
            return None
        return (dimension, value, start, end), len(words)
    return None
