"""A memory's vector is its sentence read with the user turn it came from (writer.in_context,
config.context_weight): a narrative sentence that names nothing ("It's not the location — it's
the motivation.") is found for a request about what its turn was about; a one-sentence turn and a
long pasted text keep the sentence's own vector; the admin ranking (?q=) uses the vectors SELECT uses."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest

from ctxwarden.policies.base import Exchange
from ctxwarden.policies.memory.policy import CONTEXT_CHARS
from ctxwarden.policies.memory.writer import in_context
from tests.test_memory_policy import embedder, make  # noqa: F401 - the fixtures: a policy on a real store

REMOTE = ("You're right. I think I was wrong about remote work and working from home. "
          "It's not the location — it's the motivation.")
SENTENCE = "It's not the location — it's the motivation."
QUERY = "Should my team keep working remotely from home?"


def say(policy, text, session="s1", user="ann"):
    messages = [{"role": "user", "content": text}]
    ex = Exchange("r", "gpt-4o", messages, None, {"model": "gpt-4o", "messages": messages}, tenant="acme",
                  session_id=session, headers={"x-ctxwarden-user": user})
    assert asyncio.run(policy.on_request(ex)) is None
    return ex


def stored_vector(policy, text, user="ann"):
    index = policy.store.index("acme", user)
    (memory,) = [m for m in index.live() if m.text == text]
    return index._vectors[index.positions[memory.id]]


def unit(text, embedder):
    return np.asarray(embedder.embed([text])[0], dtype=np.float32)


def test_in_context_is_a_unit_vector_between_the_sentence_and_its_turn():
    sentence, turn = np.array([1.0, 0.0], dtype=np.float32), np.array([0.0, 1.0], dtype=np.float32)
    mixed = in_context(sentence, turn, 2.0)
    assert np.isclose(np.linalg.norm(mixed), 1.0)
    assert np.allclose(mixed, np.array([1.0, 2.0]) / np.sqrt(5))
    assert np.allclose(in_context(sentence, sentence, 2.0), sentence)  # the turn is the sentence: unchanged


def test_a_sentence_is_found_for_what_its_turn_was_about(make, embedder):
    alone = make(context_weight=0)
    say(alone, REMOTE, user="alone")
    read = make()  # the default reads it with its turn
    say(read, REMOTE, user="read")
    query = unit(QUERY, embedder)
    plain, mixed = stored_vector(alone, SENTENCE, "alone"), stored_vector(read, SENTENCE, "read")
    assert np.allclose(plain, unit(SENTENCE, embedder), atol=1e-5)  # context_weight 0: the sentence alone
    assert float(mixed @ query) > float(plain @ query) + 0.1
    assert float(mixed @ unit(REMOTE, embedder)) > float(plain @ unit(REMOTE, embedder))


def test_a_one_sentence_turn_and_a_pasted_document_keep_the_sentences_own_vector(make, embedder):
    policy = make()
    say(policy, "I prefer quality hotels over cheap ones.")
    assert np.allclose(stored_vector(policy, "I prefer quality hotels over cheap ones."),
                       unit("I prefer quality hotels over cheap ones.", embedder), atol=1e-5)
    filler = " ".join(["The committee reviewed the quarterly figures for the northern region."] * 40)
    assert len(filler) > CONTEXT_CHARS
    say(policy, f"{filler} I am allergic to peanuts.", session="s2")
    assert np.allclose(stored_vector(policy, "I am allergic to peanuts."), unit("I am allergic to peanuts.", embedder),
                       atol=1e-5)


def test_the_admin_ranking_scores_the_vectors_select_uses(make, embedder):
    policy = make()
    say(policy, REMOTE)
    say(policy, "I prefer quality hotels over cheap ones.", session="s2")
    routes = {(path, method): handler for path, method, handler in policy.admin_routes()}
    status, body = asyncio.run(routes[("/admin/memories", "GET")]({"user": "ann", "q": QUERY, "tenant": "acme"}, None))
    assert status == 200
    calibration = asyncio.run(policy.calibration())
    query = unit(QUERY, embedder)
    for row in body["data"]:
        expected = float(calibration.relevance(np.array([stored_vector(policy, row["text"]) @ query]))[0])
        assert row["score"] == pytest.approx(expected, abs=1e-3)
    order = [row["text"] for row in body["data"]]
    assert order.index(SENTENCE) < order.index("I prefer quality hotels over cheap ones.")  # read with its turn


def test_what_a_sentence_contradicts_is_found_by_the_sentence_not_by_its_turn(make):
    """A new memory is compared with its 32 nearest live memories (writer.COMPARED): nearest by what
    its sentence says, so a turn about cooking that changes the hotel preference still supersedes it,
    however many cooking memories sit closer to the turn."""
    policy = make()
    older = action_ids(say(policy, "I prefer budget hotels.", session="hotels"))[0]
    dishes = ["risotto", "lasagna", "ramen", "paella", "curry", "gnocchi", "dumplings", "tacos", "pho", "goulash",
              "moussaka", "falafel", "biryani", "ratatouille", "couscous", "tagine", "pierogi", "laksa", "bibimbap",
              "ceviche", "empanadas", "shakshuka", "carbonara", "jambalaya", "gumbo", "chili", "minestrone", "pesto",
              "focaccia", "brioche", "sourdough", "pretzels", "bagels", "crepes", "waffles", "pancakes", "scones",
              "muffins", "granola", "hummus"]
    for i, dish in enumerate(dishes):
        say(policy, f"I love cooking {dish} and homemade pasta at home on weekends with friends.", session=f"cook-{i}")
    assert len(policy.store.index("acme", "ann").live()) > 32
    ex = say(policy, "I love cooking risotto and homemade pasta at home on weekends with friends. "
                     "Actually I want luxury 5-star hotels now.", session="turn")
    superseded = [a.detail for a in ex.actions if a.policy == "memory" and a.name == "supersede"]
    assert [s["older"] for s in superseded] == [older]
    assert not policy.store.index("acme", "ann").get(older).live


def action_ids(ex):
    return next(a.detail["ids"] for a in ex.actions if a.policy == "memory" and a.name == "write")
