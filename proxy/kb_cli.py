"""`ctxwarden kb add FILE | list | delete ID`: manage the poisoning policy's knowledge base.

FILE is JSONL (one {"id", "text", "metadata"?} per line), YAML or JSON (a list of documents,
or {"documents": [...]}). Re-adding an id replaces the document.

Where the command writes: through the running server's admin API when one answers (`--server
URL`, default: the configured server.host:port), with the admin key from the variable
`admin.api_key_env` names (CTXWARDEN_ADMIN_KEY): the server embeds the passages once and uses them
at once. A second process writing an embedded store the server has open is safe for the server's
readers (it sees the change signal within about half a second), but the server cannot read the
vectors that process wrote and embeds those passages again. Only when no server answers does the
command open the store itself (`storage` and `embeddings` from `--config`), and it says so;
`--direct` asks for that explicitly.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
import yaml

from ctxwarden.policies.errors import CtxwardenError
from ctxwarden.policies.poisoning.kb import Document, DocumentError, KnowledgeBase, parse_documents

from .config import Settings, load_settings, server_url
from .embeddings import build_embedder
from .storage import ChromaStore

PROBE_TIMEOUT_S = 2.0
DOCS_PER_REQUEST = 200


class KBCommandError(CtxwardenError):
    """Printed as `ctxwarden kb <command>: <message>`, exit status 1."""


def add_kb_commands(subparsers: Any) -> None:
    kb = subparsers.add_parser("kb", help="manage the knowledge base answers are checked against")
    kb_sub = kb.add_subparsers(dest="kb_command", required=True)

    def common(p: argparse.ArgumentParser) -> argparse.ArgumentParser:
        p.add_argument("--config", help="YAML file merged over the embedded default (server, storage, embeddings)")
        p.add_argument("--tenant", help="the tenant namespace (x-ctxwarden-tenant); default: the shared one")
        p.add_argument("--server", help="the running proxy to go through (default: the configured server.host:port)")
        p.add_argument("--direct", action="store_true",
                       help="write the store directly, without asking a server (only while no server uses it)")
        return p

    add = common(kb_sub.add_parser("add", help="add or replace documents from a JSONL, YAML or JSON file"))
    add.add_argument("file")
    add.set_defaults(func=_add)

    listing = common(kb_sub.add_parser("list", help="list the documents"))
    listing.add_argument("--limit", type=int, default=100)
    listing.add_argument("--offset", type=int, default=0)
    listing.add_argument("--json", action="store_true", help="print JSON lines instead of a table")
    listing.set_defaults(func=_list)

    delete = common(kb_sub.add_parser("delete", help="delete a document by id"))
    delete.add_argument("id")
    delete.set_defaults(func=_delete)


def read_documents_file(path: str) -> list[Any]:
    """The raw document list of a JSONL, YAML or JSON file (validated by parse_documents)."""
    text = Path(path).read_text(encoding="utf-8")
    suffix = Path(path).suffix.lower()
    if suffix == ".jsonl":
        raw: Any = []
        for n, line in enumerate(text.splitlines(), 1):
            if line.strip():
                try:
                    raw.append(json.loads(line))
                except ValueError as exc:
                    raise DocumentError(f"{path}:{n}: not valid JSON: {exc}") from exc
    elif suffix == ".json":
        raw = json.loads(text)
    else:
        try:
            raw = yaml.safe_load(text)
        except yaml.YAMLError as exc:
            raise DocumentError(f"{path}: not valid YAML: {exc}") from exc
    if isinstance(raw, dict) and "documents" in raw:
        raw = raw["documents"]
    return raw


# ---------------------------------------------------------------------------- where to write


class ServerKB:
    """The knowledge base behind a running server's admin API (same methods as KnowledgeBase)."""

    def __init__(self, url: str, key: str, tenant: str | None) -> None:
        self.url = url.rstrip("/")
        self.tenant = tenant
        self.client = httpx.Client(headers={"authorization": f"Bearer {key}"}, timeout=300)

    def _call(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        params = {**kwargs.pop("params", {}), **({"tenant": self.tenant} if self.tenant else {})}
        try:
            response = self.client.request(method, f"{self.url}/admin/kb/documents{path}", params=params, **kwargs)
        except httpx.HTTPError as exc:
            raise KBCommandError(f"the server at {self.url} did not answer: {exc}") from exc
        if response.status_code >= 400 and response.status_code != 404:
            raise KBCommandError(f"the server at {self.url} answered {response.status_code}: {_message(response)}")
        return response

    def add(self, docs: list[Document]) -> int:
        passages = 0
        for start in range(0, len(docs), DOCS_PER_REQUEST):
            batch = [d.as_dict() for d in docs[start : start + DOCS_PER_REQUEST]]
            response = self._call("POST", "", json={"documents": batch})
            if response.status_code == 404:
                raise KBCommandError(f"{self.url} has no knowledge-base admin API (is the poisoning policy on?)")
            passages += int(response.json().get("passages", 0))
        return passages

    def documents(self, limit: int, offset: int) -> tuple[list[Document], int]:
        response = self._call("GET", "", params={"limit": limit, "offset": offset})
        if response.status_code == 404:
            raise KBCommandError(f"{self.url} has no knowledge-base admin API (is the poisoning policy on?)")
        data = response.json()
        return [Document(d["id"], d["text"], d.get("metadata") or {}) for d in data["data"]], int(data["total"])

    def delete(self, doc_id: str) -> bool:
        return self._call("DELETE", f"/{quote(doc_id, safe='')}").status_code != 404


def _message(response: httpx.Response) -> str:
    try:
        return str(response.json()["error"]["message"])
    except (ValueError, KeyError, TypeError):
        return response.text[:200]


def _server_url(args: argparse.Namespace, settings: Settings) -> str:
    return server_url(args.server, settings)


def _answers(url: str) -> bool:
    """Is a ctxwarden server listening at `url`? (Its /healthz answers JSON with a status.)"""
    try:
        response = httpx.get(f"{url.rstrip('/')}/healthz", timeout=PROBE_TIMEOUT_S)
        return "status" in response.json()
    except (httpx.HTTPError, ValueError, TypeError):
        return False


def knowledge_base(args: argparse.Namespace) -> KnowledgeBase | ServerKB:
    """The running server's KB when one answers; else the store, opened here (said on stderr)."""
    settings = load_settings(args.config)
    if not args.direct:
        url = _server_url(args, settings)
        if _answers(url):
            key_env = settings.admin.api_key_env
            key = os.environ.get(key_env or "")
            if not key:
                raise KBCommandError(
                    f"a ctxwarden server is running at {url}: set {key_env} to its admin key to go through it "
                    "(or --direct to write its store from here; the server then embeds the new passages again)")
            return ServerKB(url, key, args.tenant)
        if args.server:
            raise KBCommandError(f"no ctxwarden server answers at {url}")
        print(f"no ctxwarden server answers at {url}: using the store directly "
              f"({settings.storage.chroma_url or settings.storage.path})", file=sys.stderr)
    return KnowledgeBase(ChromaStore(settings.storage), build_embedder(settings.embeddings), args.tenant)


def _run(command: str, body: Any) -> int:
    try:
        return body()
    except KBCommandError as exc:
        print(f"ctxwarden kb {command}: {exc}", file=sys.stderr)
        return 1


def add_with_progress(kb: Any, docs: list[Document], out: Any = None) -> int:
    """kb.add in batches, a progress line on stderr after each when there is more than one (10,000
    documents take seconds: say how far along it is rather than nothing)."""
    out = out or sys.stderr
    passages, started = 0, time.monotonic()
    for start in range(0, len(docs), DOCS_PER_REQUEST):
        passages += kb.add(docs[start : start + DOCS_PER_REQUEST])
        done = min(start + DOCS_PER_REQUEST, len(docs))
        if len(docs) > DOCS_PER_REQUEST:
            print(f"  {done:,} / {len(docs):,} documents ({done * 100 // len(docs)} %), {passages:,} passages, "
                  f"{time.monotonic() - started:.1f} s", file=out, flush=True)
    return passages


def _add(args: argparse.Namespace) -> int:
    try:
        docs = parse_documents(read_documents_file(args.file))
    except (OSError, ValueError) as exc:  # DocumentError and JSON errors are ValueErrors
        print(f"ctxwarden kb add: {exc}", file=sys.stderr)
        return 1

    def body() -> int:
        kb = knowledge_base(args)
        passages = add_with_progress(kb, docs)
        via = f" via {kb.url}" if isinstance(kb, ServerKB) else ""
        print(f"added {len(docs)} document(s), {passages} passage(s) from {args.file}{via}")
        return 0
    return _run("add", body)


def _list(args: argparse.Namespace) -> int:
    def body() -> int:
        docs, total = knowledge_base(args).documents(args.limit, args.offset)
        for doc in docs:
            if args.json:
                print(json.dumps(doc.as_dict(), ensure_ascii=False))
            else:
                text = " ".join(doc.text.split())
                print(f"{doc.id}\t{text[:100] + ('…' if len(text) > 100 else '')}")
        if not args.json:
            print(f"({len(docs)} of {total} document(s))", file=sys.stderr)
        return 0
    return _run("list", body)


def _delete(args: argparse.Namespace) -> int:
    def body() -> int:
        if knowledge_base(args).delete(args.id):
            print(f"deleted {args.id}")
            return 0
        print(f"ctxwarden kb delete: no document with id {args.id!r}", file=sys.stderr)
        return 1
    return _run("delete", body)
