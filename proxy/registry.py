"""Find policy classes by name: the built-ins, then the `ctxwarden.policies` entry point group."""

from __future__ import annotations

import importlib
from functools import lru_cache
from importlib.metadata import entry_points

BUILTIN_POLICIES = {
    "loops": "policies.loops:LoopsPolicy",
    "poisoning": "policies.poisoning:PoisoningPolicy",
    "clash": "policies.clash:ClashPolicy",
    "history": "policies.history:HistoryPolicy",
    "archive": "policies.archive:ArchivePolicy",
    "tools": "policies.tools:ToolsPolicy",
}

ENTRY_POINT_GROUP = "ctxwarden.policies"


class UnknownPolicy(LookupError):
    pass


def _load(target: str) -> type:
    module, _, attr = target.partition(":")
    return getattr(importlib.import_module(module), attr)


@lru_cache(maxsize=None)
def policy_class(name: str) -> type:
    """The policy class registered under `name`. It has `name`, `Config` and __init__(config, services)."""
    if name in BUILTIN_POLICIES:
        return _load(BUILTIN_POLICIES[name])
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        if ep.name == name:
            return ep.load()
    known = sorted(set(BUILTIN_POLICIES) | {ep.name for ep in entry_points(group=ENTRY_POINT_GROUP)})
    raise UnknownPolicy(f"unknown policy {name!r} (known: {', '.join(known)})")
