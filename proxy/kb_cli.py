"""`ctxwarden kb add FILE | list | delete ID`: manage the poisoning policy's knowledge base.

FILE is JSONL (one {"id", "text", "metadata"?} per line), YAML or JSON (a list of documents,
or {"documents": [...]}). Re-adding an id replaces the document. The store and the embedder
come from the configuration (`--config`), so the server sees what the command wrote.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import yaml

from ctxwarden.policies.poisoning.kb import DocumentError, KnowledgeBase, parse_documents

from .config import load_settings
from .embeddings import build_embedder
from .storage import ChromaStore


def add_kb_commands(subparsers: Any) -> None:
    kb = subparsers.add_parser("kb", help="manage the knowledge base answers are checked against")
    kb_sub = kb.add_subparsers(dest="kb_command", required=True)

    def common(p: argparse.ArgumentParser) -> argparse.ArgumentParser:
        p.add_argument("--config", help="YAML file merged over the embedded default (for storage and embeddings)")
        p.add_argument("--tenant", help="the tenant namespace (x-ctxwarden-tenant); default: the shared one")
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


def _knowledge_base(args: argparse.Namespace) -> KnowledgeBase:
    settings = load_settings(args.config)
    return KnowledgeBase(ChromaStore(settings.storage), build_embedder(settings.embeddings), args.tenant)


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


def _add(args: argparse.Namespace) -> int:
    try:
        docs = parse_documents(read_documents_file(args.file))
    except (OSError, ValueError) as exc:  # DocumentError and JSON errors are ValueErrors
        print(f"ctxwarden kb add: {exc}", file=sys.stderr)
        return 1
    passages = _knowledge_base(args).add(docs)
    print(f"added {len(docs)} document(s), {passages} passage(s) from {args.file}")
    return 0


def _list(args: argparse.Namespace) -> int:
    docs, total = _knowledge_base(args).documents(args.limit, args.offset)
    for doc in docs:
        if args.json:
            print(json.dumps(doc.as_dict(), ensure_ascii=False))
        else:
            text = " ".join(doc.text.split())
            print(f"{doc.id}\t{text[:100] + ('…' if len(text) > 100 else '')}")
    if not args.json:
        print(f"({len(docs)} of {total} document(s))", file=sys.stderr)
    return 0


def _delete(args: argparse.Namespace) -> int:
    if _knowledge_base(args).delete(args.id):
        print(f"deleted {args.id}")
        return 0
    print(f"ctxwarden kb delete: no document with id {args.id!r}", file=sys.stderr)
    return 1
