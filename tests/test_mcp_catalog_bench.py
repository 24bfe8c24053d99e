"""bench/mcp_tools.py's data (bench/data/mcp_catalog, LiveMCPBench) and one replay through the real server."""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))

import mcp_tools


def test_catalog_and_tasks_load() -> None:
    catalog, servers, tasks = mcp_tools.load()
    names = [t["function"]["name"] for t in catalog]
    assert len(servers) >= 50 and len(catalog) >= 500 and len(tasks) == 95
    assert len(set(names)) == len(names)
    assert all(len(n) <= 64 and "__" in n for n in names)
    for tool in catalog:
        schema = tool["function"]["parameters"]
        assert schema["type"] == "object" and set(schema["required"]) <= set(schema["properties"])
    assert (mcp_tools.DATA / "LICENSE").read_text().split("\n", 1)[0].strip() == "Apache License"


def test_every_called_tool_is_in_the_catalog() -> None:
    catalog, _, tasks = mcp_tools.load()
    names = {t["function"]["name"] for t in catalog}
    calls = [c for task in tasks for turn in task["turns"] for c in turn["calls"]]
    assert len(calls) > 500
    assert all(c["tool"] in names for c in calls)
    assert all(isinstance(c["result"], str) and json.dumps(c["arguments"]) for c in calls)
    assert sum(len(turn["route"]) for task in tasks for turn in task["turns"]) > 200  # the agent's own queries


def test_agent_words_drop_the_labels_not_the_words() -> None:
    assert mcp_tools.agent_words("server: weather service\ntool: get forecast for a city") == \
        "weather service. get forecast for a city"
    assert mcp_tools.holds_name("please get current stock price", "yahoo-finance__get_current_stock_price")
    assert not mcp_tools.holds_name("a stock quote", "yahoo-finance__get_current_stock_price")


def test_one_task_replays_through_the_real_server() -> None:
    catalog, servers, tasks = mcp_tools.load()
    task = next(t for t in tasks if 2 <= sum(len(turn["calls"]) for turn in t["turns"]) <= 4
                and any(turn["route"] for turn in t["turns"]))
    tally = mcp_tools.run([task], catalog, len(servers), probes=True)
    calls = sum(len(turn["calls"]) for turn in task["turns"])
    assert tally.needed + tally.calls_left_out == calls
    assert tally.steps >= 2 and tally.upstream >= tally.steps and tally.searches >= 1
    # every timed request has its floor, timed right after it in the same run
    assert len(tally.floor_ms) == len(tally.selection_ms) >= 1 and all(f > 0 for f in tally.floor_ms)
    assert tally.desync == 0  # the fake model made the trajectory's calls, through the proxy
    assert 0 < max(tally.tools) < len(catalog)  # after the warm-up the selection filters the catalog
    assert tally.selection_ms and tally.user_pairs + tally.user_named >= 1
    mcp_tools.report(tally, len(servers), len(catalog), 1, 0.0)
