"""A real MCP catalog under the default cache budget: its index is built once, not at every step.

With `server.cache_mb` at its default (128), each byte-bounded cache gets a share of it. The index of
LiveMCPBench's 525 tools (2,428 vectors of 256 floats, its lexical postings and the tools' facts)
counts ~6.5 MB (it was counted as ~4.8 MB, the facts at 2 KB a tool); its share was 4.7 MB, so the
LRU refused it and every request rebuilt it, reading each tool's vectors back from the catalog (or Chroma): selection went from ~2 ms to ~200 ms a request on that catalog."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ctxwarden.policies.cache import NOMINAL_CACHE_BYTES, set_cache_budget
from ctxwarden.policies.tools.policy import ToolsPolicy
from ctxwarden.proxy.config import ServerConfig
from tests.test_tools_policy import _WORDLLAMA, exchange, policy, user
from tests.tools_fixtures import CountingEmbedder

CATALOG = Path(__file__).resolve().parents[1] / "bench" / "data" / "mcp_catalog" / "catalog.json"


def mcp_tools() -> list[dict[str, Any]]:
    """The catalog as a client sends it, parsed afresh (as each request's body is)."""
    servers = json.loads(CATALOG.read_text())["servers"]
    return [{"type": "function", "function": {"name": t["call_name"], "description": t.get("description", ""),
                                              "parameters": t.get("input_schema") or {"type": "object", "properties": {}}}}
            for s in servers for t in s["tools"]]


def default_budget() -> None:
    set_cache_budget(int(ServerConfig().cache_mb * 2**20))  # what `create_app` does for a default server


def counting_catalog(p: ToolsPolicy) -> list[int]:
    """Each call of the catalog (what building an index reads), by the number of tools asked for."""
    calls: list[int] = []
    inner = p.catalog.vectors

    def vectors(keys, *args, **kwargs):
        calls.append(len(keys))
        return inner(keys, *args, **kwargs)

    p.catalog.vectors = vectors  # type: ignore[method-assign]
    return calls


async def test_the_index_of_a_525_tool_mcp_catalog_is_kept_between_steps_under_the_default_budget(tmp_path):
    default_budget()
    tools = mcp_tools()
    assert len(tools) == 525
    p = policy(tmp_path, store=None, budget_ms=None)
    calls = counting_catalog(p)
    await p.on_request(exchange(user("Plot the price history of AAPL for the last month"), tools, session="a"))
    built = sum(calls)
    assert built == 525  # the first step builds it
    for text in ["Now fetch the latest news about Apple", "Write the summary to report.md"]:
        ex = exchange(user(text), mcp_tools(), session="a")
        await p.on_request(ex)
        assert len(ex.tools) < len(tools)  # selected (the index was usable)
    assert sum(calls) == built, "a later step rebuilt the catalog's index"


async def test_two_tenants_on_one_mcp_catalog_each_keep_their_index_under_the_default_budget(tmp_path):
    """Each tenant has its own index of the catalog (its vectors may differ); alternating steps of two
    tenants must not evict each other's: an LRU scanned in turn by two entries it cannot both hold
    never hits, and every step of both would rebuild 525 tools."""
    default_budget()
    p = policy(tmp_path, store=None, budget_ms=None)
    calls = counting_catalog(p)
    for text in ["Plot the price history of AAPL", "Now fetch the latest news about Apple", "Write the summary"]:
        for tenant in ("acme", "globex"):
            ex = exchange(user(text), mcp_tools(), session=tenant)
            ex.tenant = tenant
            await p.on_request(ex)
            assert len(ex.tools) < 525
    assert sum(calls) == 2 * 525, "a later step rebuilt a tenant's index"


async def test_a_catalog_that_gains_one_tool_embeds_only_that_tool_under_the_default_budget(tmp_path):
    default_budget()
    tools = mcp_tools()
    embedder = CountingEmbedder(_WORDLLAMA)
    p = policy(tmp_path, embedder=embedder, store=None, budget_ms=None)
    await p.on_request(exchange(user("Plot the price history of AAPL"), tools))
    first = sum(map(len, embedder.calls))
    added = {"type": "function", "function": {"name": "weather__forecast", "description": "Forecast for a city",
                                              "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}
    embedder.calls.clear()
    await p.on_request(exchange(user("And the weather in Oslo?"), [*mcp_tools(), added]))
    texts = [t for call in embedder.calls for t in call]
    assert first > 1000 and 0 < len(texts) <= 10, f"{len(texts)} texts embedded again for one new tool"


async def test_a_catalog_that_gains_one_tool_reads_only_that_tool_again_under_the_default_budget(tmp_path, monkeypatch):
    """Each tool's facts (texts, terms) are kept per definition: a new tool set's index reads only the
    tools it has not seen. The facts share was smaller than this catalog's facts (~2.2 MB), so the
    index of one added tool read all 526 again (~57 ms)."""
    from ctxwarden.policies.tools import facts as facts_module

    default_budget()
    read: list[str] = []
    describe = facts_module.describe_tool
    monkeypatch.setattr(facts_module, "describe_tool", lambda tool: read.append(tool["function"]["name"]) or describe(tool))
    p = policy(tmp_path, store=None, budget_ms=None)
    await p.on_request(exchange(user("Plot the price history of AAPL"), mcp_tools()))
    assert len(read) == 525
    read.clear()
    added = {"type": "function", "function": {"name": "weather__forecast", "description": "Forecast for a city",
                                              "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}
    await p.on_request(exchange(user("And the weather in Oslo?"), [*mcp_tools(), added]))
    assert read == ["weather__forecast"]


async def test_a_catalog_bigger_than_its_share_is_said_once_with_the_setting_that_fixes_it(tmp_path, caplog):
    set_cache_budget(NOMINAL_CACHE_BYTES // 100)  # a tiny budget: the index share is ~0.5 MB, the index ~6.5 MB
    p = policy(tmp_path, store=None, budget_ms=None)
    calls = counting_catalog(p)
    with caplog.at_level("WARNING", logger="ctxwarden.tools"):
        for text in ["Plot the price history of AAPL", "Now fetch the latest news about Apple"]:
            ex = exchange(user(text), mcp_tools(), session="b")
            await p.on_request(ex)
            assert len(ex.tools) < 525  # still selected: only slower
    assert sum(calls) == 2 * 525 and len(p._indexes) == 0  # memory stays within the budget: rebuilt each time
    warnings = [r.getMessage() for r in caplog.records if "exceeds its cache share" in r.getMessage()]
    assert len(warnings) == 1 and "525-tool set" in warnings[0] and "server.cache_mb" in warnings[0]
