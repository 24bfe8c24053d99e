"""Unit tests of the archive policy and the scratchpad (real Chroma under tmp_path)."""

from __future__ import annotations

import asyncio
import json
import re
from typing import Any

import pytest

from ctxwarden.policies.base import BudgetNote, Exchange, Services
from ctxwarden.policies.history.archive import ArchiveConfig, ArchivePolicy
from ctxwarden.policies.history.scratchpad import RECALL_TOOL_NAME, Scratchpad, archive_ref, stub_text
from ctxwarden.policies.text.tokens import TiktokenCounter
from ctxwarden.proxy.config import StorageConfig
from ctxwarden.proxy.storage import ChromaStore
from tests.test_compression_e2e import assert_pairs_intact
from tests.test_history_units import RecordingMetrics

BIG = "Row {i}: shipment SHP-{i:05d} delivered to Bergen, 14 pallets, invoice 7,{i:03d} NOK. "


def big(tag: str, rows: int = 80) -> str:
    return f"Report {tag}. " + "".join(BIG.format(i=i) for i in range(rows))


def conversation(current_result: str = "short result") -> list[dict[str, Any]]:
    return [
        {"role": "system", "content": "You are a logistics agent."},
        {"role": "user", "content": "Get the shipment reports."},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "a1", "type": "function", "function": {"name": "report", "arguments": "{\"n\": 1}"}},
            {"id": "a2", "type": "function", "function": {"name": "report", "arguments": "{\"n\": 2}"}}]},
        {"role": "tool", "tool_call_id": "a1", "content": big("north")},
        {"role": "tool", "tool_call_id": "a2", "content": "tiny"},
        {"role": "assistant", "content": "Both reports are in."},
        {"role": "user", "content": "Now the southern one."},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "b1", "type": "function", "function": {"name": "report", "arguments": "{\"n\": 3}"}}]},
        {"role": "tool", "tool_call_id": "b1", "content": current_result},
    ]


@pytest.fixture
def services(tmp_path) -> Services:
    return Services(tokens=TiktokenCounter(), metrics=RecordingMetrics(), store=ChromaStore(StorageConfig(path=str(tmp_path))))


def run(policy: ArchivePolicy, messages: list[dict], pressure: str = "none", target: int | None = None,
        tools: list | None = None, tenant: str | None = None, compress: int | None = None,
        reject: int | None = None) -> Exchange:
    """`pressure` as the budget set it before the policies ran; `target` its target (tokens), `compress`
    the mark at which the archive starts (default: the target), `reject` the refusal mark."""
    ex = Exchange("t", "gpt-4o", messages, tools, {"model": "gpt-4o", "messages": messages}, tenant=tenant)
    ex.pressure, ex.target_tokens = pressure, target  # type: ignore[assignment]
    if pressure != "none":
        ex.notes.budget = BudgetNote(0, window=128_000, compress_at=target if compress is None else compress,
                                     target_at=target, aggressive_at=target if pressure == "aggressive" else 10**9,
                                     reject_at=reject)
    asyncio.run(policy.on_request(ex))
    return ex


TIGHT = 500  # a target no conversation here fits: the archive stubs what it may


def test_refs_are_deterministic_and_valid_tool_arguments():
    ref = archive_ref("content", "call_1")
    assert ref == archive_ref("content", "call_1")
    assert ref != archive_ref("content", "call_2") and ref != archive_ref("content!", "call_1")
    assert re.fullmatch(r"[A-Za-z0-9_-]+", ref)


def test_without_budget_pressure_nothing_is_archived(services):
    """Old results are compacted by the history policy at its events; stubbing them on every new
    turn would rewrite the cached prefix."""
    conv = conversation(current_result=big("south"))
    ex = run(ArchivePolicy(ArchiveConfig(min_tokens=200), services), conv)
    assert ex.messages is conv and ex.actions == []


def test_under_pressure_big_results_become_stubs_oldest_first(services):
    conv = conversation(current_result=big("south"))
    counter = services.tokens
    target = counter.count_messages(conv, "gpt-4o") - 500  # one stub is enough
    ex = run(ArchivePolicy(ArchiveConfig(min_tokens=200), services), conv, "compress", target=target)
    ref = archive_ref(big("north"), "a1")
    stub = ex.messages[3]
    assert stub == {"role": "tool", "tool_call_id": "a1", "content": stub["content"]}
    assert stub["content"].startswith(f"[archived tool result ref={ref}:")
    assert "SHP-00000" in stub["content"] and "of 81 sentences" in stub["content"]  # what it held, and that it elided
    assert ex.messages[4] is conv[4] and ex.messages[8] is conv[8]  # small, and the current turn's (unread) result
    assert conv[3]["content"] == big("north")  # the client's dict is untouched
    assert_pairs_intact(ex.messages)
    assert RECALL_TOOL_NAME in ex.proxy_tools and ex.notes.proxy_tool_rounds == 3
    action = next(a for a in ex.actions if a.label == "archive.archive")
    assert action.detail["results"] == 1 and action.detail["tokens_freed"] > 500


def test_the_same_conversation_gets_the_same_stubs_next_turn(services):
    policy = ArchivePolicy(ArchiveConfig(min_tokens=200), services)
    first = run(policy, conversation(), "compress", target=TIGHT)
    grown = conversation() + [{"role": "assistant", "content": "Done."}, {"role": "user", "content": "Thanks."}]
    second = run(policy, grown, "compress", target=TIGHT)
    assert first.messages[3]["content"].startswith("[archived")
    assert second.messages[: len(first.messages)] == first.messages


def test_compress_pressure_archives_answered_results_of_the_current_turn_until_under_target(services):
    conv = conversation(current_result=big("south")) + [
        {"role": "assistant", "content": None, "tool_calls": [{"id": "b2", "type": "function", "function": {"name": "report", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "b2", "content": big("east")},
    ]
    counter = services.tokens
    policy = ArchivePolicy(ArchiveConfig(min_tokens=200), services)
    roomy = run(policy, conv, "compress", target=10**6)
    assert roomy.messages[8] is conv[8] and roomy.messages[10] is conv[10]
    tight = run(policy, conv, "compress", target=counter.count_messages(conv, "gpt-4o") - 2000)
    assert tight.messages[8]["content"].startswith("[archived tool result")  # answered by the next assistant message
    assert tight.messages[10] is conv[10] or tight.messages[10]["content"].startswith("[archived")
    assert_pairs_intact(tight.messages)


def test_aggressive_pressure_archives_every_result_worth_a_stub_but_the_one_just_asked_for(services):
    conv = conversation(current_result=big("south", rows=6))
    ex = run(ArchivePolicy(ArchiveConfig(min_tokens=5000), services), conv, "aggressive", target=10)
    assert ex.messages[3]["content"].startswith("[archived")
    assert ex.messages[8] is conv[8]  # the result the model asked for in its last turn: verbatim
    assert ex.messages[4] is conv[4]  # "tiny": a stub would be longer
    assert any(a.label == "archive.target_missed" for a in ex.actions)
    assert not any(a.label == "archive.newest_archived" for a in ex.actions)


def test_the_newest_result_is_archived_only_when_the_request_would_otherwise_be_refused(services):
    conv = conversation(current_result=big("south"))
    policy = ArchivePolicy(ArchiveConfig(min_tokens=200), services)
    total = services.tokens.count_messages(conv, "gpt-4o")
    fits = run(policy, conv, "aggressive", target=10, reject=total * 2)
    assert fits.messages[8] is conv[8]
    refused = run(policy, conv, "aggressive", target=10, reject=total // 4)
    assert refused.messages[8]["content"].startswith("[archived tool result")
    assert any(a.label == "archive.newest_archived" for a in refused.actions)
    assert_pairs_intact(refused.messages)


def test_between_the_target_and_the_compress_mark_nothing_is_archived(services):
    """A growing history passes the target many steps before the history policy's next event at
    the compress mark; a stub written then would change the cached prefix on every one of them."""
    conv = conversation(current_result=big("south"))
    total = services.tokens.count_messages(conv, "gpt-4o")
    ex = run(ArchivePolicy(ArchiveConfig(min_tokens=200), services), conv, "compress", target=total // 2,
             compress=total + 100)
    assert ex.messages is conv or ex.messages == conv
    assert not any(a.label == "archive.archive" for a in ex.actions)
    over = run(ArchivePolicy(ArchiveConfig(min_tokens=200), services), conv, "compress", target=total // 2,
               compress=total - 100)
    assert over.messages[3]["content"].startswith("[archived")


def test_results_with_images_are_left_in_place_and_reported(services):
    conv = conversation()
    conv[3] = {"role": "tool", "tool_call_id": "a1", "content": [
        {"type": "text", "text": big("north")}, {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}]}
    ex = run(ArchivePolicy(ArchiveConfig(min_tokens=200), services), conv, "compress", target=TIGHT)
    assert ex.messages[3] is conv[3]
    assert "archive.skip_non_text" in ex.action_labels()


def test_list_form_text_results_are_archived(services):
    conv = conversation()
    conv[3] = {"role": "tool", "tool_call_id": "a1", "content": [{"type": "text", "text": big("north")}]}
    ex = run(ArchivePolicy(ArchiveConfig(min_tokens=200), services), conv, "compress", target=TIGHT)
    assert ex.messages[3]["content"].startswith("[archived tool result ref=")


def test_a_client_tool_named_context_recall_is_not_shadowed(services):
    client_tool = {"type": "function", "function": {"name": RECALL_TOOL_NAME, "parameters": {"type": "object"}}}
    ex = run(ArchivePolicy(ArchiveConfig(min_tokens=200), services), conversation(), "compress", target=TIGHT, tools=[client_tool])
    assert ex.proxy_tools == {} and "archive.recall_name_taken" in ex.action_labels()


def test_recall_handler_answers_content_errors_and_tolerates_a_ref_prefix(services):
    policy = ArchivePolicy(ArchiveConfig(min_tokens=200), services)
    ex = run(policy, conversation(), "compress", target=TIGHT, tenant="t1")
    handler = ex.proxy_tools[RECALL_TOOL_NAME].handler
    ref = archive_ref(big("north"), "a1")
    assert asyncio.run(handler(ex, json.dumps({"ref": ref}))) == big("north")
    assert asyncio.run(handler(ex, json.dumps({"ref": f"ref={ref}"}))) == big("north")
    assert asyncio.run(handler(ex, "not json")).startswith("error:")
    assert asyncio.run(handler(ex, json.dumps({"ref": "../../etc"}))).startswith("error:")
    other = Exchange("u", "gpt-4o", [], None, {}, tenant="t2")
    assert asyncio.run(handler(other, json.dumps({"ref": ref}))).startswith("error: nothing is archived")
    assert asyncio.run(handler(ex, json.dumps({}))).startswith("error:")


def test_recall_by_query_searches_this_conversations_archive_only(services):
    policy = ArchivePolicy(ArchiveConfig(min_tokens=200), services)
    ex = run(policy, conversation(), "compress", target=TIGHT, tenant="t1")
    handler = ex.proxy_tools[RECALL_TOOL_NAME].handler
    found = asyncio.run(handler(ex, json.dumps({"query": "shipment SHP-00042"})))
    assert "SHP-00042" in found and archive_ref(big("north"), "a1") in found
    # the same tenant's other conversation holds no refs: nothing archived elsewhere is searched
    other = Exchange("u", "gpt-4o", [{"role": "user", "content": "hi"}], None, {}, tenant="t1")
    assert asyncio.run(handler(other, json.dumps({"query": "shipment SHP-00042"}))).startswith("nothing archived")
    assert "recall_search" in ",".join(ex.action_labels())


# ---------------------------------------------------------------------------- scratchpad


def test_scratchpad_persists_to_chroma_per_tenant(services):
    async def scenario() -> tuple:
        pad = Scratchpad(services)
        assert pad.put("acme", "ar_0123456789", "the archived text", kind="tool_result", gist="archived")
        assert not pad.put("acme", "ar_0123456789", "the archived text")
        await pad.flush()
        pad.memory.clear()
        return await pad.get("acme", "ar_0123456789"), await pad.get("globex", "ar_0123456789"), await pad.get("acme", "ar_missing000")

    assert asyncio.run(scenario()) == ("the archived text", None, None)
    col = services.store.collection("scratchpad", "acme")
    assert col.get(ids=["ar_0123456789"])["metadatas"][0]["kind"] == "tool_result"


def test_scratchpad_keeps_serving_from_memory_when_chroma_fails(services):
    class BrokenStore:
        def collection(self, name: str, tenant: str | None = None) -> Any:
            raise ConnectionError("chroma unreachable")

    svc = Services(tokens=services.tokens, metrics=services.metrics, store=BrokenStore())

    async def scenario() -> str | None:
        pad = Scratchpad(svc)
        pad.put(None, "ar_0123456789", "kept in memory")
        await pad.flush()
        assert pad.persist_errors == 1
        pad.put(None, "ar_0123456789", "kept in memory")  # the next request carrying it retries the write
        await pad.flush()
        assert pad.persist_errors == 2
        return await pad.get(None, "ar_0123456789")

    assert asyncio.run(scenario()) == "kept in memory"
    assert any(name == "ctxwarden.scratchpad.errors" for name, _, _ in services.metrics.added)


def test_stub_names_its_ref_in_the_documented_form():
    assert "ref=ar_abc_DEF-123:" in stub_text("ar_abc_DEF-123", 900, "gist")
