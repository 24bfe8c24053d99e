"""How the session's list admits tools: find_tools spends its results on tools the list lacks, and a
change the conversation forces (a hidden tool called) carries this step's ranked batch with it."""

from __future__ import annotations

import json

from tests.test_tools_policy import actions, exchange, policy, step_of, user
from tests.tools_fixtures import all_tools, names, tool

TIDE = tool("get_tide_times", "Get high and low tide times for a beach.", ["beach"])


async def test_find_tools_returns_only_tools_the_list_lacks(tmp_path):
    p = policy(tmp_path, search_results=3, budget_ms=None)  # a busy host must not skip the selection (tools.budget_ms)
    tools = all_tools() + [TIDE]
    ex = exchange(user("Book a taxi to the airport this afternoon."), tools)
    await p.on_request(ex)
    before = names(ex.tools)
    assert "book_taxi" in before and "get_tide_times" not in before
    text = await ex.proxy_tools["find_tools"].handler(ex, json.dumps({"query": "book a taxi to the beach at low tide"}))
    found = actions(ex)["search"]["found"]
    # The forwarded taxi tool matches best; its slot goes to tools the model could not call yet.
    assert "book_taxi" not in found and "get_tide_times" in found
    assert len(found) == 3 and found == actions(ex)["search"]["added"] and not set(found) & set(before)
    assert all(line.endswith("[added]") for line in text.splitlines()[1:])
    assert names(ex.tools) == before + found


async def test_find_tools_with_nothing_left_to_add_says_so(tmp_path):
    p = policy(tmp_path, max_tools=3, top_k=3)
    tools = all_tools(4)
    ex = exchange(user("What will the weather be like in Oslo tomorrow?"), tools)
    await p.on_request(ex)
    search = ex.proxy_tools["find_tools"]
    await search.handler(ex, json.dumps({"query": "anything at all"}))  # adds the one hidden tool
    assert sorted(names(ex.tools)) == sorted(names(tools))
    text = await search.handler(ex, json.dumps({"query": "weather forecast"}))
    assert text.startswith("No tool matches") and actions(ex)["search"]["found"] == []


async def test_a_forced_change_admits_the_steps_ranked_batch_at_once(tmp_path):
    p = policy(tmp_path)
    convo = user("What will the weather be like in Oslo tomorrow?")
    ex = exchange(convo, all_tools())
    await p.on_request(ex)
    first = names(ex.tools)
    hidden = next(n for n in reversed(names(all_tools())) if n not in first)
    ex = exchange(step_of(convo, hidden), all_tools())  # a hidden tool the model called anyway
    await p.on_request(ex)
    change, relevance = actions(ex)["list_changed"], json.loads(actions(ex)["filter"]["relevance"])
    assert max(relevance, key=relevance.get) in first  # this step's best tool was there: no grow of its own
    # The change is paid anyway, so the step's ranked tools the list lacked join it: one change, not two.
    lacked = [n for n in names(all_tools()) if n in relevance and n not in first]
    assert change["reason"] == "called" and change["added"] == [hidden] + lacked and lacked
    assert names(ex.tools) == first + change["added"]
    ex = exchange(step_of(step_of(convo, hidden), hidden), all_tools())  # the next step: nothing new is forced
    await p.on_request(ex)
    assert "list_changed" not in actions(ex)
