"""A cold catalog: the request the budget ran out on goes through whole (invariant 7), and the rest of the
catalog is embedded in the background, so the next request is ranked instead of paying the next chunk."""

from __future__ import annotations

import subprocess
import sys
import threading
import time

from ctxwarden.policies.tools.selection import toolset_key
from tests.test_tools_policy import actions, exchange, policy, user
from tests.tools_fixtures import all_tools, names


def _settled(p, timeout_s: float = 60) -> None:
    end = time.monotonic() + timeout_s
    while p._warming and time.monotonic() < end:
        time.sleep(0.01)
    assert not p._warming


async def test_past_the_budget_the_request_goes_whole_and_the_next_one_is_ranked(tmp_path):
    p = policy(tmp_path, budget_ms=0.001)  # spent before the first chunk is embedded
    tools = all_tools()
    ex = exchange(user("Find me a flight from Madrid to Berlin next Friday."), tools)
    await p.on_request(ex)
    assert ex.tools is tools and actions(ex)["skipped_budget"]["reason"] == "time budget spent"
    _settled(p)
    nxt = exchange(user("Find me a flight from Madrid to Berlin next Friday."), tools, session="s2")
    await p.on_request(nxt)
    assert "skipped_budget" not in actions(nxt) and "search_flights" in names(nxt.tools)
    assert len(nxt.tools) < len(tools)


async def test_while_the_background_embeds_a_request_waits_for_it_no_longer_than_its_budget(tmp_path):
    p = policy(tmp_path, budget_ms=300)
    tools = all_tools()
    key = (toolset_key(tools), "")
    p._warming[key] = threading.Event()  # as if a background thread were embedding this tool set
    ex = exchange(user("Play some jazz music."), tools)
    start = time.monotonic()
    await p.on_request(ex)
    assert time.monotonic() - start < 5  # its budget, and some slack for a busy host
    assert ex.tools is tools and "background" in actions(ex)["skipped_budget"]["reason"]
    del p._warming[key]


EXIT_WHILE_EMBEDDING = """
import atexit, sys, time
from ctxwarden.policies.base import Services
from ctxwarden.policies.text.tokens import TiktokenCounter
from ctxwarden.policies.tools.policy import ToolsConfig, ToolsPolicy
from ctxwarden.proxy.config import EmbedderChoice, StorageConfig
from ctxwarden.proxy.metrics import Metrics
from ctxwarden.proxy.services import LazyEmbedder
from ctxwarden.proxy.storage import ChromaStore
model = LazyEmbedder(EmbedderChoice(provider="minilm"))  # a native library (onnxruntime) runs in the thread
model.embed(["loaded before the catalog"])
p = ToolsPolicy(ToolsConfig(), Services(tokens=TiktokenCounter(), metrics=Metrics(), embedder=model,
                                      store=ChromaStore(StorageConfig(path=sys.argv[1]))))
tools = [{"type": "function", "function": {"name": f"tool_{k}", "description": f"Does task {k}: " + "lorem ipsum " * 30,
          "parameters": {"type": "object", "properties": {"x": {"type": "string", "description": f"thing {k}"}}}}}
         for k in range(600)]
p._embed_rest(tools, None)
atexit.register(lambda: print(f"indexed={len(p._indexes)}", flush=True))  # runs once the thread has stopped
time.sleep(1)
"""


def test_a_process_that_exits_while_a_catalog_is_embedded_in_the_background_stops_it_and_exits_cleanly(tmp_path):
    # The background thread was a daemon: a process exiting while MiniLM (the tools embedder under
    # `embeddings.per_policy`) ran in it died of SIGABRT. It is not one now, and it stops at the next
    # chunk rather than holding the exit for the whole catalog (600 tools: most of a minute here).
    script = tmp_path / "exit_while_embedding.py"
    script.write_text(EXIT_WHILE_EMBEDDING)
    result = subprocess.run([sys.executable, str(script), str(tmp_path / "store")], capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 0 and "terminate called" not in result.stderr, result.stderr
    assert "indexed=0" in result.stdout  # stopped part way: the catalog keeps the chunks embedded so far
