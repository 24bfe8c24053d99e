"""Commands that talk to a running server's admin API (`ctxwarden stats`, `ctxwarden memory`): one
way to find the server and the key, and to say plainly what went wrong."""

from __future__ import annotations

import os
import sys
from typing import Any

import httpx

from .config import Settings, server_url


def call_admin(command: str, settings: Settings, server: str | None, method: str, path: str,
               headers: dict[str, str] | None = None, timeout: float = 60, **request: Any) -> tuple[int, Any, str]:
    """(exit code, the answer's JSON, the server's URL). 0 when it answered 200; 2 without the admin
    key; 1 when no server answers or it refuses. Errors are printed on stderr, prefixed `command`."""
    url = server_url(server, settings)
    key = os.environ.get(settings.admin.api_key_env or "", "")
    if not key:
        print(f"ctxwarden {command}: set {settings.admin.api_key_env} to the server's admin key", file=sys.stderr)
        return 2, None, url
    try:
        response = httpx.request(method, f"{url}{path}", headers={"authorization": f"Bearer {key}", **(headers or {})},
                                 timeout=timeout, **request)
    except httpx.HTTPError as exc:
        print(f"ctxwarden {command}: no ctxwarden server answers at {url} ({type(exc).__name__})", file=sys.stderr)
        return 1, None, url
    if response.status_code != 200:
        print(f"ctxwarden {command}: {url} answered {response.status_code}: {response.text[:300]}", file=sys.stderr)
        return 1, None, url
    return 0, response.json(), url
