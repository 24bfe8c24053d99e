"""The clash policy's cost is bounded (issue 41): long messages are read by their head and tail, a
time budget stops the work and says so, a client that left stops it, and what earlier turns
settled still holds when a turn is skipped."""

from __future__ import annotations

import copy

from ctxwarden.policies.base import Exchange, Services
from ctxwarden.policies.clash.policy import ClashConfig, ClashPolicy, extract
from ctxwarden.policies.text.window import analysis_windows
from tests.test_clash_resolve import RecordingMetrics, conversation

FILLER = "The build step ran and produced the usual output without anything worth noting.\n"


def exchange(messages, session: str = "s1") -> Exchange:
    return Exchange(request_id="r1", model="gpt-4o", messages=messages, tools=None,
                    body={"model": "gpt-4o", "messages": messages}, session_id=session)


def policy(**config) -> tuple[ClashPolicy, RecordingMetrics]:
    metrics = RecordingMetrics()
    return ClashPolicy(ClashConfig(**config), Services(tokens=None, metrics=metrics)), metrics  # type: ignore[arg-type]


def test_a_short_text_is_read_whole_and_a_long_one_by_head_and_tail():
    assert analysis_windows("short text", 100) == [(0, "short text")]
    text = "Head line.\n" + FILLER * 500 + "Tail line.\n"
    (h_off, head), (t_off, tail) = analysis_windows(text, 2000)
    assert h_off == 0 and text.startswith(head) and text[t_off:] == tail
    assert len(head) <= 1000 and len(tail) <= 1000 + 400 and head.endswith("\n") and tail.startswith(("The", "Tail"))


def test_statements_in_the_tail_keep_their_place_in_the_whole_text():
    text = "I'm staying in Lisbon.\n" + FILLER * 2000 + "My budget is $900 for the week.\n"
    found = extract(text, 4000)
    assert found, "the head and the tail are read"
    for st in found:
        assert text[st.vstart:st.vend] == st.display or st.display.lower() in text[st.start:st.end].lower()
    assert any(st.start > len(text) - 100 for st in found)  # the tail's statement, at its real offset
    middle = "I'm staying in Porto.\n"
    between = "I'm staying in Lisbon.\n" + FILLER * 1000 + middle + FILLER * 1000
    assert not any("porto" in st.value for st in extract(between, 4000))  # the middle is not read


async def test_a_spent_budget_changes_nothing_and_says_so():
    clash, metrics = policy(budget_ms=0.000001)
    messages = conversation("We're 2 adults. I'm in Oslo.", "I'm in Bergen now.")
    before = copy.deepcopy(messages)
    ex = exchange(messages)
    assert await clash.on_request(ex) is None
    assert ex.messages == before
    assert [a.label for a in ex.actions] == ["clash.skipped_budget"]
    assert ex.actions[0].detail["reason"] == "time budget spent"
    assert ("ctxwarden.clash.skipped_budget", {}) in metrics.added


async def test_a_client_that_left_stops_the_work():
    clash, _ = policy(budget_ms=None)
    ex = exchange(conversation("We're 2 adults. I'm in Oslo.", "I'm in Bergen now."))
    ex.notes.cancelled.set()
    await clash.on_request(ex)
    assert [(a.label, a.detail["reason"]) for a in ex.actions] == [("clash.skipped_budget", "cancelled")]


async def test_a_note_given_on_an_earlier_turn_still_holds_when_a_later_turn_is_skipped():
    clash, _ = policy()
    turns = conversation("We're 2 adults. I'm in Oslo.", "I'm in Bergen now.")
    ex = exchange(turns)
    await clash.on_request(ex)
    noted = ex.messages
    assert "[ctxwarden note: " in noted[-1]["content"]
    clash.config.budget_ms = 0.000001  # the next turn runs out of time: the note stays, byte for byte
    later = [*turns, {"role": "assistant", "content": "Noted."}, {"role": "user", "content": "Find me a hotel."}]
    ex2 = exchange(later)
    await clash.on_request(ex2)
    assert ex2.messages[:len(noted)] == noted and ex2.messages[len(noted):] == later[len(noted):]
    assert [a.label for a in ex2.actions] == ["clash.skipped_budget", "clash.note"]


# ----------------------------------------------------------------------------- evidence (evidence.py)


async def _actions(*turns: str, **config) -> tuple[list[str], list]:
    clash, _ = policy(**config)
    ex = exchange(conversation(*turns))
    await clash.on_request(ex)
    return [a.label for a in ex.actions], ex.messages


async def test_successive_requests_to_the_assistant_are_reported_as_weak_and_left_alone():
    """Pairs only the generic readers found, in the shape real users write them (a next task, a
    next case of a series), are reported and never change the request."""
    for turns in [("Now given all that, write a Meta Title. Do not exceed 70 characters.",
                   "Now write an OG Title, limited to only 60 characters.")]:
        labels, messages = await _actions(*turns, evidence="strong")
        assert "clash.weak" in labels and "clash.note" not in labels, (turns, labels)
        assert messages == conversation(*turns)
        found, _ = await _actions(*turns, evidence="any")  # the detector does pair them
        assert "clash.note" in found, turns


async def test_a_typed_clash_and_a_short_correction_get_a_note():
    labels, messages = await _actions("I'm vegetarian, so no meat please.", "I'll have the steak tonight.")
    assert "clash.note" in labels and messages[-1]["content"].startswith("I'll have the steak tonight.\n\n[ctxwarden note:")
    labels, _ = await _actions("Book the table for 7pm on Friday.", "Sorry, I meant 8pm.")
    assert "clash.note" in labels


async def test_pasted_material_is_not_the_users_word():
    case = "Case #{0}: In early 2020 the company planned to use a plant and {1} workers to make ventilators. " * 8
    labels, messages = await _actions(case.format(2, 500), case.format(3, 800))
    assert "clash.note" not in labels and messages == conversation(case.format(2, 500), case.format(3, 800))
