"""ISOLATE (issue 15, point 4) for the archive: what one user's task archived (tool results, summarized
history) is recalled by that task alone: not by the user's other tasks, not by another user. Through
the real proxy, the official SDK and a fake upstream; and the scratchpad's storage, old entries included."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from ctxwarden.policies.base import Exchange, Services
from ctxwarden.policies.history.scratchpad import COLLECTION, Scratchpad, owner_of, stored_id
from ctxwarden.policies.text.tokens import TiktokenCounter
from ctxwarden.proxy.config import StorageConfig
from ctxwarden.proxy.storage import ChromaStore
from tests.conftest import openai_client, policies_off
from tests.test_compression_e2e import REPORT, agent_conversation, archive_on, archived_conversation, summaries
from tests.test_history_units import RecordingMetrics

TOTAL = "48,213.55"  # in the archived ledger, not in its stub's digest


def hints(user: str | None, task: str | None) -> dict[str, str]:
    return {k: v for k, v in (("x-ctxwarden-user", user), ("x-ctxwarden-task", task)) if v}


def pasted_stub_conversation(stub: str) -> list[dict[str, Any]]:
    """The ledger conversation with the tool result already a stub (a client that kept the proxy's
    stub, or pasted one): the proxy archives nothing here, and offers context_recall for its ref."""
    conv = archived_conversation()
    conv[3] = {**conv[3], "content": stub}
    return conv


def recall_both_ways(fake, client, conv, ref: str, extra: dict[str, Any]) -> list[str]:
    """The model asks for `ref` whole and searches for the ledger's total; the two tool answers."""
    fake.reply(tool_calls=[{"name": "context_recall", "arguments": json.dumps({"ref": ref})},
                           {"name": "context_recall", "arguments": json.dumps({"query": "Grand total"})}])
    fake.reply(content="done")
    client.chat.completions.create(model="gpt-4o", messages=conv, **extra)
    return [m["content"] for m in fake.chat_requests[-1]["messages"] if m["role"] == "tool"][-2:]


def test_an_archived_result_is_recalled_by_its_own_task_only(fake, start_proxy):
    proxy = start_proxy(archive_on())
    client = openai_client(proxy)
    fake.reply(content="ok")
    client.chat.completions.create(model="gpt-4o", messages=archived_conversation(),
                                   extra_headers=hints("alice", "paris-trip"))
    stub = fake.chat_requests[-1]["messages"][3]["content"]
    ref = stub.split("ref=")[1].split(":")[0]
    assert TOTAL not in stub
    conv = pasted_stub_conversation(stub)
    others = [{"extra_headers": hints("alice", "london-dinner")},  # the same user's other task
              {"extra_headers": hints("bob", "paris-trip")},  # another user, the same task name
              {"extra_headers": hints(None, "paris-trip"), "user": "bob"},  # the user in the OpenAI field
              {"extra_headers": hints("alice", None)}]  # the user's default task
    for extra in others:
        by_ref, by_query = recall_both_ways(fake, client, conv, ref, extra)
        assert by_ref.startswith(f"error: nothing is archived under ref={ref} "), extra
        assert by_query.startswith("nothing archived in this conversation matches"), extra
        assert TOTAL not in json.dumps(fake.chat_requests[-1]), extra
    by_ref, by_query = recall_both_ways(fake, client, conv, ref, {"extra_headers": hints("alice", "paris-trip")})
    assert by_ref == REPORT and TOTAL in by_query


def test_the_same_result_archived_by_two_tasks_is_each_ones_own(fake, start_proxy):
    """Refs hash the content: two tasks archiving the same result share the ref, not the entry."""
    proxy = start_proxy(archive_on())
    client = openai_client(proxy)
    for task in ("paris-trip", "london-dinner"):
        fake.reply(content="ok")
        client.chat.completions.create(model="gpt-4o", messages=archived_conversation(), extra_headers=hints("alice", task))
    ref = fake.chat_requests[-1]["messages"][3]["content"].split("ref=")[1].split(":")[0]
    for task in ("paris-trip", "london-dinner"):
        by_ref, _ = recall_both_ways(fake, client, archived_conversation(), ref, {"extra_headers": hints("alice", task)})
        assert by_ref == REPORT


def test_summarized_history_of_one_task_is_not_recalled_by_another(fake, start_proxy):
    proxy = start_proxy({"policies": policies_off("history", "archive")})
    client = openai_client(proxy)
    conv = agent_conversation(40)
    refs = {}
    for task in ("paris-trip", "london-dinner"):
        fake.reply(content="first")
        client.chat.completions.create(model="gpt-4o", messages=conv, extra_headers=hints("alice", task))
        refs[task] = summaries(fake.chat_requests[-1]["messages"])[0]["content"].split("ref=")[1].split(" ")[0]
    assert refs["paris-trip"] != refs["london-dinner"]  # each task's block archives its own transcript
    later = conv + [{"role": "assistant", "content": "first"}, {"role": "user", "content": "When do I fly, exactly?"}]
    for task, expect_found in (("london-dinner", False), ("paris-trip", True)):
        fake.reply(tool_calls=[{"name": "context_recall", "arguments": json.dumps({"ref": refs["paris-trip"]})}])
        fake.reply(content="ok")
        client.chat.completions.create(model="gpt-4o", messages=later, extra_headers=hints("alice", task))
        answer = fake.chat_requests[-1]["messages"][-1]["content"]
        assert (conv[1]["content"] in answer) is expect_found, task
        assert answer.startswith("error: nothing is archived") is not expect_found, task


# ---------------------------------------------------------------------------- storage


@pytest.fixture
def services(tmp_path) -> Services:
    return Services(tokens=TiktokenCounter(), metrics=RecordingMetrics(), store=ChromaStore(StorageConfig(path=str(tmp_path))))


def test_entries_without_an_owner_stay_readable_by_requests_without_hints(services):
    """An archive written before owners existed (a bare ref id, no user or task in its metadata)."""
    services.store.collection(COLLECTION, "acme").upsert(
        ids=["ar_0000000000legacy"], documents=["old text"], embeddings=[[1.0] + [0.0] * 63],
        metadatas=[{"kind": "tool_result", "created": 4e9}])

    async def scenario() -> tuple:
        pad = Scratchpad(services)
        pad.put("acme", "ar_0123456789", "alice's text", ("alice", "paris-trip"))
        await pad.flush()
        in_memory = (await pad.get("acme", "ar_0123456789", ("alice", "paris-trip")),
                     await pad.get("acme", "ar_0123456789"), await pad.get("acme", "ar_0123456789", ("alice", "")))
        pad.memory.clear()
        return (in_memory, await pad.get("acme", "ar_0123456789", ("alice", "paris-trip")),
                await pad.get("acme", "ar_0123456789", ("bob", "paris-trip")),
                await pad.get("acme", "ar_0000000000legacy"), await pad.get("acme", "ar_0000000000legacy", ("alice", "")))

    in_memory, own, other, legacy, legacy_for_alice = asyncio.run(scenario())
    assert in_memory == ("alice's text", None, None)
    assert (own, other, legacy, legacy_for_alice) == ("alice's text", None, "old text", None)
    got = services.store.collection(COLLECTION, "acme").get(ids=[stored_id("ar_0123456789", ("alice", "paris-trip"))])
    assert got["metadatas"][0]["user"] == "alice" and got["metadatas"][0]["task"] == "paris-trip"


def test_the_owner_is_read_as_the_memory_policy_reads_it_and_never_refused():
    def ex(headers: dict[str, str], **body: Any) -> Exchange:
        return Exchange("r", "gpt-4o", [], None, {"model": "gpt-4o", **body}, headers=headers)

    assert owner_of(ex({})) == ("", "")
    assert owner_of(ex({}, user="bob")) == ("bob", "")
    assert owner_of(ex({"x-ctxwarden-user": "alice", "x-ctxwarden-task": "t"}, user="bob")) == ("alice", "t")
    assert owner_of(ex({}, user=42)) == ("", "")
    assert owner_of(ex({}, user="x" * 300)) == ("x" * 300, "")  # memory refuses it (400); the archive scopes by it
