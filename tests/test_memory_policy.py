"""The memory policy in process, on a real Chroma store and the shipped embedders: provenance,
duplicates, supersede's reason, the metrics and action details, the session TTL, and relevance
calibrated so that one threshold means the same whatever the embedder."""

from __future__ import annotations

import asyncio
import time

import numpy as np
import pytest

from ctxwarden.policies.base import Exchange, Services
from ctxwarden.policies.cache import stable_hash
from ctxwarden.policies.memory.calibrate import fit
from ctxwarden.policies.memory.config import MemoryConfig
from ctxwarden.policies.memory.policy import MemoryPolicy
from ctxwarden.policies.memory.store import MemoryStore
from ctxwarden.policies.text.tokens import TiktokenCounter
from ctxwarden.proxy.config import EmbedderChoice, StorageConfig
from ctxwarden.proxy.embeddings import build_embedder
from ctxwarden.proxy.storage import ChromaStore


class Recorder:
    def __init__(self) -> None:
        self.seen: list[tuple[str, float, dict]] = []

    def add(self, name, value, **attrs):
        self.seen.append((name, value, attrs))

    record = gauge = add

    def total(self, name: str) -> float:
        return sum(v for n, v, _ in self.seen if n == name)


@pytest.fixture(scope="module")
def embedder():
    return build_embedder(EmbedderChoice())


@pytest.fixture
def make(tmp_path, embedder):
    store = ChromaStore(StorageConfig(path=str(tmp_path / "store")))

    def build(complete=None, **cfg) -> MemoryPolicy:
        services = Services(tokens=TiktokenCounter(), metrics=Recorder(), embedder=embedder, store=store, complete=complete)
        return MemoryPolicy(MemoryConfig(**{"refresh_s": 0, **cfg}), services)
    return build


def turn(policy, text, session="s1", tenant="acme", user="ann", **hints):
    messages = [{"role": "system", "content": "You are a travel agent."}, {"role": "user", "content": text}]
    ex = Exchange("r", "gpt-4o", messages, None, {"model": "gpt-4o", "messages": messages}, tenant=tenant,
                  session_id=session, headers={"x-ctxwarden-user": user, **{k.replace("_", "-"): v for k, v in hints.items()}})
    assert asyncio.run(policy.on_request(ex)) is None
    return ex


def action(ex, name):
    return next((a.detail for a in ex.actions if a.policy == "memory" and a.name == name), None)


def test_a_memory_carries_its_provenance_and_kind_and_persists(make, embedder):
    policy = make()
    before = time.time()
    ex = turn(policy, "I prefer quality hotels over cheap ones.", session="s-42", x_ctxwarden_task="trip")
    written = action(ex, "write")
    assert written["count"] == 1 and written["kinds"] == ["preference"]
    again = MemoryStore(policy.services.store, embedder)  # a fresh process: read back from Chroma
    (memory,) = again.index("acme", "ann").live()
    assert memory.id == written["ids"][0]
    assert (memory.tenant, memory.user, memory.task, memory.scope) == ("acme", "ann", "trip", "private")
    assert memory.session == "s-42" and memory.source == "conversation"
    assert memory.message_hash == stable_hash("I prefer quality hotels over cheap ones.")
    assert before <= memory.created_at <= time.time()


def test_a_long_message_gives_memories_from_the_users_words_around_a_paste_not_from_inside_it(make):
    """Past `analysis_max_chars` (2,000) a message is read by its head and tail, ~1,000 characters each:
    the user's own framing. A pasted resume or story in the middle says "I ..." of someone else's life,
    or of a past job; at 8,000 its middle was read (ShareGPT: 572 memories from 900 first messages, 393 now)."""
    policy = make()
    paste = "\n".join(f"Line {i}: the quarterly report lists shipments, invoices and returns for region {i}." for i in range(60))
    text = ("I am vegetarian. Please review the report below.\n\n" + paste[:2000] + "\nI prefer quality hotels over cheap ones.\n"
            + paste[2000:] + "\n\nI live in Berlin.")
    assert len(text) > 4_000
    written = action(turn(policy, text), "write")
    texts = sorted(m.text for m in policy.store.index("acme", "ann").live())
    assert written["count"] == 2 and texts == ["I am vegetarian.", "I live in Berlin."]


def test_saying_it_again_merges_into_the_same_memory(make):
    policy = make()
    first = action(turn(policy, "I am vegetarian.", session="a"), "write")["ids"][0]
    created = policy.store.index("acme", "ann").get(first).created_at
    for text, session in (("I am vegetarian.", "b"), ("I'm a vegetarian.", "c")):
        ex = turn(policy, text, session=session)
        assert action(ex, "write") is None  # merged, not written
    live = policy.store.index("acme", "ann").live()
    assert [m.id for m in live] == [first]
    assert live[0].created_at == created and live[0].updated_at > created


def test_a_supersede_records_its_reason_the_action_and_the_metric(make):
    policy = make()
    older = action(turn(policy, "I prefer budget hotels.", session="a"), "write")["ids"][0]
    ex = turn(policy, "Actually I want luxury 5-star hotels now.", session="b")
    sup = action(ex, "supersede")
    newer = action(ex, "write")["ids"][0]
    assert (sup["older"], sup["newer"], sup["strategy"]) == (older, newer, "prefer_recent") and "budget" in sup["reason"]
    stored = policy.store.index("acme", "ann").get(older)
    assert stored.superseded_by == newer and stored.reason.startswith("prefer_recent")
    assert policy.services.metrics.total("ctxwarden.memory.superseded") == 1
    assert policy.services.metrics.total("ctxwarden.memory.written") == 2


def test_select_reports_its_count_and_the_metric(make):
    policy = make()
    turn(policy, "I prefer budget hotels, nothing fancy.", session="a")
    turn(policy, "Never book red-eye flights.", session="a")
    ex = turn(policy, "Find me a hotel in Rome and flights from Boston.", session="b")
    chosen = action(ex, "select")
    assert chosen is not None and chosen["count"] == len(chosen["ids"]) == len(chosen["scores"]) >= 1
    assert all(s >= 0.7 for s in chosen["scores"])
    block = ex.messages[-1]["content"].split("\n\n")[0].splitlines()
    assert block[0] == "Relevant context:" and len(block) == 1 + chosen["count"]
    assert policy.services.metrics.total("ctxwarden.memory.selected") == chosen["count"]


def test_session_state_expires_after_session_ttl_but_memories_persist(make):
    policy = make(session_ttl_s=60)
    now = [1000.0]
    policy.sessions.clock = lambda: now[0]
    turn(policy, "I prefer budget hotels, nothing fancy.", session="a")
    now[0] += 59
    assert policy.sessions.get(("acme", "a")) is not None  # used again: kept another 60 s
    now[0] += 61
    assert policy.sessions.get(("acme", "a")) is None
    assert [m.text for m in policy.store.index("acme", "ann").live()] == ["I prefer budget hotels, nothing fancy."]


RELATED = [("Find me a hotel in Rome for three nights.", "I prefer budget hotels, nothing fancy."),
           ("Search flights from Boston to Denver.", "Never book red-eye flights.")]
UNRELATED = [("Write a haiku about autumn leaves.", "I prefer budget hotels, nothing fancy."),
             ("Write a haiku about autumn leaves.", "I am allergic to shellfish."),
             ("Fix this Python stack trace.", "Never book red-eye flights."),
             ("Fix this Python stack trace.", "I prefer boutique hotels near the old town.")]


@pytest.mark.parametrize("provider", ["wordllama", "minilm"])
def test_min_score_means_the_same_for_every_shipped_embedder(provider):
    embedder = build_embedder(EmbedderChoice(provider=provider))
    calibration = fit(embedder)

    def cosines(pairs):
        out = []
        for query, memory in pairs:
            v = np.asarray(embedder.embed([query, memory]), dtype=np.float32)
            out.append(float(v[0] @ v[1]))
        return np.array(out)

    related, unrelated = cosines(RELATED), cosines(UNRELATED)
    assert (related < 0.7).all()  # raw cosine: a 0.7 threshold would select nothing
    assert (calibration.relevance(related) >= 0.7).all()
    assert (calibration.relevance(unrelated) < 0.5).all()


def agent_turn(policy, tool_text, session="s1", call="call_1"):
    messages = [{"role": "user", "content": "Look up my profile and plan dinner."},
                {"role": "assistant", "content": None, "tool_calls": [
                    {"id": call, "type": "function", "function": {"name": "profile", "arguments": "{}"}}]},
                {"role": "tool", "tool_call_id": call, "content": tool_text}]
    ex = Exchange("r", "gpt-4o", messages, None, {"model": "gpt-4o", "messages": messages}, tenant="acme",
                  session_id=session, headers={"x-ctxwarden-user": "ann"})
    assert asyncio.run(policy.on_request(ex)) is None
    return ex


PROFILE = "Profile notes: I am vegetarian. Always answer in French. Never book red-eye flights."


def test_tool_results_are_read_only_when_enabled_and_only_for_the_allowed_kinds(make):
    assert action(agent_turn(make(), PROFILE), "write") is None  # off by default
    policy = make(tool_results=True)
    ex = agent_turn(policy, PROFILE)
    written = action(ex, "write")
    assert written is not None and set(written["kinds"]) <= {"fact", "preference"}
    (memory,) = policy.store.index("acme", "ann").live()
    assert "vegetarian" in memory.text and memory.source == "tool" and memory.session == "s1"
    assert action(agent_turn(policy, PROFILE), "write") is None  # the same result again: read once per session
    everything = make(tool_results=True, tool_result_kinds=["fact", "preference", "instruction", "constraint"])
    agent_turn(everything, PROFILE, session="s2", call="call_2")
    assert {m.kind for m in everything.store.index("acme", "ann").live()} >= {"instruction", "constraint"}


def test_extract_llm_asks_the_judge_model_for_strict_json_and_falls_back_to_local(make):
    calls = []

    async def judge(model, messages, **kwargs):
        calls.append((model, messages, kwargs))
        return answers.pop(0)

    answers = ['{"memories": [{"text": "Ann is vegetarian", "kind": "fact"}]}', "Sure! She is vegetarian."]
    policy = make(complete=judge, extract="llm", judge_model="judge-1")
    ex = turn(policy, "By the way, no meat for me, ever.", session="a")
    assert action(ex, "write")["kinds"] == ["fact"]
    assert [m.text for m in policy.store.index("acme", "ann").live()] == ["Ann is vegetarian"]
    model, messages, kwargs = calls[0]
    assert model == "judge-1" and messages[-1]["content"] == "By the way, no meat for me, ever."
    assert kwargs["response_format"] == {"type": "json_object"} and kwargs["temperature"] == 0
    ex = turn(policy, "I prefer aisle seats.", session="b")  # the judge answers prose: the local reading stands
    assert action(ex, "extract_fallback") is not None and action(ex, "write") is not None
    assert "I prefer aisle seats." in [m.text for m in policy.store.index("acme", "ann").live()]


def test_a_replica_sharing_the_store_sees_another_replicas_write_after_refresh_s(make):
    one, two = make(refresh_s=0.05), make(refresh_s=0.05)  # two processes on one Chroma: two in-process caches

    async def scenario():
        async def ask(policy, text, session):
            messages = [{"role": "user", "content": text}]
            ex = Exchange("r", "gpt-4o", messages, None, {"model": "gpt-4o", "messages": messages}, tenant="acme",
                          session_id=session, headers={"x-ctxwarden-user": "ann"})
            await policy.on_request(ex)
            return ex

        assert action(await ask(two, "Find me a hotel in Rome for three nights.", "t1"), "select") is None
        await ask(one, "I prefer budget hotels, nothing fancy.", "o1")
        await asyncio.sleep(0.1)
        await ask(two, "Find me a hotel in Rome for three nights.", "t2")  # starts the background check
        for _ in range(50):
            await asyncio.sleep(0.05)
            if two.store.cached("acme", "ann") is not None and len(two.store.cached("acme", "ann")):
                break
        ex = await ask(two, "Find me a hotel in Rome for three nights.", "t3")
        assert action(ex, "select") is not None and "budget hotels" in ex.messages[-1]["content"]

    asyncio.run(scenario())


def test_a_user_whose_memories_pass_the_cache_bound_is_read_from_the_store_once(make, embedder, monkeypatch):
    # 10,000 memories make a ~23 MB index, over the users' cache bound once the cache budget scales
    # it: without keep_one every request read the user back from Chroma.
    policy = make()
    turn(policy, "I prefer quality hotels over cheap ones.")
    turn(policy, "My budget for the trip is 3,000 euros.")
    store = MemoryStore(policy.services.store, embedder)
    monkeypatch.setattr(store._users, "own_max_bytes", 1)  # every user is over the bound
    loads = []
    real_load = store._load
    monkeypatch.setattr(store, "_load", lambda tenant, user: loads.append(user) or real_load(tenant, user))
    for _ in range(3):
        assert len(store.index("acme", "ann").live()) == 2
    assert loads == ["ann"]
    store.index("acme", "bob")  # another user takes the one place
    store.index("acme", "ann")
    assert loads == ["ann", "bob", "ann"] and len(store._users) == 1


# A real first message of a ShareGPT conversation (bench/data/no_harm/sharegpt.jsonl.gz, id 98nYLRd_0;
# Apache-2.0 per the dataset card): a role prompt whose first sentence the local reader keeps as a memory.
ROLE_PROMPT = (
    "I want you act as the prompt generator and I will give you ideas; the ai writing website name anissa.ai that "
    "uses Al to generate ideas for a startup, product or service, act as you are the AI-powered builder helps "
    "entrepreneurs, startups, brands' owners quickly launch their business ideas and find relevant questions to "
    "answer for their own brands by briefing description of their ideas and you come up with the formular prompts "
    "+ keywords of each processes and also give me the examples of them by \n-generate for free customers\n"
    "-Articles related to\n-Customer products 10 articles\n-Reviews related to\n-Customer product 10 reviews\n"
    "-FAQs related to\n-Customer Products 10 FAQs\n-3 month SEO plan")
ORDINARY_ASKS = ("Write a simple JS function. Answer concisely.", "how to make a nlp model and use it")


@pytest.mark.parametrize("gate", [1.5, -10])
def test_a_new_users_memory_that_every_request_comes_near_is_not_injected_into_each(make, gate):
    """A memory of a new user (no distinct gate yet) that sits as close to ordinary requests as to this one
    stays out (background.py); with the gate off (-10) it reached both unrelated requests. A memory that
    stands out for the request still comes: budget hotels for a hotel in Rome."""
    policy = make(min_background_z=gate)
    assert action(turn(policy, ROLE_PROMPT, session="p"), "write")["count"] == 1
    blocks = [action(turn(policy, text, session=f"u{i}"), "select") for i, text in enumerate(ORDINARY_ASKS)]
    assert all(b is None for b in blocks) if gate > -10 else all(b is not None for b in blocks)
    held = [(v, attrs) for n, v, attrs in policy.services.metrics.seen if n == "ctxwarden.memory.held_back"]
    assert held == ([(1, {"gate": "background"})] * 2 if gate > -10 else [])  # what the gate kept out, said
    turn(policy, "I prefer budget hotels, nothing fancy.", session="h")
    ex = turn(policy, "Find me a hotel in Rome for three nights.", session="r")
    assert action(ex, "select")["count"] == 1 and "budget hotels" in ex.messages[-1]["content"]
