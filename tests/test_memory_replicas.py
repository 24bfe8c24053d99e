"""Memory across replicas: a write or a deletion on one publishes the tenant's content version
(Services.versions), and another replica sharing the store reads the user's memories again on its
next request, not `refresh_s` later. Two MemoryPolicy instances (two processes' in-process indexes)
on one Chroma store, and one versions object (what Redis gives every replica)."""

from __future__ import annotations

import pytest

from ctxwarden.policies.base import Services
from ctxwarden.policies.memory.config import MemoryConfig
from ctxwarden.policies.memory.policy import MemoryPolicy
from ctxwarden.policies.text.tokens import TiktokenCounter
from ctxwarden.proxy.config import EmbedderChoice, StorageConfig
from ctxwarden.proxy.embeddings import build_embedder
from ctxwarden.proxy.storage import ChromaStore
from tests.test_memory_policy import Recorder, action, turn

BUDGET = "I prefer budget hotels."
ASK = "Find me a hotel in Rome for three nights."


@pytest.fixture(scope="module")
def embedder():
    return build_embedder(EmbedderChoice())


class SharedVersions:
    """Like state.LocalVersions, seen by every replica at once (a Redis backend, after its poll)."""

    def __init__(self) -> None:
        self.counts: dict[str, int] = {}
        self.published: list[str] = []

    def current(self, name: str) -> int:
        return self.counts.get(name, 0)

    def publish(self, name: str) -> int:
        self.counts[name] = self.current(name) + 1
        self.published.append(name)
        return self.counts[name]


def replicas(tmp_path, embedder, versions) -> tuple[MemoryPolicy, MemoryPolicy]:
    store = ChromaStore(StorageConfig(path=str(tmp_path / "store")))

    def replica() -> MemoryPolicy:
        services = Services(tokens=TiktokenCounter(), metrics=Recorder(), embedder=embedder, store=store, versions=versions)
        return MemoryPolicy(MemoryConfig(refresh_s=3600), services)  # the periodic check never comes here
    return replica(), replica()


def selected(ex) -> str:
    found = action(ex, "select")
    return ex.messages[-1]["content"] if found else ""


def test_a_write_on_one_replica_is_selected_by_the_other_at_its_next_request(tmp_path, embedder):
    versions = SharedVersions()
    one, two = replicas(tmp_path, embedder, versions)
    assert selected(turn(two, ASK, session="s0")) == ""  # two has loaded ann's (empty) memories
    assert action(turn(one, BUDGET, session="s1"), "write")
    assert versions.published == ["memory:acme"]
    assert BUDGET.rstrip(".") in selected(turn(two, ASK, session="s2"))


def test_a_deletion_on_one_replica_leaves_the_others_search_at_once(tmp_path, embedder):
    versions = SharedVersions()
    one, two = replicas(tmp_path, embedder, versions)
    written = action(turn(one, BUDGET, session="s1"), "write")
    assert BUDGET.rstrip(".") in selected(turn(two, ASK, session="s2"))
    one.store.delete("acme", written["ids"][0])
    assert versions.published[-1] == "memory:acme"
    assert selected(turn(two, ASK, session="s3")) == ""


def test_without_versions_the_other_replica_waits_for_refresh_s(tmp_path, embedder):
    """What the versions change: the same scenario with none, and the write is not seen yet."""
    one, two = replicas(tmp_path, embedder, None)
    turn(two, ASK, session="s0")
    turn(one, BUDGET, session="s1")
    assert selected(turn(two, ASK, session="s2")) == ""


def test_another_tenants_write_leaves_the_index_as_it_is(tmp_path, embedder):
    versions = SharedVersions()
    one, two = replicas(tmp_path, embedder, versions)
    turn(two, ASK, session="s0")
    index = two.store.cached("acme", "ann")
    turn(one, BUDGET, session="s1", tenant="globex")
    assert versions.published == ["memory:globex"]
    turn(two, ASK, session="s2")
    assert two.store.cached("acme", "ann") is index  # not reloaded
