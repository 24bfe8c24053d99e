"""find_tools' second reading (policies/tools/reread.py): a real agent's own search words, read again by
MiniLM, find the tool it then called, which the static embedder's ranking left out of its five.

The catalog and the queries are LiveMCPBench's (bench/data/mcp_catalog, Apache-2.0): 525 tools of 69
real MCP servers, and two `route` queries Claude Sonnet 4 searched with before calling the tool named.
"""

from __future__ import annotations

import json
import logging
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from ctxwarden.policies.base import Services
from ctxwarden.policies.text.prepared import PreparedOnce
from ctxwarden.policies.text.tokens import TiktokenCounter
from ctxwarden.policies.tools.policy import ToolsConfig, ToolsPolicy
from ctxwarden.policies.tools.reread import reread
from ctxwarden.policies.tools.search import FIND_TOOLS
from ctxwarden.proxy.config import EmbeddingsConfig, StorageConfig
from ctxwarden.proxy.embeddings import build_embedder
from ctxwarden.proxy.storage import ChromaStore
from tests.conftest import openai_client, policies_off
from tests.tools_fixtures import names

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
import mcp_tools  # noqa: E402

CATALOG, _, _ = mcp_tools.load()
# (the agent's words, as bench/mcp_tools.py's agent_words writes its route query; the tool it called next)
HOMESTAYS = ("accommodation booking platform or travel booking service. search homestays or find accommodation "
             "in Paris France for specific dates and guests", "airbnb__airbnb_search")
AI_NEWS = ("news or web browsing platform. get current AI news, latest AI developments, AI headlines today",
           "hackernews__search")
_EMBEDDERS: dict[str, Any] = {}


def named(provider: str) -> Any:
    if provider not in _EMBEDDERS:
        _EMBEDDERS[provider] = build_embedder(EmbeddingsConfig(provider=provider))
    return _EMBEDDERS[provider]


class Metrics:
    def add(self, *args: Any, **kwargs: Any) -> None: ...

    record = gauge = add


def policy(tmp_path, embedder_named: Any = named, **config: Any) -> ToolsPolicy:
    store = ChromaStore(StorageConfig(path=str(tmp_path / "store")))
    services = Services(tokens=TiktokenCounter(), metrics=Metrics(), embedder=named("wordllama"), store=store,
                        embedder_named=embedder_named)
    return ToolsPolicy(ToolsConfig(budget_ms=None, **config), services)


def found(p: ToolsPolicy, query: str) -> list[str]:
    index, _, _ = p._index(CATALOG, None)
    return [str(index.names[i]) for i in p.search(index, query, [], None, set())[0]]


def read_as(p: ToolsPolicy, query: str) -> str:
    """How the second reader took part in a search, as its action reports it."""
    index, _, _ = p._index(CATALOG, None)
    return p.search(index, query, [], None, set())[1]


# ----------------------------------------------------------------------------- units


class Table:
    """An embedder that knows a few texts' vectors."""

    name = "table"
    dim = 2

    def __init__(self, vectors: dict[str, list[float]]) -> None:
        self.vectors = vectors

    def embed(self, texts: list[str]) -> list[list[float]]:
        return [self.vectors[t] for t in texts]


def test_the_second_reading_adds_its_weight_times_the_cosine_of_query_and_definition():
    table = Table({"q": [1.0, 0.0], "near": [2.0, 0.0], "far": [0.0, 3.0], "between": [1.0, 1.0]})
    extra = reread(table, "q", ["near", "far", "between"], 2.0)
    assert np.allclose(extra, [2.0, 0.0, 2.0 / np.sqrt(2)])
    assert reread(table, "q", [], 2.0).shape == (0,)


def test_something_prepared_once_is_prepared_once_whoever_asks_and_a_failure_is_remembered():
    calls: list[int] = []

    def prepare() -> str:
        calls.append(1)
        time.sleep(0.05)
        return "ready"

    once: PreparedOnce[str] = PreparedOnce(prepare, "test-prepare")
    assert not once.ready and once.value is None
    once.start()
    once.start()
    threads = [threading.Thread(target=once.get) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert once.get() == "ready" and once.ready and calls == [1]
    failed: PreparedOnce[str] = PreparedOnce(lambda: calls.append(2), "test-prepare")  # returns None
    assert failed.get() is None and failed.get() is None and failed.ready and calls == [1, 2]


def test_a_preparation_that_raises_is_logged_once_and_remembered_as_none(caplog):
    calls: list[int] = []

    def prepare() -> str:
        calls.append(1)
        raise OSError("model file unreadable")

    once: PreparedOnce[str] = PreparedOnce(prepare, "test-raises")
    with caplog.at_level(logging.ERROR, logger="ctxwarden.policies"):
        assert once.get() is None and once.get() is None
    assert once.ready and calls == [1]
    assert len(caplog.records) == 1 and "test-raises" in caplog.records[0].getMessage()


def test_one_lazy_embedder_is_built_once_when_two_threads_ask_for_it_at_once(monkeypatch):
    from ctxwarden.proxy import services as proxy_services

    built: list[str] = []

    def slow_build(choice: Any) -> Any:
        built.append(choice.provider)
        time.sleep(0.1)
        return Table({})

    monkeypatch.setattr(proxy_services, "build_embedder", slow_build)
    main = proxy_services.LazyEmbedder(proxy_services.EmbedderChoice(provider="wordllama"))
    named_embedders = proxy_services.NamedEmbedders(proxy_services.EmbedderChoice(provider="wordllama"), main)
    got: list[Any] = []
    threads = [threading.Thread(target=lambda: got.append(named_embedders("minilm").name)) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert got == ["table"] * 4 and built == ["minilm"]


# ----------------------------------------------------------------------------- the policy, real catalog


@pytest.mark.parametrize("query, called", [HOMESTAYS, AI_NEWS])
def test_a_real_agents_search_words_find_the_tool_it_called_only_with_the_second_reading(tmp_path, query, called):
    without, with_reader = policy(tmp_path / "none", search_reader="none"), policy(tmp_path / "minilm")
    assert called not in found(without, query)
    assert called in found(with_reader, query)[:3]
    assert (read_as(without, query), read_as(with_reader, query)) == ("off", "read")


def test_without_the_second_embedder_searches_rank_as_before_and_say_so_once(tmp_path, caplog):
    def broken(provider: str) -> Any:
        raise RuntimeError("no model file")

    without = policy(tmp_path / "none", search_reader="none")
    p = policy(tmp_path / "broken", embedder_named=broken)
    with caplog.at_level(logging.ERROR, logger="ctxwarden.tools"):
        for query, _ in (HOMESTAYS, AI_NEWS):
            assert found(p, query) == found(without, query)
    assert [r.getMessage() for r in caplog.records].count(caplog.records[0].getMessage()) == 1
    assert "search_reader minilm is not available" in caplog.records[0].getMessage()


class Unloadable:
    """A lazy embedder whose model cannot be built: the failure comes when it is first used."""

    @property
    def name(self) -> str:
        raise RuntimeError("minilm: model.onnx is missing")

    def embed(self, texts: list[str]) -> list[list[float]]:
        raise RuntimeError("minilm: model.onnx is missing")


class FailsToEmbed:
    name = "flaky"
    dim = 2

    def embed(self, texts: list[str]) -> list[list[float]]:
        raise RuntimeError("onnxruntime: out of memory")


def test_a_lazy_second_embedder_that_fails_to_load_leaves_searches_as_before(tmp_path, caplog):
    without = policy(tmp_path / "none", search_reader="none")
    p = policy(tmp_path / "unloadable", embedder_named=lambda provider: Unloadable())
    with caplog.at_level(logging.ERROR, logger="ctxwarden.tools"):
        assert found(p, HOMESTAYS[0]) == found(without, HOMESTAYS[0])
        assert found(p, AI_NEWS[0]) == found(without, AI_NEWS[0])
        assert read_as(p, AI_NEWS[0]) == "off"
    assert len(caplog.records) == 1 and "not available" in caplog.records[0].getMessage()


def test_a_second_reading_that_fails_mid_search_still_answers_with_the_first_ranking(tmp_path, caplog):
    without = policy(tmp_path / "none", search_reader="none")
    p = policy(tmp_path / "flaky", embedder_named=lambda provider: FailsToEmbed())
    with caplog.at_level(logging.WARNING, logger="ctxwarden.tools"):
        assert found(p, HOMESTAYS[0]) == found(without, HOMESTAYS[0])
        assert read_as(p, HOMESTAYS[0]) == "failed"  # reported as such, not as a second reading
    assert any("second reading failed" in r.getMessage() for r in caplog.records)


def test_the_policys_own_embedder_as_the_second_one_reads_nothing_again(tmp_path):
    p = policy(tmp_path, embedder_named=lambda provider: named("wordllama"))
    assert p.search_reader.get() is None
    assert found(p, HOMESTAYS[0]) == found(policy(tmp_path / "none", search_reader="none"), HOMESTAYS[0])


# ----------------------------------------------------------------------------- through the real server


def search_once(fake, start_proxy, overrides: dict[str, Any], query: str) -> tuple[dict, Any]:
    proxy = start_proxy({"policies": {**policies_off("tools"), "tools": {"budget_ms": None, **overrides}}})
    client = openai_client(proxy)
    fake.reply(tool_calls=[{"name": FIND_TOOLS, "arguments": json.dumps({"query": query})}])
    fake.reply(content="Looking now.")
    messages = [{"role": "system", "content": mcp_tools.SYSTEM},
                {"role": "user", "content": "Find me a place to stay in Paris from 12 to 15 March for two adults."}]
    raw = client.chat.completions.with_raw_response.create(model="gpt-4o", messages=messages, tools=CATALOG)
    return fake.chat_requests[-1], raw


@pytest.mark.parametrize("reader", ["minilm", "none"])
def test_through_the_server_the_agents_search_finds_the_tool_it_needs_with_the_second_reading(fake, start_proxy, reader):
    inner, raw = search_once(fake, start_proxy, {"search_reader": reader}, HOMESTAYS[0])
    assert "tools.search" in raw.headers["x-ctxwarden-actions"].split(",")
    answer = inner["messages"][-1]
    assert answer["role"] == "tool"
    listed = [line[2:].split(":", 1)[0] for line in answer["content"].splitlines() if line.startswith("- ")]
    assert len(listed) >= 5
    if reader == "minilm":  # found, and callable in the round that answers the search
        assert HOMESTAYS[1] in listed and HOMESTAYS[1] in names(inner["tools"])
    else:
        assert HOMESTAYS[1] not in listed


EXIT_WHILE_LOADING = """
import sys, time
from ctxwarden.policies.text.prepared import PreparedOnce
from ctxwarden.proxy.config import EmbedderChoice
from ctxwarden.proxy.services import LazyEmbedder
model = LazyEmbedder(EmbedderChoice(provider="minilm"))
PreparedOnce(lambda: model.embed(["hello world"] * 8), "test-exit").start()
time.sleep(float(sys.argv[1]))
"""


@pytest.mark.parametrize("delay", [0.05, 0.1])
def test_a_process_that_exits_while_the_second_embedder_loads_exits_cleanly(tmp_path, delay):
    # With the preparing thread a daemon, `ctxwarden demo` died of SIGABRT in CI: onnxruntime was torn
    # down mid-load at exit. The process now waits for the load.
    script = tmp_path / "exit_while_loading.py"
    script.write_text(EXIT_WHILE_LOADING)
    result = subprocess.run([sys.executable, str(script), str(delay)], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0 and "terminate called" not in result.stderr, result.stderr
