"""Per-definition facts, computed once per distinct tool (keyed like the catalog, by the hash of
its JSON): its texts, its lexical terms and its token cost per model. A request with a new mix
of known tools then costs one hash and a few lookups per tool instead of regexes and tiktoken."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from ..cache import LRU, stable_hash
from ..messages import Tool, held_bytes
from .ranking import LexicalDoc
from .text import ToolText, describe_tool


@dataclass
class ToolFacts:
    key: str
    text: ToolText
    lexical: LexicalDoc
    tokens: dict[str, int] = field(default_factory=dict)  # model → tokens of the definition
    held: int = 0  # bytes its texts and term counts hold (`_facts_size`), computed once

    @property
    def nbytes(self) -> int:
        return self.held + 100 * len(self.tokens)

    def token_count(self, model: str, count: Callable[[str], int]) -> int:
        n = self.tokens.get(model)
        if n is None:
            n = self.tokens[model] = count(model)
        return n


# A definition's facts: ~2-10 KB (a 64-KB tool name: ~400 KB). The share must hold a real MCP catalog's
# (525 tools: ~2.2 MB): at 8 MB (2.1 MB at the default budget) a new tool set's index, scanning the
# catalog in the same order, missed every tool and rebuilt all 525 facts (~57 ms) for one added tool.
FACTS_BYTES = 16 * 2**20


def _facts_size(key: str, text: ToolText, lexical: LexicalDoc) -> int:
    """Its texts as CPython stores them (the lexical copy too) and its term counts. Counted in
    characters and 80 bytes a term, the cache held ~2.9x its bound (fuzzed tools)."""
    return 600 + held_bytes((key, text.name, text.document, text.segments, text.lexical, lexical.counts))


class FactsCache:
    def __init__(self, max_entries: int = 20_000, max_bytes: int = FACTS_BYTES) -> None:
        self._items: LRU[str, ToolFacts] = LRU(max_entries, max_bytes=max_bytes, sizeof=lambda _, facts: facts.nbytes)

    def facts(self, tools: list[Tool]) -> list[ToolFacts]:
        out, made = [], []
        for tool in tools:
            key = stable_hash(tool)
            hit = self._items.get(key)
            if hit is None:
                text = describe_tool(tool)
                lexical = LexicalDoc.of(text)
                hit = ToolFacts(key, text, lexical, held=_facts_size(key, text, lexical))
                made.append(hit)
            out.append(hit)
        # New facts that would take more than the whole share are not kept (LRU.fits): a real catalog's
        # do fit (525 tools: ~2.2 MB), a thousand fuzzed tools' would evict every other tool set's.
        if self._items.fits(sum(f.nbytes for f in made)):
            for facts in made:
                self._items.put(facts.key, facts)
        return out
