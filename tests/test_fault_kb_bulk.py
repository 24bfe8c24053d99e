"""Issue 43, fault 4: `ctxwarden kb add` of ~1,000 documents while the server answers. No answer may
pass unchecked while readiness says all is well: every contradicting answer is blocked, or, if its
check could not run, its `x-ctxwarden-actions` says `poisoning.unavailable` and `/readyz` said so at
that time (503, `"kb": "unavailable"`).

The fault's path is the embedded store written by the CLI's own process (`--direct`, or no server
answering at the CLI's configured address): the server's copy of Chroma's vector index does not see
the vectors another process writes, so reading them failed ("Error finding id"), the check passed
the answer and, after that, the server kept judging by the index it had. Through the admin API (the
server writes) is checked the same way."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time

import httpx
import pytest
import yaml

from ctxwarden.proxy.processes import start_replica
from tests.conftest import openai_client, policies_off

ADMIN_KEY = "kb-bulk-admin-key"
AUTH = {"authorization": f"Bearer {ADMIN_KEY}"}
DOCS = 1_000
LOOPS = 2  # clients sending contradicting answers while the add runs
HQ_QUESTION = "Where is Acme's head office?"
HQ_WRONG = "Acme's head office is in Berlin."


def bulk_document(i: int) -> dict:
    return {"id": f"company-{i}", "text": f"Company {i} has its head office in Town{i}. It was founded in {1800 + i % 200}."}


def ask(fake, url: str, question: str, answer: str) -> httpx.Response:
    fake.reply(content=answer)
    r = httpx.post(f"{url}/v1/chat/completions", json={"model": "gpt-4o", "messages": [{"role": "user", "content": question}]},
                   timeout=60)
    assert r.status_code == 200, r.text
    return r


def verdict(r: httpx.Response) -> tuple[str, list[str]]:
    return r.json()["choices"][0]["finish_reason"], [a for a in r.headers["x-ctxwarden-actions"].split(",") if a]


@pytest.mark.parametrize("path", ["direct", "admin_api"])
def test_contradicting_answers_stay_blocked_while_a_bulk_add_runs(fake, tmp_path, path):
    config = {"upstream": {"base_url": f"{fake.url}/v1", "api_key_env": None, "retries": 0},
              "storage": {"path": str(tmp_path / "store")}, "policies": policies_off("poisoning")}
    server = start_replica(tmp_path, config, env={"CTXWARDEN_ADMIN_KEY": ADMIN_KEY})
    try:
        r = httpx.post(f"{server.url}/admin/kb/documents", headers=AUTH,
                       json={"documents": [{"id": "hq", "text": "Acme's head office is in Mumbai."}]})
        assert r.status_code == 200, r.text
        assert verdict(ask(fake, server.url, HQ_QUESTION, HQ_WRONG))[0] == "content_filter"  # the index is loaded

        docs = tmp_path / "docs.jsonl"
        docs.write_text("\n".join(json.dumps(bulk_document(i)) for i in range(DOCS)))
        cli_config = tmp_path / "cli.yaml"
        cli_config.write_text(yaml.safe_dump({"storage": {"path": str(tmp_path / "store")},
                                              "server": {"host": "127.0.0.1", "port": server.port}}))
        args = [sys.executable, "-m", "ctxwarden.proxy.cli", "kb", "add", str(docs), "--config", str(cli_config)]
        cli = subprocess.Popen(args + (["--direct"] if path == "direct" else []), stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True, env={**os.environ, "CTXWARDEN_ADMIN_KEY": ADMIN_KEY})
        seen: list[tuple[str, list[str], int, dict]] = []  # finish_reason, actions, /readyz status and body right after

        def contradict() -> None:
            while cli.poll() is None:
                finish, actions = verdict(ask(fake, server.url, HQ_QUESTION, HQ_WRONG))
                ready = httpx.get(f"{server.url}/readyz", timeout=30)
                seen.append((finish, actions, ready.status_code, ready.json()))

        clients = [threading.Thread(target=contradict) for _ in range(LOOPS)]
        for client in clients:
            client.start()
        out, _ = cli.communicate(timeout=120)
        for client in clients:
            client.join(timeout=60)
        assert cli.returncode == 0 and f"added {DOCS} document(s)" in out, out

        blocked = sum(1 for finish, actions, _, _ in seen if finish == "content_filter" and "poisoning.blocked" in actions)
        unchecked = [s for s in seen if s[0] != "content_filter"]
        print(f"{path}: {blocked} of {len(seen)} contradicting answers blocked during the add, "
              f"{len(unchecked)} not checked")
        assert len(seen) >= 4, "too few answers during the add to tell anything"
        for finish, actions, status, body in unchecked:  # only an answer that says it was not checked ...
            assert "poisoning.unavailable" in actions, (finish, actions)
            assert status == 503 and body.get("kb") == "unavailable", body  # ... while readiness said so

        # Afterwards: the new documents judge answers (within about a second), and readiness is clean.
        started = time.monotonic()
        while True:
            finish, actions = verdict(ask(fake, server.url, "Where is the head office of Company 777?",
                                          "Company 777 has its head office in Town12."))
            assert "poisoning.unavailable" not in actions, actions
            if finish == "content_filter":
                break
            assert time.monotonic() - started < 1.5, "a document of the bulk add was not used to judge after 1.5 s"
            time.sleep(0.05)
        ready = httpx.get(f"{server.url}/readyz")
        assert ready.status_code == 200 and ready.json()["kb"] == "ok", ready.json()
        assert verdict(ask(fake, server.url, HQ_QUESTION, HQ_WRONG))[0] == "content_filter"
    finally:
        server.stop()


def test_a_knowledge_base_that_cannot_be_read_says_so_in_the_answer_and_in_readyz(fake, start_proxy, monkeypatch):
    """The check cannot run (the store fails on read): the answer says poisoning.unavailable, /readyz is 503
    with "kb": "unavailable" until a read succeeds again (the probe itself tries again), and the answer is
    never judged by the index loaded before the failure."""
    monkeypatch.setenv("CTXWARDEN_ADMIN_KEY", ADMIN_KEY)
    proxy = start_proxy({"policies": policies_off("poisoning")})
    r = httpx.post(f"{proxy.url}/admin/kb/documents", headers=AUTH,
                   json={"documents": [{"id": "hq", "text": "Acme's head office is in Mumbai."}]})
    assert r.status_code == 200, r.text
    client = openai_client(proxy)

    def answer() -> tuple[str, list[str]]:
        fake.reply(content=HQ_WRONG)
        raw = client.chat.completions.with_raw_response.create(
            model="gpt-4o", messages=[{"role": "user", "content": HQ_QUESTION}])
        return raw.parse().choices[0].finish_reason, raw.headers["x-ctxwarden-actions"].split(",")

    assert answer()[0] == "content_filter"
    assert httpx.get(f"{proxy.url}/readyz").json()["kb"] == "ok"

    policy = next(p for p in proxy.app.state.pipeline.policies if p.name == "poisoning")
    kb = policy.kb(None)

    def broken(*args, **kwargs):
        raise RuntimeError("the store cannot be read")

    with monkeypatch.context() as patched:
        patched.setattr(kb.storage, "read", broken)
        kb.versions.publish("kb:")  # another writer changed the KB: the next check must reload, and cannot
        for _ in range(2):  # not once, then the old index again
            finish, actions = answer()
            assert finish == "stop" and "poisoning.unavailable" in actions, (finish, actions)
            ready = httpx.get(f"{proxy.url}/readyz")
            assert ready.status_code == 503 and ready.json()["kb"] == "unavailable", ready.json()
            assert "cannot be read" in ready.json()["kb_error"]

    # The store answers again: the probe finds it recovered, with no answer needed.
    ready = httpx.get(f"{proxy.url}/readyz")
    assert ready.status_code == 200 and ready.json()["kb"] == "ok", ready.json()
    assert answer() == ("content_filter", ["poisoning.blocked"])
