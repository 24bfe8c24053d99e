"""`ctxwarden memory list|add|rm`: a user's memories on a running server, through /admin/memories.

    ctxwarden memory list --user alice [--task trip] [--query "hotel in Rome"] [--history] [--json]
    ctxwarden memory add  --user alice "I prefer aisle seats." [--kind preference] [--scope shared] [--task trip]
    ctxwarden memory rm   mem_0123abcd...        # one memory
    ctxwarden memory rm   --user alice --all     # every memory of alice (the right to be forgotten)

The server, its admin key and the tenant come as for `ctxwarden stats` / `ctxwarden kb`
(--config, --server, --tenant; the key from the variable the config names).
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from .admin_client import call_admin
from .config import ConfigError, load_settings

KINDS = ("preference", "fact", "instruction", "constraint")


def add_memory_commands(subparsers: Any) -> None:
    memory = subparsers.add_parser("memory", help="list, add or forget a user's memories on a running server")
    verbs = memory.add_subparsers(dest="verb", required=True)
    for name, help_ in (("list", "a user's memories"), ("add", "store a memory"), ("rm", "forget one memory, or all of a user's")):
        verb = verbs.add_parser(name, help=help_)
        verb.add_argument("--config", help="the server's config (its host, port and admin key variable)")
        verb.add_argument("--server", help="host:port or URL of the server (default: the config's)")
        verb.add_argument("--tenant", help="the tenant (default: the shared namespace)")
        verb.set_defaults(func=_run)
        if name == "list":
            verb.add_argument("--user", required=True)
            verb.add_argument("--task")
            verb.add_argument("--query", help="rank by relevance to this text, with scores")
            verb.add_argument("--history", action="store_true", help="superseded memories too")
            verb.add_argument("--json", action="store_true", help="the API's JSON")
        elif name == "add":
            verb.add_argument("--user", required=True)
            verb.add_argument("text")
            verb.add_argument("--kind", choices=KINDS)
            verb.add_argument("--scope", choices=("private", "shared"), default="private")
            verb.add_argument("--task")
        else:
            verb.add_argument("id", nargs="?")
            verb.add_argument("--user", help="with --all: forget every memory of this user")
            verb.add_argument("--all", action="store_true")


def _request(args: argparse.Namespace) -> tuple[str, str, dict[str, Any]]:
    if args.verb == "list":
        params = {"user": args.user, **({"task": args.task} if args.task else {}), **({"q": args.query} if args.query else {}),
                  **({"history": "true"} if args.history else {})}
        return "GET", "/admin/memories", {"params": params}
    if args.verb == "add":
        body = {"user": args.user, "text": args.text, "scope": args.scope, **({"kind": args.kind} if args.kind else {}),
                **({"task": args.task} if args.task else {})}
        return "POST", "/admin/memories", {"json": body}
    if args.all and args.user and not args.id:
        return "DELETE", "/admin/memories", {"params": {"user": args.user}}
    if args.id and not args.all:
        return "DELETE", f"/admin/memories/{args.id}", {}
    raise ValueError("rm takes a memory id, or --user U --all")


def _run(args: argparse.Namespace) -> int:
    try:
        settings = load_settings(args.config)
        method, path, extra = _request(args)
    except (ConfigError, ValueError) as exc:
        print(f"ctxwarden memory: {exc}", file=sys.stderr)
        return 2
    tenant = {"x-ctxwarden-tenant": args.tenant} if args.tenant else {}
    code, data, _ = call_admin("memory", settings, args.server, method, path, headers=tenant, **extra)
    if code:
        return code
    print(render(args, data))
    return 0


def render(args: argparse.Namespace, data: dict[str, Any]) -> str:
    if args.verb == "list" and not args.json:
        rows = data.get("data", [])
        lines = [f"{len(rows)} memories of {args.user}" + (f" (task {args.task})" if args.task else "")]
        for m in rows:
            score = f" {m['score']:.2f}" if "score" in m else ""
            old = f"  [superseded by {m['superseded_by']}]" if m.get("superseded_by") else ""
            lines.append(f"  {m['id']}{score}  {m['kind']:<11} {m['scope']:<7} {m['text']}{old}")
        return "\n".join(lines)
    if args.verb == "add":
        note = " (merged into an existing memory)" if data.get("merged") else ""
        superseded = f"; supersedes {', '.join(data['superseded'])}" if data.get("superseded") else ""
        return f"{data['id']}  {data['kind']}  {data['text']}{note}{superseded}"
    if args.verb == "rm":
        return f"forgot {data['deleted']} memories of {data['user']}" if "user" in data else f"forgot {data['id']}"
    return json.dumps(data, indent=2, ensure_ascii=False)
