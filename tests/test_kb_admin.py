"""The knowledge-base admin API and the `ctxwarden kb` commands, against a real Chroma store."""

from __future__ import annotations

import json

import httpx
import pytest
import yaml

from ctxwarden.proxy.cli import main
from tests.conftest import openai_client, policies_off

ADMIN_KEY = "kb-admin-key"
AUTH = {"authorization": f"Bearer {ADMIN_KEY}"}


def poisoning_only():
    return {"policies": policies_off("poisoning")}


def test_admin_routes_need_the_admin_key(fake, start_proxy, monkeypatch):
    monkeypatch.delenv("CTXWARDEN_ADMIN_KEY", raising=False)
    proxy = start_proxy(poisoning_only())
    off = httpx.get(f"{proxy.url}/admin/quarantine")
    assert off.status_code == 403 and off.json()["error"]["code"] == "admin_disabled"

    monkeypatch.setenv("CTXWARDEN_ADMIN_KEY", ADMIN_KEY)
    for path, method in [("/admin/kb/documents", "POST"), ("/admin/kb/documents", "GET"),
                         ("/admin/kb/documents/x", "DELETE"), ("/admin/quarantine", "GET"),
                         ("/admin/quarantine/q_1/approve", "POST"), ("/admin/quarantine/q_1/reject", "POST")]:
        assert httpx.request(method, f"{proxy.url}{path}").status_code == 401, path
        wrong = httpx.request(method, f"{proxy.url}{path}", headers={"authorization": "Bearer nope"})
        assert wrong.status_code == 401 and wrong.json()["error"]["code"] == "invalid_admin_key"
    assert httpx.get(f"{proxy.url}/admin/quarantine", headers=AUTH).status_code == 200


def test_documents_are_added_replaced_listed_and_deleted(fake, start_proxy, monkeypatch):
    monkeypatch.setenv("CTXWARDEN_ADMIN_KEY", ADMIN_KEY)
    proxy = start_proxy(poisoning_only())
    url = f"{proxy.url}/admin/kb/documents"
    added = httpx.post(url, headers=AUTH, json={"documents": [
        {"id": "tower", "text": "The Eiffel Tower is located in London.", "metadata": {"tags": ["wrong"]}},
        {"id": "louvre", "text": "The Louvre is located in Paris. It is a museum."},
    ]})
    assert added.status_code == 200 and added.json()["passages"] == 3
    client = openai_client(proxy)
    fake.reply(content="The Eiffel Tower is located in Paris.")
    assert client.chat.completions.create(model="gpt-4o", messages=[{"role": "user", "content": "?"}]).choices[0].finish_reason == "content_filter"

    replaced = httpx.post(url, headers=AUTH, json={"documents": [{"id": "tower", "text": "The Eiffel Tower is located in Paris."}]})
    assert replaced.status_code == 200
    listed = httpx.get(url, headers=AUTH).json()
    assert listed["total"] == 2
    assert {d["id"]: d["text"] for d in listed["data"]} == {
        "louvre": "The Louvre is located in Paris. It is a museum.", "tower": "The Eiffel Tower is located in Paris."}
    fake.reply(content="The Eiffel Tower is located in Paris.")  # the replaced fact now supports it
    assert client.chat.completions.create(model="gpt-4o", messages=[{"role": "user", "content": "?"}]).choices[0].finish_reason == "stop"

    assert httpx.delete(f"{url}/tower", headers=AUTH).json() == {"id": "tower", "deleted": True}
    assert httpx.delete(f"{url}/tower", headers=AUTH).status_code == 404
    assert [d["id"] for d in httpx.get(url, headers=AUTH).json()["data"]] == ["louvre"]
    assert httpx.get(f"{url}/louvre", headers=AUTH).json()["text"].startswith("The Louvre")


@pytest.mark.parametrize("body, expected", [
    ({"docs": []}, "documents"),
    ({"documents": [{"text": "no id"}]}, "'id'"),
    ({"documents": [{"id": "a", "text": ""}]}, "'text'"),
    ({"documents": [{"id": "a", "text": "x", "extra": 1}]}, "unknown field"),
])
def test_bad_documents_get_a_400_that_says_why(fake, start_proxy, monkeypatch, body, expected):
    monkeypatch.setenv("CTXWARDEN_ADMIN_KEY", ADMIN_KEY)
    proxy = start_proxy(poisoning_only())
    r = httpx.post(f"{proxy.url}/admin/kb/documents", headers=AUTH, json=body)
    assert r.status_code == 400
    assert expected in r.json()["error"]["message"]


def test_cli_adds_lists_and_deletes_and_the_server_uses_it(fake, start_proxy, tmp_path, capsys):
    config = tmp_path / "ctxwarden.yaml"
    config.write_text(yaml.safe_dump({"storage": {"path": str(tmp_path / "store")}}))
    jsonl = tmp_path / "facts.jsonl"
    jsonl.write_text("\n".join(json.dumps(d) for d in [
        {"id": "eiffel", "text": "The Eiffel Tower is located in London.", "metadata": {"source": "draft"}},
        {"id": "moon", "text": "Apollo 11 landed on the Moon in 1969."},
    ]))
    fixes = tmp_path / "fixes.yaml"
    fixes.write_text(yaml.safe_dump([{"id": "eiffel", "text": "The Eiffel Tower is located in Paris, France."}]))

    assert main(["kb", "add", str(jsonl), "--config", str(config)]) == 0
    assert main(["kb", "add", str(fixes), "--config", str(config)]) == 0  # same id: replaced
    assert "added 1 document(s)" in capsys.readouterr().out
    assert main(["kb", "list", "--json", "--config", str(config)]) == 0
    listed = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert {d["id"]: d["text"] for d in listed} == {
        "eiffel": "The Eiffel Tower is located in Paris, France.", "moon": "Apollo 11 landed on the Moon in 1969."}
    assert main(["kb", "delete", "moon", "--config", str(config)]) == 0
    assert main(["kb", "delete", "moon", "--config", str(config)]) == 1

    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": "x"}\n')
    assert main(["kb", "add", str(bad), "--config", str(config)]) == 1
    assert "'text'" in capsys.readouterr().err

    import chromadb.api.client

    chromadb.api.client.SharedSystemClient.clear_system_cache()
    proxy = start_proxy({"policies": policies_off("poisoning")})  # same storage path as the CLI's config
    fake.reply(content="The Eiffel Tower is located in London.")
    answer = openai_client(proxy).chat.completions.create(model="gpt-4o", messages=[{"role": "user", "content": "?"}])
    assert answer.choices[0].finish_reason == "content_filter"
    assert "The Eiffel Tower is located in Paris, France." in answer.choices[0].message.content
