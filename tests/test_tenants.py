"""Tenant isolation: names that look alike never share storage, invalid names are refused with a
400 that names them, old stores are migrated, and per-session state is per tenant."""

from __future__ import annotations

import json

import chromadb
import httpx
import openai
import pytest
from chromadb.config import Settings as ChromaSettings

from ctxwarden.policies.history.scratchpad import archive_ref
from ctxwarden.policies.poisoning.admin import BadRequest, tenant_param
from ctxwarden.proxy.config import StorageConfig
from ctxwarden.proxy.storage import ChromaStore, collection_name
from ctxwarden.proxy.tenants import TenantError, check_tenant
from tests.conftest import openai_client, policies_off
from tests.test_compression_e2e import REPORT, archive_on, archived_conversation

ADMIN_KEY = "tenant-admin-key"
AUTH = {"authorization": f"Bearer {ADMIN_KEY}"}
LOOK_ALIKES = ["acme", "acme.", "acme-", "acme!", "ACME", "acme "]


def test_look_alike_tenant_names_get_distinct_valid_collections():
    names = [collection_name("kb", t) for t in LOOK_ALIKES] + [collection_name("kb", None)]
    assert len(set(names)) == len(names)
    long_a, long_b = "x" * 600 + "a", "x" * 600 + "b"  # the old scheme cut both to the same 500 characters
    assert collection_name("kb", long_a) != collection_name("kb", long_b)
    for name in names + [collection_name("tools_v3_wordllama-64", long_a), collection_name("kb", "日本語/テナント")]:
        assert 3 <= len(name) <= 512 and name[0].isalnum() and name[-1].isalnum()
        assert all(c.isalnum() and c.isascii() or c in "._-" for c in name), name
    assert collection_name("kb", None) == "ctxw_kb"  # the shared namespace keeps its name (no migration)
    assert "acme" in collection_name("kb", "acme")  # still readable


@pytest.mark.parametrize("bad", ["", "a" * 129, "acme\n", "ac\x00me", "tab\there", "bell\x07"])
def test_invalid_tenant_names_are_refused_naming_them(bad):
    with pytest.raises(TenantError) as err:
        check_tenant(bad)
    assert "x-ctxwarden-tenant" in str(err.value)
    if bad:
        with pytest.raises(BadRequest):  # the admin API applies the same rule
            tenant_param(bad)


@pytest.mark.parametrize("good", ["acme", "acme.", "a" * 128, "Team Blue", "café-ünïcode", "a/b:c"])
def test_valid_tenant_names_pass_unchanged(good):
    assert check_tenant(good) == good
    assert tenant_param(good) == good


def _kb_config():
    return {"policies": policies_off("poisoning")}


def test_look_alike_tenants_never_see_each_others_kb(fake, start_proxy, monkeypatch):
    monkeypatch.setenv("CTXWARDEN_ADMIN_KEY", ADMIN_KEY)
    proxy = start_proxy(_kb_config())
    url = f"{proxy.url}/admin/kb/documents"
    added = httpx.post(url, headers=AUTH, json={"tenant": "acme", "documents": [
        {"id": "tower", "text": "The Eiffel Tower is located in Paris."}]})
    assert added.status_code == 200
    assert [d["id"] for d in httpx.get(url, headers=AUTH, params={"tenant": "acme"}).json()["data"]] == ["tower"]
    for other in ("acme.", "acme-", "acme!"):
        listed = httpx.get(url, headers=AUTH, params={"tenant": other}).json()
        assert listed["total"] == 0, other
        assert httpx.get(f"{url}/tower", headers=AUTH, params={"tenant": other}).status_code == 404

    client = openai_client(proxy)
    ask = lambda tenant: client.chat.completions.create(  # noqa: E731
        model="gpt-4o", messages=[{"role": "user", "content": "Where is the Eiffel Tower?"}],
        extra_headers={"x-ctxwarden-tenant": tenant})
    fake.reply(content="The Eiffel Tower is located in London.")
    assert ask("acme").choices[0].finish_reason == "content_filter"  # acme's KB contradicts it
    fake.reply(content="The Eiffel Tower is located in London.")
    assert ask("acme.").choices[0].finish_reason == "stop"  # acme. has no KB: nothing to check against


@pytest.mark.parametrize("params, body", [
    ({"tenant": "a" * 129}, None), ({"tenant": "ac\x01me"}, None), ({}, {"tenant": "x\ny"}),
])
def test_admin_api_answers_400_naming_an_invalid_tenant(fake, start_proxy, monkeypatch, params, body):
    monkeypatch.setenv("CTXWARDEN_ADMIN_KEY", ADMIN_KEY)
    proxy = start_proxy(_kb_config())
    if body is None:
        responses = [httpx.get(f"{proxy.url}/admin/kb/documents", headers=AUTH, params=params),
                     httpx.get(f"{proxy.url}/admin/kb/documents/x", headers=AUTH, params=params),
                     httpx.delete(f"{proxy.url}/admin/kb/documents/x", headers=AUTH, params=params),
                     httpx.get(f"{proxy.url}/admin/quarantine", headers=AUTH, params=params)]
    else:
        responses = [httpx.post(f"{proxy.url}/admin/kb/documents", headers=AUTH,
                                json={**body, "documents": [{"id": "a", "text": "A fact."}]})]
    for r in responses:
        assert r.status_code == 400, r.text
        assert r.json()["error"]["param"] == "tenant" and "tenant" in r.json()["error"]["message"]


def test_look_alike_tenants_never_read_each_others_archive(fake, start_proxy):
    """acme archives a tool result; after a restart (memory empty, the store answers), "acme." asks
    for acme's ref and gets nothing."""
    first = start_proxy(archive_on())
    fake.reply(content="ok")
    openai_client(first).chat.completions.create(model="gpt-4o", messages=archived_conversation(),
                                                 extra_headers={"x-ctxwarden-tenant": "acme"})
    first.stop()  # flushes the scratchpad to the store

    second = start_proxy(archive_on())
    ref = archive_ref(REPORT, "call_report")
    own = archived_conversation("call_other")
    own[3] = {**own[3], "content": REPORT.replace("LEDGER-7731", "LEDGER-0042")}
    for tenant, expected in (("acme.", "error: nothing is archived"), ("acme", REPORT)):
        fake.reply(tool_calls=[{"name": "context_recall", "arguments": json.dumps({"ref": ref})}])
        fake.reply(content="done")
        openai_client(second).chat.completions.create(model="gpt-4o", messages=own,
                                                      extra_headers={"x-ctxwarden-tenant": tenant})
        answer = [m for m in fake.chat_requests[-1]["messages"] if m["role"] == "tool"][-1]["content"]
        assert answer.startswith(expected), (tenant, answer[:80])


def test_old_scheme_collections_are_migrated_to_their_exact_tenant_only(tmp_path):
    path = str(tmp_path / "store")
    raw = chromadb.PersistentClient(path=path, settings=ChromaSettings(anonymized_telemetry=False))
    old = raw.get_or_create_collection("ctxw_kb__t_acme", embedding_function=None, metadata={"hnsw:space": "cosine"})
    old.add(ids=["tower#0"], embeddings=[[1.0, 0.0]], documents=["The Eiffel Tower is in Paris."],
            metadatas=[{"doc_id": "tower", "part": 0, "parts": 1}])

    store = ChromaStore(StorageConfig(path=path))
    assert store.collection("kb", "acme.").count() == 0  # an altered old name: not acme.'s to take
    assert store.collection("kb", "acme").get(ids=["tower#0"])["documents"] == ["The Eiffel Tower is in Paris."]
    names = {c.name for c in raw.list_collections()}
    assert "ctxw_kb__t_acme" not in names and collection_name("kb", "acme") in names  # renamed, once
    again = ChromaStore(StorageConfig(path=path))
    assert again.collection("kb", "acme").count() == 1


# ---------------------------------------------------------------------------- per-session state (item 16)


def test_a_tenant_reusing_another_tenants_session_id_shares_no_retry_counter(fake, start_proxy):
    policies = policies_off("loops")
    policies["loops"] = {"enabled": True, "max_retries": 2}
    proxy = start_proxy({"policies": policies, "models": {"tiny-model": {"context_window": 200}}})
    client = openai_client(proxy)
    oversized = [{"role": "user", "content": "Summarize: " + "lorem ipsum dolor sit amet " * 60}]

    def ask(tenant: str):
        return client.chat.completions.create(model="tiny-model", messages=oversized, extra_headers={
            "x-ctxwarden-session": "shared-id", "x-ctxwarden-tenant": tenant})

    for _ in range(2):
        with pytest.raises(openai.BadRequestError):
            ask("acme")
    assert "stopped retrying" in ask("acme").choices[0].message.content  # acme's guard trips
    for tenant in ("acme.", "globex"):  # same session id, other tenants: refused normally, counted from zero
        with pytest.raises(openai.BadRequestError) as err:
            ask(tenant)
        assert err.value.code == "context_length_exceeded"


def test_a_tenant_reusing_another_tenants_session_id_gets_its_own_loop_note_and_prefix(fake, start_proxy):
    from tests.test_loops_detect import A, B, convo
    from tests.test_loops_e2e import TOOLS

    policies = policies_off("loops")
    policies["loops"] = {"enabled": True, "action": "inject"}
    proxy = start_proxy({"policies": policies})
    client = openai_client(proxy)
    looping = convo(A(), B(), A(), B(), A(), B())
    continued = looping + [
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "call_again", "type": "function", "function": {"name": "search_flights", "arguments": json.dumps(A()[1])}}]},
        {"role": "tool", "tool_call_id": "call_again", "content": A()[2]}]

    def ask(tenant: str, messages: list):
        fake.reply(content="ok")
        return client.chat.completions.with_raw_response.create(
            model="gpt-4o", messages=messages, tools=TOOLS,
            extra_headers={"x-ctxwarden-session": "shared-id", "x-ctxwarden-tenant": tenant})

    first = ask("acme", looping)
    assert first.headers["x-ctxwarden-actions"] == "loops.inject" and first.headers["x-ctxwarden-prefix"] == "new"
    # acme. sends the continued loop in "the same" session: acme's note is not its note, acme's
    # previous request is not its prefix
    other = ask("acme.", continued)
    assert other.headers["x-ctxwarden-actions"] == "loops.inject"
    assert other.headers["x-ctxwarden-prefix"] == "new"
    again = ask("acme", continued)  # acme's loop continues after acme's note: stopped
    assert again.headers["x-ctxwarden-actions"] == "loops.stop"
