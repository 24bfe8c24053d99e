"""What the session's tool list keeps when it starts again (restart.py), and when a step grows it (grow_top)."""

from __future__ import annotations

import json
from types import SimpleNamespace
from typing import Any

import numpy as np

from ctxwarden.policies.tools.loadout import Loadout
from ctxwarden.policies.tools.restart import restart_list
from ctxwarden.policies.tools.selection import request_key
from tests.test_tools_policy import actions, exchange, policy, step_of, user
from tests.tools_fixtures import all_tools, names, tool

CAR = [tool(f"car__{n}", f"Vehicle control: {d}", []) for n, d in [
    ("start_engine", "start the engine of the vehicle"), ("press_brake_pedal", "press the brake pedal"),
    ("lock_doors", "lock or unlock the doors"), ("set_headlights", "turn the headlights on or off")]]
UNRELATED = ["play_music", "set_timer", "calculate", "find_restaurants", "get_sports_scores", "search_recipes"]


def test_a_restart_keeps_the_listed_tools_of_servers_in_use_ranked_with_the_steps_own():
    tools = ["a__1", "a__2", "a__3", "b__1", "b__2", "c__1"]
    index = SimpleNamespace(positions={n: i for i, n in enumerate(tools)}, groups=np.array([0, 0, 0, 1, 1, 2]))
    scores = np.array([0.1, 0.5, 0.2, 0.9, 0.8, 0.6])
    previous = ["a__1", "a__2", "a__3", "b__1", "b__2"]
    # a__1 was called: server a is in use. b's tools score higher but no call of b's was made: they go.
    assert restart_list(index, scores, ["a__1"], ["c__1"], previous, size=3) == ["a__1", "c__1", "a__2"]
    assert restart_list(index, scores, ["a__1"], ["c__1"], previous, size=9) == ["a__1", "c__1", "a__2", "a__3"]
    assert restart_list(index, scores, ["a__1", "b__1"], [], previous, size=2) == ["a__1", "b__1", "b__2"]  # >= 1 ranked


async def test_past_max_forwarded_the_listed_siblings_of_the_called_server_survive(tmp_path):
    p = policy(tmp_path, top_k=1, max_forwarded=8, restart_size=6, search_tool=False)
    tools = all_tools(40) + CAR
    ask = user("What will the weather be like in Oslo tomorrow?")
    # The list as a session left it: unrelated tools, and two of the car's it was shown (found, never called);
    # the step ranks one tool (top_k 1), so a restart to what the step needs alone would keep one of the car's at most.
    ex = exchange(step_of(ask, "car__start_engine"), tools, session="s")
    p.loadouts.put(ex.session_key, Loadout([*UNRELATED, "car__lock_doors", "car__set_headlights"], request_key(ask)))
    await p.on_request(ex)
    assert actions(ex)["list_changed"]["reason"] == "full"
    kept = names(ex.tools)
    assert {"car__start_engine", "car__lock_doors", "car__set_headlights"} <= set(kept)  # the server in use
    assert not set(UNRELATED) & set(kept) and len(kept) <= 6


async def test_a_restart_holds_at_most_restart_size_tools(tmp_path):
    for size, most in ((None, 8), (4, 4)):
        p = policy(tmp_path / str(size), top_k=6, max_forwarded=8, restart_size=size, search_tool=False)
        ask = user("What will the weather be like in Oslo tomorrow?")
        ex = exchange(step_of(ask, "car__start_engine"), all_tools(40) + CAR, session="s")
        p.loadouts.put(ex.session_key, Loadout(UNRELATED + ["car__lock_doors"], request_key(ask)))
        await p.on_request(ex)
        assert actions(ex)["list_changed"]["reason"] == "full"
        assert len(ex.tools) <= most and (size is not None or len(ex.tools) > 4)


async def test_a_step_grows_the_list_when_its_second_best_tool_is_missing(tmp_path):
    ask = user("Book a flight to Rome and a hotel room there for three nights.")
    probe = policy(tmp_path / "probe", top_k=3, twins=False)
    ex = exchange(ask, all_tools(), session="probe")
    await probe.on_request(ex)
    relevance = json.loads(actions(ex)["filter"]["relevance"])
    best, second, *_ = sorted(relevance, key=relevance.get, reverse=True)
    grown: dict[int, Any] = {}
    for top in (1, 2):
        p = policy(tmp_path / str(top), top_k=3, twins=False, grow_top=top)
        ex = exchange(ask, all_tools(), session="s")
        p.loadouts.put(ex.session_key, Loadout([best, "get_horoscope"], request_key(ask)))
        await p.on_request(ex)
        grown[top] = actions(ex).get("list_changed")
    assert grown[1] is None  # the best tool is listed: only grow_top 1 leaves the list as it is
    assert grown[2]["reason"] == "grow" and second in grown[2]["added"]
