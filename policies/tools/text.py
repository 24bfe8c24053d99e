"""What a tool definition says, as text to embed and as terms to match lexically.

A definition is embedded as a whole ("split name: description. Parameters: …") and as short
segments (its name, and each clause of its description): many tools describe several unrelated
functions in one sentence, and a query usually matches one of them, not the average.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from ..cache import cache_short

Tool = dict[str, Any]

MAX_SEGMENTS = 8  # bounds the vectors per tool (catalog size, per-request matrix product)
MAX_DESCRIPTION_CHARS = 2000
MAX_ENUM_VALUES = 40  # per tool: an enum of 300 country codes would drown the description

_CAMEL = re.compile(r"([a-z0-9])([A-Z])|([A-Z])([A-Z][a-z])")
_SEPARATORS = re.compile(r"[_\-.&/:]+")
_CLAUSES = re.compile(r"[.;!?\n]|,|\band\b|\bor\b|&")
_TERM = re.compile(r"[a-z0-9]+")

STOPWORDS = frozenset(
    """a an the of to in on for and or is are was were be been with by at from as it its this that
    these those i me my you your can could would should will shall do does did how what which who whom
    where when why please want need help get some any about into there their them they we our us
    if then than so not no yes just also very all more most other such only own same too here now
    let lets like one using use""".split()
)


def tool_name(tool: Tool) -> str | None:
    """The name a tool is called by: function tools, custom tools, or a flat `name`."""
    for kind in ("function", "custom"):
        inner = tool.get(kind)
        if isinstance(inner, dict) and isinstance(inner.get("name"), str):
            return inner["name"]
    name = tool.get("name")
    return name if isinstance(name, str) else None


def split_identifier(name: str) -> str:
    """'searchFlights' / 'search_flights' / 'PDF&URLTool' → 'search Flights' … 'PDF URL Tool'."""
    spaced = _CAMEL.sub(lambda m: f"{m.group(1) or m.group(3)} {m.group(2) or m.group(4)}", name)
    return _SEPARATORS.sub(" ", spaced).strip()


@dataclass(frozen=True)
class ToolText:
    name: str | None
    document: str  # the whole definition, as embedded
    segments: tuple[str, ...]  # the name words, then the description's clauses
    lexical: str  # name words, description and parameter names, for lexical matching

    @property
    def texts(self) -> list[str]:
        """Everything embedded for this tool, in storage order (part 0 is the document)."""
        return [self.document, *self.segments]


def describe_tool(tool: Tool) -> ToolText:
    name = tool_name(tool)
    inner = tool.get("function") or tool.get("custom") or tool
    description = str(inner.get("description") or "")[:MAX_DESCRIPTION_CHARS] if isinstance(inner, dict) else ""
    schema = inner.get("parameters") if isinstance(inner, dict) else None
    params = _parameter_names(schema)
    # A tool without a name (a provider's built-in, e.g. {"type": "web_search_preview"}) is described by its type.
    words = split_identifier(name or str(tool.get("type") or "tool"))
    document = f"{words}: {description}" if description else words
    if params:
        document += f" Parameters: {', '.join(split_identifier(p) for p in params)}."
    clauses = [c.strip() for c in _CLAUSES.split(description)]
    segments = [words] if words else []
    segments += [c for c in clauses if len(c.split()) >= 2][: MAX_SEGMENTS - len(segments)]
    # Parameter names and enum values are how a catalog says what a tool acts on ('unit: celsius').
    lexical = " ".join([words, description, *(split_identifier(p) for p in params), *_enum_values(schema)])
    return ToolText(name, document, tuple(segments) or (document,), lexical)


def _parameter_names(schema: Any) -> list[str]:
    if not isinstance(schema, dict) or not isinstance(schema.get("properties"), dict):
        return []
    return [str(p) for p in schema["properties"]][:20]


def _enum_values(schema: Any, depth: int = 0) -> list[str]:
    """The string enum values of a parameter schema, nested objects and arrays included (bounded)."""
    if not isinstance(schema, dict) or depth > 3:
        return []
    enum = schema.get("enum")
    out = [str(v) for v in enum if isinstance(v, (str, int, float))] if isinstance(enum, list) else []
    props = schema.get("properties")
    for sub in list(props.values())[:20] if isinstance(props, dict) else []:
        out += _enum_values(sub, depth + 1)
    out += _enum_values(schema.get("items"), depth + 1)
    return out[:MAX_ENUM_VALUES]


@cache_short(maxsize=100_000, max_chars=64)  # a long token (a base64 blob) is not kept
def stem(term: str) -> str:
    """A light English suffix stripper: 'flights'/'flight', 'bookings'/'booking'/'book',
    'planning'/'plan', 'images'/'image' end up the same. Not Porter; enough for tool matching."""
    for _ in range(2):  # 'bookings' → 'booking' → 'book'
        for suffix, replacement in _SUFFIXES:
            if term.endswith(suffix) and len(term) - len(suffix) >= 3 and not term.endswith(_KEEP_S):
                term = term[: -len(suffix)] + replacement
                if suffix in ("ing", "ed") and len(term) > 3 and term[-1] == term[-2] and term[-1] not in "lsz":
                    term = term[:-1]  # 'planning' → 'plann' → 'plan'
                break
        else:
            break
    return term[:-1] if term.endswith("e") and len(term) > 3 else term


_SUFFIXES = (("ies", "y"), ("ing", ""), ("ed", ""), ("es", ""), ("s", ""))
_KEEP_S = ("ss", "us", "is")  # 'class', 'status', 'analysis' are not plurals


def terms(text: str) -> list[str]:
    """Lexical terms: identifiers split, lower-cased, stop words dropped, lightly stemmed."""
    return [stem(t) for t in _TERM.findall(split_identifier(text).lower()) if t not in STOPWORDS]
