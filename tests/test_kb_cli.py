"""`ctxwarden kb` while the server runs: the command goes through the server's admin API (a second
process writing an embedded store breaks it); store failures are never silent."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import httpx
import pytest
import yaml

from ctxwarden.policies.poisoning.kbstore import KBStorage
from ctxwarden.proxy.config import StorageConfig
from ctxwarden.proxy.local_server import free_port
from ctxwarden.proxy.storage import ChromaStore
from tests.conftest import openai_client, policies_off

ADMIN_KEY = "kb-cli-admin-key"
FACTS = [{"id": "eiffel", "text": "The Eiffel Tower is located in Paris."}]


def cli(*args: str, key: str | None = ADMIN_KEY) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "CTXWARDEN_ADMIN_KEY"}
    if key:
        env["CTXWARDEN_ADMIN_KEY"] = key
    return subprocess.run([sys.executable, "-c", "from ctxwarden.proxy.cli import main; raise SystemExit(main())", *args],
                          capture_output=True, text=True, env=env, timeout=120)


@pytest.fixture
def proxy(start_proxy, monkeypatch):
    monkeypatch.setenv("CTXWARDEN_ADMIN_KEY", ADMIN_KEY)
    return start_proxy({"policies": policies_off("poisoning")})


def write_config(tmp_path, port: int) -> str:
    path = tmp_path / "ctxwarden.yaml"
    path.write_text(yaml.safe_dump({"server": {"host": "127.0.0.1", "port": port},
                                    "storage": {"path": str(tmp_path / "store")}}))
    return str(path)


def ask_eiffel(fake, proxy):
    fake.reply(content="The Eiffel Tower is located in London.")
    raw = openai_client(proxy).chat.completions.with_raw_response.create(
        model="gpt-4o", messages=[{"role": "user", "content": "Where is the Eiffel Tower?"}])
    return raw.parse().choices[0].finish_reason, raw.headers.get("x-ctxwarden-actions", "")


def test_kb_commands_go_through_the_running_server(fake, proxy, tmp_path):
    config = write_config(tmp_path, proxy.port)  # the server's own port and store
    facts = tmp_path / "facts.jsonl"
    facts.write_text("\n".join(json.dumps(d) for d in FACTS))
    assert ask_eiffel(fake, proxy)[0] == "stop"  # the server has its store open (and an empty KB)

    added = cli("kb", "add", str(facts), "--config", config)
    assert added.returncode == 0, added.stderr
    assert f"via http://127.0.0.1:{proxy.port}" in added.stdout
    finish, actions = ask_eiffel(fake, proxy)  # seen at once, no restart, no store error
    assert finish == "content_filter" and "poisoning.unavailable" not in actions

    listed = cli("kb", "list", "--json", "--config", config)
    assert [json.loads(line)["id"] for line in listed.stdout.splitlines()] == ["eiffel"]
    assert cli("kb", "delete", "eiffel", "--config", config).returncode == 0
    gone = cli("kb", "delete", "eiffel", "--config", config)
    assert gone.returncode == 1 and "no document" in gone.stderr
    assert ask_eiffel(fake, proxy)[0] == "stop"
    assert httpx.get(f"{proxy.url}/readyz").json().get("store") in ("ok", None)


def test_without_the_admin_key_the_command_refuses_instead_of_writing_the_store(fake, proxy, tmp_path):
    config = write_config(tmp_path, proxy.port)
    facts = tmp_path / "facts.json"
    facts.write_text(json.dumps(FACTS))
    refused = cli("kb", "add", str(facts), "--config", config, key=None)
    assert refused.returncode == 1
    assert "CTXWARDEN_ADMIN_KEY" in refused.stderr and "running" in refused.stderr
    assert ask_eiffel(fake, proxy)[0] == "stop"  # nothing was written behind the server's back


def test_with_no_server_the_command_uses_the_store_and_says_so(tmp_path):
    config = write_config(tmp_path, free_port())  # nothing listens there
    facts = tmp_path / "facts.yaml"
    facts.write_text(yaml.safe_dump(FACTS))
    added = cli("kb", "add", str(facts), "--config", config)
    assert added.returncode == 0, added.stderr
    assert "no ctxwarden server answers" in added.stderr and "using the store directly" in added.stderr
    listed = cli("kb", "list", "--json", "--direct", "--config", config)
    assert [json.loads(line)["id"] for line in listed.stdout.splitlines()] == ["eiffel"]
    missing = cli("kb", "list", "--server", f"127.0.0.1:{free_port()}", "--config", config)
    assert missing.returncode == 1 and "no ctxwarden server answers" in missing.stderr  # an explicit --server


class KBUnreadable(Exception):
    """What Chroma raises for a damaged index, by name (InternalError)."""


def test_an_unreadable_kb_is_reported_in_actions_and_metrics_not_silently_skipped(fake, proxy, monkeypatch):
    def broken(self, *args, **kwargs):
        raise KBUnreadable("InternalError: Failed to apply logs to the hnsw segment writer")

    monkeypatch.setattr(KBStorage, "read", broken)
    monkeypatch.setattr(KBStorage, "stamp", broken)
    finish, actions = ask_eiffel(fake, proxy)
    assert finish == "stop" and "poisoning.unavailable" in actions.split(",")
    fake.reply(content="The Eiffel Tower is located in London. It is tall.")
    chunks = list(openai_client(proxy).chat.completions.create(
        model="gpt-4o", messages=[{"role": "user", "content": "Where?"}], stream=True))
    assert chunks
    metrics = httpx.get(f"{proxy.url}/metrics").text
    errors = [line for line in metrics.splitlines() if line.startswith("ctxwarden_store_errors")]
    assert errors and 'component="poisoning.kb"' in errors[0]
    assert sum(float(line.rsplit(" ", 1)[1]) for line in errors) >= 2  # the answer and the stream


def test_chroma_store_health_follows_its_last_call(tmp_path):
    store = ChromaStore(StorageConfig(path=str(tmp_path / "store")))
    col = store.collection("kb", "acme")
    assert store.healthy() and store.heartbeat()
    with pytest.raises(Exception):
        col.add(ids=["a"], embeddings=[[1.0, 0.0]], metadatas=[{"x": {"not": "scalar"}}])
    assert not store.healthy() and store.heartbeat()  # answers, but the last call failed
    assert store.status()["errors"] == 1 and "add" in store.status()["last_error"]
    col.count()
    assert store.healthy()


def test_a_large_add_reports_its_progress_batch_by_batch():
    import io

    from ctxwarden.policies.poisoning.kb import Document
    from ctxwarden.proxy.kb_cli import DOCS_PER_REQUEST, add_with_progress

    class Counting:
        def __init__(self) -> None:
            self.batches: list[int] = []

        def add(self, docs):
            self.batches.append(len(docs))
            return 2 * len(docs)

    kb, out = Counting(), io.StringIO()
    docs = [Document(f"d{i}", f"Fact number {i}.", {}) for i in range(DOCS_PER_REQUEST * 2 + 10)]
    assert add_with_progress(kb, docs, out) == 2 * len(docs)
    lines = out.getvalue().splitlines()
    assert kb.batches == [DOCS_PER_REQUEST, DOCS_PER_REQUEST, 10] and len(lines) == 3
    assert lines[-1].strip().startswith(f"{len(docs):,} / {len(docs):,} documents (100 %)")
    quiet = io.StringIO()
    add_with_progress(Counting(), docs[:3], quiet)
    assert quiet.getvalue() == ""  # one batch: nothing to report but the final line the command prints


def test_kb_add_of_a_large_file_prints_progress_through_the_server(fake, proxy, tmp_path):
    from ctxwarden.proxy.kb_cli import DOCS_PER_REQUEST

    n = DOCS_PER_REQUEST * 2 + 50
    docs = tmp_path / "many.jsonl"
    docs.write_text("".join(json.dumps({"id": f"d{i}", "text": f"Depot {i} is in city number {i % 37}."}) + "\n"
                            for i in range(n)))
    added = cli("kb", "add", str(docs), "--server", proxy.url, "--config", write_config(tmp_path, free_port()))
    assert added.returncode == 0, added.stderr
    progress = [line.strip() for line in added.stderr.splitlines() if "documents (" in line]
    assert [p.split(" documents")[0] for p in progress] == [
        f"{DOCS_PER_REQUEST:,} / {n:,}", f"{2 * DOCS_PER_REQUEST:,} / {n:,}", f"{n:,} / {n:,}"]
    assert progress[-1].startswith(f"{n:,} / {n:,} documents (100 %)") and f"added {n} document(s)" in added.stdout
    listed = httpx.get(f"{proxy.url}/admin/kb/documents", params={"limit": 1},
                       headers={"authorization": f"Bearer {ADMIN_KEY}"}).json()
    assert listed["total"] == n  # every batch reached the server's KB
