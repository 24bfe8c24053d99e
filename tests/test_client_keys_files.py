"""A key bound to one tenant uploads files, makes batches from them (and reads their result files) and
makes vector stores, then uses only its tenant's: the provider keeps every tenant's objects under the
proxy's one provider key, so the proxy notes who made each (proxy/keys/owned.py) and checks every id a
request names, in its path and in its body (a content part's `file_id`, file_search's
`vector_store_ids`, a batch's `input_file_id`). Through the real server, with the official SDK as the
client; before, such a key was refused every file, batch and vector store route, and a chat request
naming another tenant's file went through."""

from __future__ import annotations

import asyncio
import json
from types import SimpleNamespace

from ctxwarden.proxy.keys.owned import BatchFiles, FileOwners, NewObject
from tests.conftest import policies_off
from tests.test_client_keys import keyed, make_key  # noqa: F401 (the fixture)
from tests.test_client_keys_owned import client, refused

JSONL = b'{"custom_id": "1", "method": "POST", "url": "/v1/chat/completions", "body": {"model": "gpt-4o", "messages": []}}\n'


def test_a_tenant_uses_its_own_files_batches_and_vector_stores_and_no_other_tenants(keyed, fake):
    proxy = keyed(policies=policies_off())
    a, b = client(proxy, make_key(proxy, tenant="a")[0]), client(proxy, make_key(proxy, tenant="b")[0])
    upload = a.files.create(file=("requests.jsonl", JSONL), purpose="batch")
    assert a.files.retrieve(upload.id).filename == "requests.jsonl"
    assert JSONL in a.files.content(upload.id).read()
    batch = a.batches.create(input_file_id=upload.id, endpoint="/v1/chat/completions", completion_window="24h")
    done = a.batches.retrieve(batch.id)  # its output file is the provider's making: noted as the owner reads the batch
    assert a.files.content(done.output_file_id).read() == b"{}"
    store = a.vector_stores.create(name="docs", file_ids=[upload.id])
    assert a.vector_stores.retrieve(store.id).id == store.id
    a.responses.create(model="gpt-4o", input="What do the docs say?",
                       tools=[{"type": "file_search", "vector_store_ids": [store.id]}])
    assert fake.responses_requests[-1]["tools"][0]["vector_store_ids"] == [store.id]

    sent = len(fake.received)
    for call in (lambda: b.files.retrieve(upload.id), lambda: b.files.content(upload.id), lambda: b.files.delete(upload.id),
                 lambda: b.batches.retrieve(batch.id), lambda: b.files.content(done.output_file_id),
                 lambda: b.vector_stores.retrieve(store.id),
                 lambda: b.batches.create(input_file_id=upload.id, endpoint="/v1/chat/completions", completion_window="24h"),
                 lambda: b.vector_stores.create(name="mine now", file_ids=[upload.id]),
                 lambda: b.responses.create(model="gpt-4o", input="Read it.",
                                            tools=[{"type": "file_search", "vector_store_ids": [store.id]}]),
                 lambda: b.responses.create(model="gpt-4o", input=[{"role": "user", "content": [
                     {"type": "input_text", "text": "Summarize."}, {"type": "input_file", "file_id": upload.id}]}]),
                 lambda: b.chat.completions.create(model="gpt-4o", messages=[{"role": "user", "content": [
                     {"type": "text", "text": "Summarize."}, {"type": "file", "file": {"file_id": upload.id}}]}]),
                 lambda: b.files.list(), lambda: a.files.list(), lambda: a.batches.list()):  # listings: every tenant's
        assert refused(call) == "shared_provider_state"
    assert len(fake.received) == sent  # none of the refused reached the provider
    own = b.files.create(file=("mine.jsonl", JSONL), purpose="batch")  # metadata naming A's file as its output
    spoof = b.batches.create(input_file_id=own.id, endpoint="/v1/chat/completions", completion_window="24h",
                             metadata={"output_file_id": upload.id})
    assert b.batches.retrieve(spoof.id).metadata == {"output_file_id": upload.id}
    assert refused(lambda: b.files.content(upload.id)) == "shared_provider_state"
    a.files.delete(upload.id)
    assert upload.id not in fake.stored


def test_what_is_not_a_stored_id_is_not_checked_and_the_operator_reads_any(keyed, fake):
    proxy = keyed(policies=policies_off())
    a = client(proxy, make_key(proxy, tenant="a")[0])
    every = client(proxy, make_key(proxy, tenant="ops", tenants=["*"])[0])
    tool = {"type": "function", "function": {"name": "open_file", "description": "Open a file by id.", "parameters": {
        "type": "object", "properties": {"file_id": {"type": "string", "default": "file-of-the-schema"}}}}}
    r = a.chat.completions.create(model="gpt-4o", tools=[tool], metadata={"file_id": "my own label"},
                                  messages=[{"role": "user", "content": 'My notes say "file_id": "file-xyz".'}])
    assert r.choices[0].message is not None  # a schema, the client's metadata and text are not references
    theirs = every.files.create(file=("ops.jsonl", JSONL), purpose="batch")
    assert every.files.retrieve(theirs.id).id == theirs.id
    assert refused(lambda: a.files.retrieve(theirs.id)) == "shared_provider_state"



def test_a_field_the_client_wrote_never_names_what_is_noted(tmp_path):
    """Only the answer's own top-level ids are noted: a batch whose metadata says `output_file_id` of
    another tenant's file, or an object whose metadata has an `id` before its own, notes nothing false."""
    owners = FileOwners(tmp_path)

    async def answer(watcher: NewObject, body: dict) -> None:  # in two chunks, as a relayed answer comes
        raw = json.dumps(body).encode()
        await watcher.see({"type": "http.response.start", "status": 200})
        await watcher.see({"type": "http.response.body", "body": raw[:40], "more_body": True})
        await watcher.see({"type": "http.response.body", "body": raw[40:], "more_body": False})

    async def scenario() -> list[str | None]:
        charge = SimpleNamespace(owners=owners, tenant="b", stored=True)
        await answer(BatchFiles(charge), {"metadata": {"output_file_id": "file-of-a"}, "id": "batch_b1", "status": "in_progress",
                                          "output_file_id": None, "error_file_id": "file-b-errors"})
        await answer(NewObject(charge), {"metadata": {"id": "vs_of_a"}, "id": "vs_b1", "object": "vector_store"})
        return [await owners.owner(i) for i in ("file-of-a", "file-b-errors", "vs_of_a", "vs_b1")]

    assert asyncio.run(scenario()) == [None, "b", None, "b"]
