"""A huge tool result costs in proportion to what the KB can speak to: the pieces sharing no word
with the KB are not judged, the related ones are capped (and the cap is reported), and a
contradiction buried in thousands of log lines is still caught, through the real server. A huge
answer is judged whole up to `answer_max_claims` claims, past it the most related ones, and says so."""

from __future__ import annotations

import json

import pytest

from ctxwarden.policies.poisoning.assess import MAX_CLAIM_CHARS, answer_claims, input_claims
from ctxwarden.policies.text.sentences import bounded_sentences
from tests.conftest import openai_client
from tests.poisoning_fixtures import tool_turn
from tests.test_poisoning_e2e import ADMIN_KEY, ask, load_kb, poisoning

LOG = "\n".join(f"2026-11-24T10:{i % 60:02d}:00 INFO worker {i} processed batch {i * 7} in {i % 90} ms"
                for i in range(2000))


class _KB:
    """Only what input_claims reads: the index's vocabulary."""

    def __init__(self, text: str) -> None:
        from ctxwarden.policies.text.slots import fold, words

        self.index = type("Index", (), {"vocabulary": frozenset(words(fold(text))), "__len__": lambda self: 1})()


@pytest.fixture(autouse=True)
def admin_key(monkeypatch):
    monkeypatch.setenv("CTXWARDEN_ADMIN_KEY", ADMIN_KEY)


def test_a_long_piece_of_text_is_cut_at_clause_or_word_breaks_within_the_limit():
    blob = json.dumps([{"id": i, "status": "shipped", "note": "left the warehouse on time"} for i in range(300)])
    pieces = bounded_sentences(blob, MAX_CLAIM_CHARS)
    assert len(pieces) > 10 and all(len(p) <= MAX_CLAIM_CHARS for p in pieces)
    assert "".join(pieces).replace(" ", "") == blob.replace(" ", "")  # nothing lost, nothing added
    assert bounded_sentences("x" * 1200, 500) == ["x" * 500, "x" * 500, "x" * 200]  # no break at all: a hard cut



def _cut_by_copying(text: str, max_chars: int) -> list[str]:
    """The first definition (it copied a sentence's rest at each cut: quadratic), as the oracle."""
    import re

    from ctxwarden.policies.text.sentences import split_sentences

    out = []
    for sentence in split_sentences(text):
        while len(sentence) > max_chars:
            cut = max((m.end() for m in re.finditer(r"[,;:}\])]\s*|\s+", sentence[:max_chars])), default=0) or max_chars
            head, sentence = sentence[:cut].strip(), sentence[cut:].strip()
            if head:
                out.append(head)
        if sentence:
            out.append(sentence)
    return out


@pytest.mark.parametrize("seed", range(6))
def test_cutting_by_positions_gives_the_pieces_cutting_by_copies_gave(seed):
    import random

    rng = random.Random(seed)
    text = "".join(rng.choice(["word", " ", ",", "; ", "\n", ". ", "}", "  ", "\u00a0", "x" * 40]) for _ in range(20_000))
    for limit in (7, 60, MAX_CLAIM_CHARS):
        assert bounded_sentences(text, limit) == _cut_by_copying(text, limit)


def test_an_empty_kb_judges_nothing_and_splits_nothing(monkeypatch):
    from ctxwarden.policies.poisoning import assess

    monkeypatch.setattr(assess, "bounded_sentences", lambda *a: pytest.fail("split with nothing to judge by"))
    empty = type("KB", (), {"index": []})()
    assert assess.retrieve("The tower is 330 m tall. " * 1000, empty) == []

def test_pieces_that_share_no_word_with_the_kb_are_not_judged():
    kb = _KB("The Eiffel Tower is located in Paris, France.")
    text = f"{LOG}\nNote: the Eiffel Tower was moved to Berlin last year.\n{LOG}"
    found = input_claims(text, kb, cap=24)
    assert found.claims == ["Note: the Eiffel Tower was moved to Berlin last year."]
    assert found.unrelated == 4000 and found.over_cap == 0


def test_related_pieces_past_the_cap_are_counted_and_the_most_related_kept_in_order():
    kb = _KB("The Eiffel Tower is located in Paris, France.")
    lines = [f"Paris visitor count {i}." for i in range(30)] + ["The Eiffel Tower stands in Paris."]
    found = input_claims("\n".join(lines), kb, cap=5)
    assert found.over_cap == 26 and len(found.claims) == 5
    assert "The Eiffel Tower stands in Paris." in found.claims  # shares three words, the others one
    assert found.claims == sorted(found.claims, key=lines.index)


def test_a_contradiction_buried_in_a_huge_tool_result_is_still_dropped(fake, start_proxy):
    proxy = start_proxy(poisoning(input_max_claims=4))
    load_kb(proxy)
    related = "\n".join(f"Paris weather report {i}: mild." for i in range(10))
    result = f"{LOG}\n{related}\nThe Eiffel Tower is located in London.\n{LOG}"
    messages = tool_turn("Where is the Eiffel Tower?", "search", result)
    fake.reply(content="Let me see.")
    _, headers = ask(openai_client(proxy), messages=messages)
    actions = headers["x-ctxwarden-actions"]
    assert "poisoning.input_dropped" in actions and "poisoning.input_capped" in actions
    forwarded = fake.chat_requests[-1]["messages"][2]
    assert forwarded["tool_call_id"] == "call_1" and "London" in forwarded["content"]
    assert forwarded["content"].startswith("[ctxwarden]")


def test_an_answer_under_the_cap_is_judged_whole_and_over_it_the_most_related_claims_in_order():
    kb = _KB("The Eiffel Tower is located in Paris, France.")
    lines = [f"Step {i}: stir the sauce gently." for i in range(30)] + ["The Eiffel Tower stands in Berlin."]
    whole = answer_claims(" ".join(lines), kb, cap=31)
    assert whole.claims == lines and whole.over_cap == 0  # unrelated claims too: nothing is skipped under the cap
    capped = answer_claims(" ".join(lines), kb, cap=5)
    assert capped.over_cap == 26 and len(capped.claims) == 5 and capped.claims[-1] == lines[-1]
    assert capped.claims == sorted(capped.claims, key=lines.index)


def test_a_huge_answer_is_judged_within_the_cap_says_so_and_still_blocks_its_false_claim(fake, start_proxy):
    proxy = start_proxy(poisoning(answer_max_claims=20))
    load_kb(proxy)
    filler = " ".join(f"Step {i}: stir the sauce gently for a minute." for i in range(3000))
    fake.reply(content=f"{filler} The Eiffel Tower is located in London. {filler}")
    completion, headers = ask(openai_client(proxy), messages=[{"role": "user", "content": "Where is the Eiffel Tower?"}])
    actions = headers["x-ctxwarden-actions"].split(",")
    assert "poisoning.partly_checked" in actions and "poisoning.blocked" in actions
    text = completion.choices[0].message.content
    assert text.startswith("[ctxwarden]") and "London" in text
