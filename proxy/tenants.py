"""Tenant names: what a valid one is, and the storage namespace each one gets.

A tenant comes from the client (`x-ctxwarden-tenant`) or the admin API (`tenant`). It must be
1-128 printable characters (no control characters, no newlines). Storage names are injective:
a readable slug of the name plus a hash of the exact name, so "acme", "acme." and "acme!" get
three different Chroma collections (Chroma names allow only [a-zA-Z0-9._-], 3-512 characters).
"""

from __future__ import annotations

import hashlib
import re

from ctxwarden.policies.errors import CtxwardenError

MAX_TENANT_LENGTH = 128
SLUG_LENGTH = 40  # the readable part of a storage name; the hash tells names apart
HASH_LENGTH = 16  # hex digits of sha256(tenant): 64 bits


class TenantError(CtxwardenError, ValueError):
    """An invalid tenant name; the message names it and says why (an HTTP 400)."""

    def __init__(self, message: str, param: str = "x-ctxwarden-tenant") -> None:
        super().__init__(message)
        self.param = param


def check_tenant(name: str, param: str = "x-ctxwarden-tenant") -> str:
    """`name` unchanged when it is a valid tenant name; TenantError (saying which and why) if not."""
    if not isinstance(name, str):
        raise TenantError(f"{param}: the tenant must be a string, got {type(name).__name__}", param)
    if not name:
        raise TenantError(f"{param}: the tenant name is empty (omit it for the shared namespace)", param)
    if len(name) > MAX_TENANT_LENGTH:
        raise TenantError(f"{param}: the tenant name {name[:40]!r}… is {len(name)} characters long "
                          f"(at most {MAX_TENANT_LENGTH})", param)
    if not name.isprintable():
        raise TenantError(f"{param}: the tenant name {name!r} contains control or non-printable characters", param)
    return name


def tenant_slug(tenant: str) -> str:
    """A storage-safe, injective form of a tenant name: `<readable slug>_<hash of the exact name>`."""
    slug = re.sub(r"[^a-zA-Z0-9]+", "-", tenant)[:SLUG_LENGTH].strip("-") or "t"
    return f"{slug}_{hashlib.sha256(tenant.encode('utf-8')).hexdigest()[:HASH_LENGTH]}"
