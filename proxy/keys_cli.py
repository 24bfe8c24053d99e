"""`ctxwarden keys create | list | revoke`: client keys, written straight to the key store.

The store is the one the server reads (`<storage.path>/client_keys.json`, or Redis when
`state.redis_url` is set, from `--config`), so a running server sees a new or revoked key within
a second without being asked. A new key is printed once; only its hash is kept.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from typing import Any

from .config import load_settings
from .keys.records import make_key
from .keys.store import open_store
from .keys.gate import open_usage


def add_keys_commands(subparsers: Any) -> None:
    keys = subparsers.add_parser("keys", help="client keys: who may use the proxy, as which tenant")
    sub = keys.add_subparsers(dest="keys_command", required=True)

    def common(p: argparse.ArgumentParser) -> argparse.ArgumentParser:
        p.add_argument("--config", help="YAML file merged over the embedded default (storage, state)")
        return p

    create = common(sub.add_parser("create", help="make a key; it is printed once"))
    create.add_argument("--tenant", required=True, help="the tenant its requests act as")
    create.add_argument("--name", default="", help="a label for the list")
    create.add_argument("--tenants", default="", help="other tenants it may name in x-ctxwarden-tenant (comma-separated; * for any)")
    create.add_argument("--user", help="pin x-ctxwarden-user (memories of this user only)")
    create.add_argument("--models", default="", help="models it may call, comma-separated globs (gpt-4o*,claude-*); default any")
    create.add_argument("--tokens-per-day", type=int, help="prompt + completion tokens per UTC day")
    create.add_argument("--rpm", type=int, help="requests per minute")
    create.set_defaults(func=_create)

    listing = common(sub.add_parser("list", help="every key (no secrets)"))
    listing.add_argument("--json", action="store_true")
    listing.set_defaults(func=_list)

    revoke = common(sub.add_parser("revoke", help="revoke a key by its id (key_…)"))
    revoke.add_argument("key_id")
    revoke.set_defaults(func=_revoke)


def _split(value: str) -> list[str]:
    return [v.strip() for v in value.split(",") if v.strip()]


def _store(args: argparse.Namespace):
    settings = load_settings(args.config)
    return settings, open_store(settings.storage.path, settings.state.redis_url)


def _create(args: argparse.Namespace) -> int:
    _, store = _store(args)
    try:
        secret, record = make_key(args.tenant, name=args.name, tenants=_split(args.tenants), user=args.user,
                                  models=_split(args.models), tokens_per_day=args.tokens_per_day,
                                  requests_per_minute=args.rpm)
    except ValueError as exc:
        print(f"ctxwarden keys create: {exc}", file=sys.stderr)
        return 1
    store.add(record)
    print(secret)
    print(f"{record.id} for tenant {record.tenant!r} (stored in {store.where}; the key is shown this once)", file=sys.stderr)
    return 0


def _list(args: argparse.Namespace) -> int:
    settings, store = _store(args)
    records = sorted(store.snapshot().values(), key=lambda r: r.created_at)
    usage = asyncio.run(open_usage(settings).report([r.id for r in records]))
    rows = [{**r.public(), "usage": usage.get(r.id)} for r in records]
    if args.json:
        print(json.dumps(rows, indent=1))
        return 0
    for row in rows:
        state = "revoked" if row["revoked_at"] else "active"
        used = row["usage"] or {}
        last = time.strftime("%Y-%m-%d %H:%M", time.gmtime(used["last_used"])) if used.get("last_used") else "-"
        print(f"{row['id']}  {state:7}  tenant={row['tenant']}  {row['hint']}  {row['name'] or ''}"
              f"  requests={used.get('requests', '-')} tokens={used.get('tokens', '-')} last={last}")
    if not rows:
        print(f"no client keys in {store.where}", file=sys.stderr)
    return 0


def _revoke(args: argparse.Namespace) -> int:
    _, store = _store(args)
    record = store.revoke(args.key_id)
    if record is None:
        print(f"ctxwarden keys revoke: no key {args.key_id!r} in {store.where}", file=sys.stderr)
        return 1
    print(f"{record.id} revoked", file=sys.stderr)
    return 0
