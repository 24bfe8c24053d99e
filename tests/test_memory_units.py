"""Unit tests of the memory policy's parts: extraction, calibration, selection, supersede, the index,
hints, the injected block, the judge's JSON and the per-session state's codec. Sentences are
phrased unlike the benchmark's (bench/data/memories)."""

from __future__ import annotations

import json
import time

import numpy as np
import pytest

from ctxwarden.policies.base import Exchange
from ctxwarden.policies.memory import background
from ctxwarden.policies.memory.background import background_requests, background_z
from ctxwarden.policies.memory.calibrate import Calibration, fit
from ctxwarden.policies.memory.config import MemoryConfig
from ctxwarden.policies.memory.extract import candidates
from ctxwarden.policies.memory.hints import HintError, Owner, owner_of
from ctxwarden.policies.memory.index import UserIndex
from ctxwarden.policies.memory.inject import HEADER, block_text, user_message_keys, with_block
from ctxwarden.policies.memory.llm_extract import LLMExtractError, parse
from ctxwarden.policies.memory.model import Memory
from ctxwarden.policies.memory.select import select
from ctxwarden.policies.memory.session import Given, SessionState, decode, encode
from ctxwarden.policies.memory.supersede import compare
from ctxwarden.policies.state import SessionLRU

# ----------------------------------------------------------------------------- extract


@pytest.mark.parametrize("text, kind", [
    ("Please never schedule anything on Sundays.", "constraint"),
    ("Answer in German from now on.", "instruction"),
    ("My wife is called Ana.", "fact"),
    ("My budget is 80 euros a day.", "constraint"),
    ("I only eat halal food.", "preference"),
])
def test_lasting_statements_are_memories_of_their_kind(text, kind):
    assert [c.kind for c in candidates(text)] == [kind]


@pytest.mark.parametrize("text", [
    "Could you book a table for tonight?",  # a question / request now
    "If I were rich I would fly first class.",  # hypothetical
    "I used to live in Paris.",  # the past
    "We are going to Rome next week.",  # a plan
    "Book me a taxi to the airport at 6 am tomorrow.",  # a request with its own specifics
    "Do you like cats?",
    "I flew to Madrid on Tuesday.",  # one dated occasion
])
def test_passing_remarks_are_not_memories(text):
    assert candidates(text) == []


def test_only_the_lasting_sentence_of_a_turn_is_kept():
    found = candidates("Thanks for the list! I never eat pork. What about the second option?")
    assert [c.text for c in found] == ["I never eat pork."]


@pytest.mark.parametrize("text", [
    "Avoid long layovers.",
    pytest.param("honestly i cant stand loud bars",
                 marks=pytest.mark.xfail(reason="the extractor misses refusals said in lower-case slang", strict=True)),
])
def test_refusals_in_other_phrasings(text):
    assert candidates(text)


@pytest.mark.parametrize("text", [
    "Do not use emojis in your replies.", "Don't recommend chain restaurants.", "No meat, no dairy, no eggs.",
    "Can't stand loud bars.",
])
def test_a_refusal_that_opens_with_its_negation_is_a_memory(text):
    assert [c.kind for c in candidates(text)] == ["constraint"]


@pytest.mark.parametrize("text", [  # pasted prose and code (ShareGPT first messages) that only holds a negation
    "He immobilizes his body to avoid experiencing feelings in it.",
    "Third, the variables used as axes don't have to be either quantitative or continuous;",
    "with torch.no\\_grad():",  # as ShareGPT escapes it
    "- Helps build a more realistic image of the customer, avoiding the fantasy of being the customer.",
])
def test_prose_that_only_holds_a_negation_is_no_memory(text):
    assert candidates(text) == []


# ----------------------------------------------------------------------------- calibrate


class FakeEmbedder:
    """Related texts share a topic word's direction; anything else is noise."""

    name, dim = "fake", 32

    def embed(self, texts):
        out = []
        for text in texts:
            v = np.random.default_rng(abs(hash(text)) % 2**32).standard_normal(self.dim)
            out.append((v / np.linalg.norm(v)).tolist())
        return out


def test_calibration_is_monotone_and_inverts():
    cal = Calibration(slope=12.0, intercept=-4.0)
    r = cal.relevance(np.array([0.0, 0.3, 0.6]))
    assert r[0] < r[1] < r[2] and 0 < r[0] and r[2] < 1
    assert cal.relevance(np.array([cal.cosine_for(0.7)]))[0] == pytest.approx(0.7)


def test_a_fit_on_an_embedder_that_knows_nothing_gives_no_high_relevance():
    cal = fit(FakeEmbedder())  # random vectors: related and unrelated pairs look alike
    assert cal.relevance(np.array([0.2]))[0] < 0.7


# ----------------------------------------------------------------------------- index and select


def memory(mid, text, kind="preference", task="", scope="private", age_s=2 * 86400.0, **kw):
    return Memory(id=mid, text=text, kind=kind, scope=scope, user="u", task=task, created_at=time.time() - age_s, **kw)


def unit(*xs):
    v = np.array(xs, dtype=np.float32)
    return v / np.linalg.norm(v)


def test_index_put_replace_remove_and_similarities():
    index = UserIndex(2)
    for i in range(20):
        index.put(memory(f"m{i}", f"t{i}"), unit(1, i))
    index.put(memory("m3", "again"), unit(0, 1))  # same id: replaced, not added
    assert len(index) == 20 and index.get("m3").text == "again"
    assert index.remove("m0").id == "m0" and index.remove("m0") is None
    sims, live = index.similarities(unit(0, 1))
    assert len(sims) == 19 and live.all()
    assert sims[index.positions["m3"]] == pytest.approx(1.0)
    index.update(memory("m5", "t5", superseded_by="m6"))
    assert "m5" not in {m.id for m in index.live()}


CAL = Calibration(slope=10.0, intercept=-5.0)  # relevance 0.5 at cosine 0.5


def chosen(index, query, task="", **cfg):
    return [s.memory.id for s in select(index, query, task, MemoryConfig(**cfg), CAL, lambda t: len(t.split()))]


def test_select_keeps_relevant_visible_live_memories_only():
    index = UserIndex(2)
    index.put(memory("near", "near", task="a"), unit(1, 0.05))
    index.put(memory("far", "far"), unit(0, 1))
    index.put(memory("other_task", "x", task="b"), unit(1, 0.05))
    index.put(memory("shared", "y", task="b", scope="shared"), unit(1, 0.1))
    index.put(memory("old", "z", superseded_by="near"), unit(1, 0))
    assert chosen(index, unit(1, 0), task="a") == ["near", "shared"]


def test_select_bonuses_budget_and_top_k():
    index = UserIndex(2)
    index.put(memory("plain", "b"), unit(1, 1.7))  # cosine 0.51, relevance 0.52: needs both bonuses (0.25)
    index.put(memory("old_rule", "r", kind="constraint"), unit(1, 1.7))  # + 0.15 only
    index.put(memory("new_pref", "p", age_s=10), unit(1, 1.7))  # + 0.1 only
    assert chosen(index, unit(1, 0), profile_bonus=0.15, recent_bonus=0.1) == []
    index.put(memory("new_rule", "r", kind="constraint", age_s=10), unit(1, 1.7))
    assert chosen(index, unit(1, 0), profile_bonus=0.15, recent_bonus=0.1) == ["new_rule"]
    assert chosen(index, unit(1, 0)) == []  # the defaults: no kind and no age scores more
    assert chosen(index, unit(1, 0), profile_bonus=0.25) == ["old_rule", "new_rule"]
    many = UserIndex(2)
    for i in range(8):
        many.put(memory(f"m{i}", "word " * 20), unit(1, 0.01 * i))
    assert len(chosen(many, unit(1, 0), top_k=3)) == 3
    assert len(chosen(many, unit(1, 0), max_tokens=50)) == 2  # 2 + 21 + 21 words


def test_select_injects_only_a_memory_that_stands_out_from_the_users_others():
    rng = np.random.default_rng(3)
    index = UserIndex(16)
    for i in range(200):  # a user with many memories, none about the request
        index.put(memory(f"m{i}", f"t{i}"), rng.standard_normal(16).astype(np.float32) / 4)
    query = unit(*([1.0] + [0.0] * 15))
    ids = lambda: [s.memory.id for s in select(index, query, "", MemoryConfig(min_score=0.0, min_distinct=0.5), CAL,
                                               lambda t: 1)]
    assert ids() == []  # the nearest of 200 by chance is no match
    held: dict[str, int] = {}
    select(index, query, "", MemoryConfig(min_score=0.0, min_distinct=0.5), CAL, lambda t: 1, held=held)
    assert held["distinct"] == 200 and held["background"] == 0  # all relevant enough for min_score 0: all held
    assert len(select(index, query, "", MemoryConfig(min_score=0.0, min_distinct=-10, margin=1), CAL,
                      lambda t: 1)) == 5  # without the gate: the five nearest
    index.put(memory("on_topic", "t"), unit(*([1.0, 0.2] + [0.0] * 14)))
    assert ids() == ["on_topic"]


def ordinary_requests(n=200, seed=5):
    """Background requests: half about x, half about y, none about z (unit vectors with some spread)."""
    rng = np.random.default_rng(seed)
    axes = np.array([[1, 0, 0], [0, 1, 0]] * (n // 2), dtype=np.float32)
    rows = axes + rng.normal(0, 0.2, (n, 3)).astype(np.float32)
    return rows / np.linalg.norm(rows, axis=1, keepdims=True)


def test_background_z_marks_down_a_memory_that_every_ordinary_request_comes_close_to():
    background = ordinary_requests()
    hub, specific = unit(1, 0, 0), unit(0, 0, 1)
    z = background_z(np.stack([hub, specific]), np.array([0.7, 0.7], dtype=np.float32), background)
    assert z[1] > 3 and z[0] < 1  # the same cosine: unusual for the memory on z, ordinary for the one on x


def test_select_leaves_out_a_memory_as_close_to_ordinary_requests_as_to_this_one():
    index = UserIndex(3)
    index.put(memory("hub", "I have experience dealing with the public."), unit(1, 0, 0))
    index.put(memory("specific", "I prefer budget hotels."), unit(0, 0, 1))
    query = unit(1, 0, 1)  # cosine 0.71 with both: relevance 0.89 each, a new user (no distinct gate)
    gated = Calibration(slope=10.0, intercept=-5.0, background=ordinary_requests())
    pick = lambda cal, **cfg: [s.memory.id for s in select(index, query, "", MemoryConfig(**cfg), cal, lambda t: 1)]
    assert pick(gated) == ["specific"]
    held: dict[str, int] = {}
    select(index, query, "", MemoryConfig(), gated, lambda t: 1, held=held)
    assert held == {"distinct": 0, "background": 1}  # a new user: no distinct gate yet; the hub held back
    assert sorted(pick(gated, min_background_z=-10)) == ["hub", "specific"]  # the gate off
    assert sorted(pick(CAL)) == ["hub", "specific"]  # a calibration without a background: no gate


def test_the_shipped_background_is_ordinary_requests_embedded_once_with_the_calibration():
    requests = background_requests()
    assert len(requests) == 500 and not any(r.startswith("#") for r in requests)
    cal = fit(FakeEmbedder())
    assert cal.background.shape == (500, FakeEmbedder.dim)
    assert np.allclose(np.linalg.norm(cal.background, axis=1), 1.0, atol=1e-5)


def test_a_write_is_compared_with_the_nearest_live_memories_the_task_sees():
    index = UserIndex(2)
    for i in range(100):
        index.put(memory(f"m{i}", f"t{i}", age_s=1000.0 - i), unit(1, 0.1 * i))
    index.put(memory("other_task", "x", task="b"), unit(0, 1))
    index.put(memory("gone", "y", superseded_by="m1"), unit(0, 1))
    near = index.nearest_live(unit(0, 1), "", 3)
    assert [m.id for m in near] == ["m97", "m98", "m99"]  # the closest three, oldest first
    assert "other_task" in [m.id for m in index.nearest_live(unit(0, 1), "b", 3)]


# ----------------------------------------------------------------------------- supersede


def remembered(mid, text):
    c = candidates(text)[0]
    return memory(mid, text, kind=c.kind, slots=c.slots)


def test_a_change_of_diet_contradicts_and_a_restatement_duplicates():
    live = [remembered("cheap", "I like cheap motels when travelling."), remembered("veg", "I am vegetarian.")]
    assert [m.id for m in compare(candidates("I eat meat now.")[0].statements, live).contradicted] == ["veg"]
    dup = compare(candidates("I am a vegetarian.")[0].statements, live)
    assert dup.duplicate_of.id == "veg" and not dup.contradicted
    upgrade = compare(candidates("Actually I want luxury hotels now.")[0].statements, live)
    assert [m.id for m in upgrade.contradicted] == ["cheap"]
    assert compare(candidates("My sister lives in Oslo.")[0].statements, live).contradicted == []


# ----------------------------------------------------------------------------- hints


def ex(headers=None, **body):
    return Exchange("r", "gpt-4o", [], None, body, tenant="acme", headers=headers or {})


def test_owner_from_headers_or_the_user_field():
    assert owner_of(ex(user="bob")) == Owner("acme", "bob")
    got = owner_of(ex({"x-ctxwarden-user": "ann", "x-ctxwarden-task": "trip", "x-ctxwarden-scope": "Shared "}, user="bob"))
    assert got == Owner("acme", "ann", "trip", "shared")
    assert owner_of(ex()) is None and owner_of(ex(user=42)) is None
    assert owner_of(ex({"x-ctxwarden-memory": " OFF"}, user="bob")) is None


@pytest.mark.parametrize("headers, param", [
    ({"x-ctxwarden-memory": "sometimes"}, "x-ctxwarden-memory"),
    ({"x-ctxwarden-scope": "public"}, "x-ctxwarden-scope"),
    ({"x-ctxwarden-user": "a" * 300}, "x-ctxwarden-user"),
    ({"x-ctxwarden-task": "bad\ttask"}, "x-ctxwarden-task"),
])
def test_bad_hints_name_their_header(headers, param):
    with pytest.raises(HintError) as err:
        owner_of(ex(headers, user="bob"))
    assert err.value.param == param


# ----------------------------------------------------------------------------- inject


def test_the_block_goes_first_in_string_and_list_content():
    block = block_text(["Likes  window\nseats", "Vegan"])
    assert block == f"{HEADER}\n- Likes window seats\n- Vegan"
    assert with_block({"role": "user", "content": "hi"}, block)["content"] == f"{block}\n\nhi"
    parts = [{"type": "image_url", "image_url": {"url": "data:,"}}, {"type": "text", "text": "what is this?"}]
    assert with_block({"role": "user", "content": parts}, block)["content"] == [{"type": "text", "text": block}, *parts]


def test_user_message_keys_tell_repeats_apart():
    msgs = [{"role": "system", "content": "s"}, {"role": "user", "content": "again"}, {"role": "assistant", "content": "ok"},
            {"role": "user", "content": "again"}]
    keys = user_message_keys(msgs)
    assert sorted(keys) == [1, 3] and keys[1] != keys[3] and keys[1].split("#")[0] == keys[3].split("#")[0]


# ----------------------------------------------------------------------------- llm_extract


def test_the_judges_json_is_read_strictly():
    got = parse('{"memories": [{"text": " I  avoid dairy. ", "kind": "constraint"}, {"text": "", "kind": "fact"}]}')
    assert [(c.text, c.kind) for c in got] == [("I avoid dairy.", "constraint")]
    assert parse('{"memories": []}') == []
    for bad in ("Sure! Here you go", '{"items": []}', '{"memories": [{"text": "x", "kind": "wish"}]}',
                '{"memories": ["x"]}', "[1, 2]"):
        with pytest.raises(LLMExtractError):
            parse(bad)


# ----------------------------------------------------------------------------- session state


def test_session_state_survives_the_trip_through_a_document():
    state = SessionState()
    a = state.of(Owner("acme", "ann", "trip", "private"))
    a.mark_written("k1#0")
    a.give("k1#0", Given(f"{HEADER}\n- Vegan", ("mem_1",)))
    a.give("k2#0", Given())
    state.of(Owner("acme", "bob")).mark_written("k9#0")
    back = decode(json.loads(json.dumps(encode(state))))
    assert back == state

    lru = SessionLRU(10, 60, encode=encode, decode=decode)
    lru.put(("acme", "s1"), state)
    other = SessionLRU(10, 60, encode=encode, decode=decode)
    other.hydrate(("acme", "s1"), lru.export(("acme", "s1")))
    assert other.get(("acme", "s1")) == state


def test_blocks_naming_a_deleted_memory_are_dropped_and_others_put_back():
    state = SessionState()
    own = state.of(Owner(None, "ann"))
    own.give("a#0", Given(f"{HEADER}\n- Vegan", ("mem_1",)))
    own.give("b#0", Given(f"{HEADER}\n- Gone", ("mem_2",)))
    msgs = [{"role": "user", "content": "first"}, {"role": "user", "content": "second"}]
    assert own.apply(msgs, {0: "a#0", 1: "b#0"})[0]["content"].startswith(HEADER)
    assert own.drop_missing(lambda mid: mid == "mem_1") == 1
    assert list(own.blocks) == ["a#0"]
    assert own.apply(msgs, {0: "x#0"}) is None


def test_without_the_background_file_memory_selects_without_that_gate_and_says_so(monkeypatch, tmp_path, caplog):
    monkeypatch.setattr(background, "BACKGROUND_FILE", tmp_path / "missing.txt")
    background.background_requests.cache_clear()
    try:
        with caplog.at_level("ERROR"):
            cal = fit(FakeEmbedder())
    finally:
        background.background_requests.cache_clear()
    assert cal.background is None and "min_background_z is not applied" in caplog.text
    assert cal.relevance(np.array([0.9]))[0] > 0  # the calibration itself stands
