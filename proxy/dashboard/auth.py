"""Who may see the dashboard: the admin key as `Authorization: Bearer <key>`, or the login cookie.

The cookie never holds the key itself, only an HMAC of a fixed string under it, so it stops
working when the key changes."""

from __future__ import annotations

import hashlib
import hmac
import os

from starlette.requests import Request

COOKIE = "ctxwarden_dashboard"
COOKIE_MAX_AGE_S = 12 * 3600


def admin_key(env_name: str | None) -> str | None:
    return os.environ.get(env_name or "") or None


def cookie_token(key: str) -> str:
    return hmac.new(key.encode(), b"ctxwarden dashboard session v1", hashlib.sha256).hexdigest()


def check(request: Request, key: str | None) -> str:
    """"ok", "disabled" (no admin key configured), "missing" (no credentials) or "wrong"."""
    if not key:
        return "disabled"
    header = request.headers.get("authorization")
    cookie = request.cookies.get(COOKIE)
    if header is not None:
        return "ok" if hmac.compare_digest(header.encode(), f"Bearer {key}".encode()) else "wrong"
    if cookie is not None:
        return "ok" if hmac.compare_digest(cookie.encode(), cookie_token(key).encode()) else "wrong"
    return "missing"


def key_matches(given: str, key: str | None) -> bool:
    return bool(key) and hmac.compare_digest(given.encode(), key.encode())  # type: ignore[union-attr]
