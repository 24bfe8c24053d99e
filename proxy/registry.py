"""Find policy classes by name in the `ctxwarden.policies` entry point group.

The built-in policies are registered there by this distribution's pyproject.toml, exactly as a
third-party package registers its own, so the list of names lives in one place.
"""

from __future__ import annotations

from functools import lru_cache
from importlib.metadata import entry_points

from ctxwarden.policies.base import BasePolicy
from ctxwarden.policies.errors import CtxwardenError

ENTRY_POINT_GROUP = "ctxwarden.policies"


class UnknownPolicy(CtxwardenError, LookupError):
    pass


def policy_names() -> list[str]:
    """Every registered policy name, sorted."""
    return sorted({ep.name for ep in entry_points(group=ENTRY_POINT_GROUP)})


@lru_cache(maxsize=None)
def policy_class(name: str) -> type:
    """The policy class registered under `name`. It has `name`, `Config` and __init__(config, services)."""
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        if ep.name == name:
            cls = ep.load()
            if not (isinstance(cls, type) and issubclass(cls, BasePolicy)):
                raise UnknownPolicy(f"policy {name!r} ({ep.value}) is not a subclass of ctxwarden.policies.BasePolicy")
            return cls
    raise UnknownPolicy(f"unknown policy {name!r} (known: {', '.join(policy_names())})")
