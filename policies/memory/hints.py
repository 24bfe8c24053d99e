"""Whose memories a request reads and writes: the request's hints, read once.

    x-ctxwarden-user    whose memories apply (else the OpenAI `user` field); none → memory is skipped
    x-ctxwarden-task    the task inside the user's memories (none: the user's default task)
    x-ctxwarden-scope   private (default: only this task sees what the request writes) | shared (every task)
    x-ctxwarden-memory  off: neither write nor select for this request

The proxy collects every x-ctxwarden-* header into `Exchange.headers` (lower-case) and never
forwards them upstream; the OpenAI `user` field is the client's own and passes through.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..base import Exchange, user_and_task
from ..errors import HintError
from .config import SCOPES


@dataclass(frozen=True)
class Owner:
    """Where a request's memories live: tenant → user → task, and the scope it writes with."""

    tenant: str | None
    user: str
    task: str = ""
    scope: str = "private"


def check_scope(value: object, param: str = "x-ctxwarden-scope") -> str:
    if value not in SCOPES:
        raise HintError(f"{param} must be one of {', '.join(SCOPES)} (got {str(value)[:40]!r})", param)
    return str(value)


def owner_of(ex: Exchange) -> Owner | None:
    """The request's owner, or None when memory does not apply (no user, or memory: off)."""
    hints = ex.headers
    switch = hints.get("x-ctxwarden-memory")
    if switch is not None:
        switch = switch.strip().lower()
        if switch not in ("on", "off"):
            raise HintError(f"x-ctxwarden-memory must be on or off (got {switch[:40]!r})", "x-ctxwarden-memory")
        if switch == "off":
            return None
    user, task = user_and_task(ex)  # the archive reads the same (policies/base.py)
    if not user:
        return None
    scope = check_scope(hints.get("x-ctxwarden-scope", "private").strip().lower())
    return Owner(ex.tenant, user, task, scope)
