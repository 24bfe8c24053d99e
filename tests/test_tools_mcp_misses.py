"""bench/mcp_tools.py --misses: each call whose tool was not available, with what its step knew."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))

import mcp_tools  # noqa: E402


def test_a_miss_says_whether_the_list_held_the_tool_before_and_what_the_step_searched():
    listed = {"find_tools", "wikipedia__search", "fetch__fetch"}
    line = mcp_tools.miss_line("abc step 3", "wikipedia__get_article", {"wikipedia__get_article"}, 2, listed)
    assert line == "abc step 3: wikipedia__get_article (listed before; 2 searches; its server in the list)"
    line = mcp_tools.miss_line("abc step 4", "airbnb__search", set(), 0, listed)
    assert line == "abc step 4: airbnb__search (never listed; 0 searches; its server not in the list)"


def test_the_report_lists_the_misses_only_when_asked(capsys):
    tally = mcp_tools.Tally(needed=2, forwarded=1, available=1, tasks=1, tasks_all=0, steps=2, tools=[5, 6],
                            catalog_tools=[4, 5], selection_ms=[1.0], floor_ms=[1.0], misses=["t step 1: a__b (…)"])
    mcp_tools.report(tally, 1, 10, 1, 0.0)
    assert "misses (1)" not in capsys.readouterr().out
    mcp_tools.report(tally, 1, 10, 1, 0.0, misses=True)
    assert "misses (1):\n  t step 1: a__b (…)" in capsys.readouterr().out
