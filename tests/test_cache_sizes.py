"""A cache's byte bound holds only if its entries are sized by what they keep alive: tool facts
were sized at ~1 byte a character and 80 bytes a term, and held ~2.9x their bound on fuzzed tools."""
import sys

from ctxwarden.policies.messages import held_bytes
from ctxwarden.policies.tools.facts import FactsCache, _facts_size


def test_wide_tool_text_counts_as_stored():
    description = "\U0001F600 " + " ".join(f"term{i}" for i in range(20_000))  # 4 bytes a character
    tool = {"type": "function", "function": {"name": "lookup", "description": description,
                                             "parameters": {"type": "object", "properties": {}}}}
    (facts,) = FactsCache().facts([tool])
    held = sys.getsizeof(facts.text.document) + sys.getsizeof(facts.text.lexical)
    terms = sum(sys.getsizeof(t) + sys.getsizeof(n) for t, n in facts.lexical.counts.items())
    assert _facts_size(facts.key, facts) >= held + terms


def test_held_bytes_counts_strings_as_stored_and_containers():
    assert held_bytes("x" * 1000) >= 1000
    assert held_bytes("\U0001F600" * 1000) >= 4000
    assert held_bytes({"a": ["b" * 500, ("c" * 500,)], "d": frozenset({"e" * 500})}) >= 1500
    assert held_bytes(12345) == 24
