"""A cold catalog: the request the budget ran out on goes through whole (invariant 7), and the rest of the
catalog is embedded in the background, so the next request is ranked instead of paying the next chunk."""

from __future__ import annotations

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
