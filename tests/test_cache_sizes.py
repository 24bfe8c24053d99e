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
    assert _facts_size(facts.key, facts.text, facts.lexical) >= held + terms
    assert facts.nbytes >= held + terms


def test_held_bytes_counts_strings_as_stored_and_containers():
    assert held_bytes("x" * 1000) >= 1000
    assert held_bytes("\U0001F600" * 1000) >= 4000
    assert held_bytes({"a": ["b" * 500, ("c" * 500,)], "d": frozenset({"e" * 500})}) >= 1500
    assert held_bytes(12345) == 24


def test_a_tool_set_index_counts_what_it_keeps_alive():
    """The index keeps every tool's facts (texts, term counts) whatever the facts cache evicts; it was
    counted at 2 KB a tool, and two indexes of 600 tools with 2 KB descriptions of distinct words held
    41 MB where their LRU counted 12. Checked against a walk of what the index reaches (bench's probe)."""
    import random
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
    from memory_probe import deep_size

    from ctxwarden.policies.tools.ranking import ToolSetIndex

    rng = random.Random(0)
    words = [f"w{rng.randrange(10**9)}" for _ in range(40_000)]
    tools = [{"type": "function", "function": {"name": f"tool_{i}", "description": " ".join(rng.choices(words, k=300)),
                                               "parameters": {"type": "object", "properties": {}}}} for i in range(200)]
    facts = FactsCache().facts(tools)
    index = ToolSetIndex.build([f.text.name for f in facts], [f.lexical for f in facts], None)
    index.facts = facts
    assert index.nbytes >= deep_size(index, set(), limit=10**8)
