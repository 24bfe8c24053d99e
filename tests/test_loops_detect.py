"""Unit tests of the pure loop detector (policies/cycle_detect.py)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from ctxwarden.policies.loops.detect import call_key, call_label, extract_rounds, find_loop

Step = tuple[str, dict[str, Any], str]  # (tool name, arguments, result)


def convo(*steps: Step | list[Step], user: str = "Find the cheapest flight to Lisbon.", prefix: list | None = None) -> list[dict]:
    """system + user + one assistant round per step (a list of steps = parallel calls) + tool results."""
    messages: list[dict] = [{"role": "system", "content": "You are a travel agent."}, *(prefix or []),
                            {"role": "user", "content": user}]
    for n, step in enumerate(steps):
        calls = step if isinstance(step, list) else [step]
        ids = [f"call_{n}_{i}" for i in range(len(calls))]
        messages.append({"role": "assistant", "content": None, "tool_calls": [
            {"id": cid, "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}
            for cid, (name, args, _) in zip(ids, calls)
        ]})
        messages += [{"role": "tool", "tool_call_id": cid, "content": result} for cid, (_, _, result) in zip(ids, calls)]
    return messages


def A(result: str = "no flights found") -> Step:
    return ("search_flights", {"to": "LIS", "date": "2024-06-01"}, result)


def B(result: str = "PAR-LIS: 120 EUR") -> Step:
    return ("get_price", {"route": "PAR-LIS"}, result)


def C(result: str = "ok") -> Step:
    return ("check_calendar", {"day": "2024-06-01"}, result)


# ----------------------------------------------------------------------------- normalization


def test_call_key_ignores_key_order_and_whitespace():
    a = call_key("search", '{"q": "weather  in paris", "n": 3}')
    b = call_key("search", '{\n  "n": 3,\n  "q": "weather in paris "\n}')
    c = call_key("search", '{"q": "weather in rome", "n": 3}')
    assert a == b
    assert a != c
    assert call_key("search", "not json  at all") == call_key("search", "not json at all")
    assert call_label("search", '{"q": "paris", "n": 3}') == 'search(n=3, q="paris")'


def test_long_loops_keep_a_bounded_history():
    loop = find_loop(convo(*[A()] * 50))
    assert loop.repeats == 50 and len(loop.history) == 30


# ----------------------------------------------------------------------------- loops found


def test_period_1_same_call_three_times_without_new_information():
    loop = find_loop(convo(A(), A(), A()))
    assert loop is not None
    assert (loop.kind, loop.period, loop.repeats) == ("repeat", 1, 3)
    assert loop.cycle == ['search_flights(date="2024-06-01", to="LIS")']


def test_period_1_needs_max_repeats():
    assert find_loop(convo(A(), A())) is None
    assert find_loop(convo(A(), A(), A()), max_repeats=4) is None
    assert find_loop(convo(A(), A(), A(), A()), max_repeats=4).repeats == 4


def test_empty_results_count_as_no_new_information():
    loop = find_loop(convo(A("found 3 flights"), A(""), A("  ")))
    assert loop is not None and loop.kind == "repeat"


def test_period_2_cycle():
    msgs = convo(A(), B(), A(), B(), A(), B())
    loop = find_loop(msgs)
    assert (loop.kind, loop.period, loop.repeats) == ("cycle", 2, 3)
    assert [c.split("(")[0] for c in loop.cycle] == ["search_flights", "get_price"]
    assert find_loop(msgs[:-2]) is None  # A→B→A→B→A: not yet three whole repetitions


def test_period_3_cycle():
    loop = find_loop(convo(A(), B(), C(), A(), B(), C(), A(), B(), C()))
    assert (loop.kind, loop.period, loop.repeats) == ("cycle", 3, 3)


@pytest.mark.parametrize("period", [4, 5, 6])
def test_longer_periods_up_to_the_bound(period):
    steps = [("step", {"n": i}, f"result {i}") for i in range(period)]
    loop = find_loop(convo(*(steps * 3)), max_period=6)
    assert (loop.kind, loop.period) == ("cycle", period)
    assert find_loop(convo(*(steps * 3)), max_period=period - 1) is None  # beyond the configured bound


def test_cycle_signature_is_the_same_one_round_later():
    first = find_loop(convo(A(), B(), A(), B(), A(), B()))
    later = find_loop(convo(A(), B(), A(), B(), A(), B(), A()))
    assert first.signature == later.signature


def test_parallel_calls_form_one_round_regardless_of_order():
    loop = find_loop(convo([A(), B()], [B(), A()], [A(), B()]))
    assert loop is not None and loop.kind == "repeat"


def test_too_many_tool_rounds_since_the_last_user_message():
    steps = [("read_file", {"path": f"src/{i}.py"}, f"contents {i}") for i in range(26)]
    loop = find_loop(convo(*steps), max_tool_rounds=25)
    assert (loop.kind, loop.tool_rounds) == ("rounds", 26)
    assert find_loop(convo(*steps[:25]), max_tool_rounds=25) is None
    assert find_loop(convo(*steps), max_tool_rounds=None) is None
    assert find_loop(convo(*steps)) is None  # the count limit is off by default


def test_only_repetition_without_new_information_is_a_loop():
    same_args_new_results = [("get_status", {"job": 7}, f"progress {i}%") for i in range(0, 100, 10)]
    assert find_loop(convo(*same_args_new_results)) is None  # polling that makes progress
    same_call_new_args = [("search", {"q": "paris", "page": i}, "same page text") for i in range(10)]
    assert find_loop(convo(*same_call_new_args)) is None  # pagination
    unchanged = [("get_status", {"job": 7}, "running")] * 3
    assert find_loop(convo(*unchanged)).kind == "repeat"


def test_history_names_the_calls_that_led_to_the_loop():
    loop = find_loop(convo(C(), A(), A(), A()))
    assert loop.history[0].startswith("check_calendar(")
    assert loop.history[-1].startswith("search_flights(")


# ----------------------------------------------------------------------------- not loops


def test_same_tool_with_different_arguments_is_not_a_loop():
    pages = [("list_orders", {"page": p}, f"orders page {p}") for p in range(1, 8)]
    assert find_loop(convo(*pages)) is None


def test_retry_after_an_error_that_then_succeeds_is_not_a_loop():
    err = "error: upstream timeout"
    assert find_loop(convo(A(err), A(err), A("3 flights: 89, 120, 140 EUR"))) is None


def test_repeated_call_that_brings_new_information_is_not_a_loop():
    polls = [("job_status", {"id": 7}, f"running: {p}% done") for p in (10, 40, 80)]
    assert find_loop(convo(*polls)) is None


def test_cycle_that_brings_new_information_is_not_a_loop():
    steps = []
    for i in range(3):
        steps += [("next_page", {}, f"items {i * 10}-{i * 10 + 9}"), ("summarize", {"n": 10}, f"summary {i}")]
    assert find_loop(convo(*steps)) is None


def test_normal_eight_step_agent_run():
    steps = [
        ("search_flights", {"to": "LIS", "date": "2024-06-01"}, "error: rate limited"),
        ("search_flights", {"to": "LIS", "date": "2024-06-01"}, "3 flights: AF12 89 EUR, TP44 120 EUR, U2 140 EUR"),
        ("get_flight", {"id": "AF12"}, "AF12 dep 07:10 arr 08:55, 1 bag"),
        ("get_flight", {"id": "TP44"}, "TP44 dep 09:00 arr 10:40, 2 bags"),
        ("check_calendar", {"day": "2024-06-01"}, "free after 06:00"),
        ("get_weather", {"city": "Lisbon", "date": "2024-06-01"}, "sunny, 26C"),
        ("book_flight", {"id": "AF12", "passenger": "Ana"}, "booking pending"),
        ("booking_status", {"ref": "BK-19"}, "confirmed"),
    ]
    assert find_loop(convo(*steps)) is None


def test_only_the_turn_since_the_last_user_message_counts():
    earlier = convo(A(), A())[1:]  # an earlier turn that repeated A twice (system dropped)
    earlier.append({"role": "assistant", "content": "No flights on that date."})
    msgs = convo(A(), user="Try again for June 1st.", prefix=earlier)
    assert len(extract_rounds(msgs)) == 1
    assert find_loop(msgs) is None


def test_repetition_earlier_in_the_turn_that_was_broken_out_of_is_not_current():
    assert find_loop(convo(A(), A(), A("found: TP44"), B(), C())) is None


def test_conversation_without_tool_calls():
    msgs = [{"role": "system", "content": "s"}, {"role": "user", "content": "hi"}]
    assert find_loop(msgs) is None
    assert find_loop(msgs + [{"role": "assistant", "content": "hello"}] * 3) is None  # chatter is not an agent loop


def test_a_call_id_reused_every_round_does_not_hide_progress():
    """Some clients number calls per round ("call_0" each time): each round's result is its own."""
    msgs = convo(*[("get_status", {"job": 7}, f"progress {p}%") for p in (10, 20, 30, 40)])
    for m in msgs:
        for call in m.get("tool_calls") or []:
            call["id"] = "call_0"
        if m["role"] == "tool":
            m["tool_call_id"] = "call_0"
    assert [r.result(0) for r in extract_rounds(msgs)] == ["progress 10%", "progress 20%", "progress 30%", "progress 40%"]
    assert find_loop(msgs) is None
    for m in msgs:  # the same with no results changing: still a loop
        if m["role"] == "tool":
            m["content"] = "running"
    assert find_loop(msgs).kind == "repeat"


def test_parallel_calls_without_ids_take_their_results_in_order():
    msgs = convo([("read", {"f": "a"}, "A"), ("read", {"f": "b"}, "B")])
    for m in msgs:
        for call in m.get("tool_calls") or []:
            call["id"] = ""
        if m["role"] == "tool":
            m["tool_call_id"] = ""
    (round_,) = extract_rounds(msgs)
    assert [round_.result(0), round_.result(1)] == ["A", "B"]
