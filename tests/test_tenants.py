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
    assert store.own_collection("kb", "acme.").count() == 0  # an altered old name: not acme.'s to take
    assert store.own_collection("kb", "acme").get(ids=["tower#0"])["documents"] == ["The Eiffel Tower is in Paris."]
    names = {c.name for c in raw.list_collections()}
    assert "ctxw_kb__t_acme" not in names and collection_name("kb", "acme") in names  # renamed, once
    again = ChromaStore(StorageConfig(path=path))
    assert again.own_collection("kb", "acme").count() == 1


def test_collections_from_before_pooling_move_into_the_pool_for_their_exact_tenant_only(tmp_path):
    """A tenant's own archive collection, under either old naming scheme, is copied into the pooled
    one (vectors and metadata as they were) the first time that tenant is served, then deleted."""
    path = str(tmp_path / "store")
    raw = chromadb.PersistentClient(path=path, settings=ChromaSettings(anonymized_telemetry=False))
    for name, row in ((collection_name("scratchpad", "acme"), "r1"), ("ctxw_scratchpad__t_acme", "r0"),
                      (collection_name("scratchpad", "beta"), "b1"), ("ctxw_scratchpad", "shared")):
        raw.get_or_create_collection(name, embedding_function=None, metadata={"hnsw:space": "cosine"}).add(
            ids=[row], embeddings=[[1.0, 0.5]], documents=[f"text {row}"], metadatas=[{"created": 1.0}])

    store = ChromaStore(StorageConfig(path=path))
    assert store.collection("scratchpad", "acme.").count() == 0  # an altered old name is nobody's to take
    got = store.collection("scratchpad", "acme").get(include=["documents", "metadatas", "embeddings"])
    assert sorted(got["ids"]) == ["r0", "r1"]
    assert all(m == {"created": 1.0} for m in got["metadatas"]) and got["embeddings"].tolist() == [[1.0, 0.5]] * 2
    names = {c.name for c in raw.list_collections()}
    assert collection_name("scratchpad", "acme") not in names and "ctxw_scratchpad__t_acme" not in names
    assert collection_name("scratchpad", "beta") in names  # beta was not served yet: untouched
    assert store.collection("scratchpad", None).get(ids=["shared"])["documents"] == ["text shared"]
    assert ChromaStore(StorageConfig(path=path)).collection("scratchpad", "beta").get(ids=["b1"])["ids"] == ["b1"]
    assert store.collection("scratchpad", "beta").get(ids=["r0", "r1"])["ids"] == []  # acme's rows stay acme's


def test_pooled_rows_never_cross_tenants_whatever_ids_or_filters_are_asked(tmp_path):
    store = ChromaStore(StorageConfig(path=str(tmp_path / "s")))
    a, b = store.collection("notes", "acme"), store.collection("notes", "acme.")
    a.upsert(ids=["x", "y"], embeddings=[[1.0], [0.5]], documents=["a-x", "a-y"], metadatas=[{"k": 1}, None])
    b.upsert(ids=["x"], embeddings=[[0.25]], documents=["b-x"], metadatas=[{"k": 1}])
    assert a.get(ids=["x"])["documents"] == ["a-x"] and b.get(ids=["x"])["documents"] == ["b-x"]
    assert b.get(where={"k": 1})["ids"] == ["x"] and b.get(ids=["y"])["ids"] == []
    assert b.get(where={"ctxw_tenant": a.key})["ids"] == []  # naming the other tenant's tag changes nothing
    assert (a.count(), b.count()) == (2, 1)
    b.delete(where={"k": 1})
    assert (a.count(), b.count()) == (2, 0)
    assert dict(zip(*(a.get(include=["metadatas"])[k] for k in ("ids", "metadatas")))) == {"x": {"k": 1}, "y": None}
    with pytest.raises(ValueError):
        a.delete()  # never "everything" by omission
    assert not hasattr(a, "query") and not hasattr(a, "modify")  # nothing that could go around the filter
    assert {c.name for c in store.client.list_collections()} == {"ctxw_notes__pool"}


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
