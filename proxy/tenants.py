"""Tenant names: what a valid one is, and the storage namespace each one gets.

A tenant comes from the client (`x-ctxwarden-tenant`) or the admin API (`tenant`). It must be
1-128 printable characters (no control characters, no newlines). Storage names are injective:
a readable slug of the name plus a hash of the exact name, so "acme", "acme." and "acme!" get
three different Chroma collections (Chroma names allow only [a-zA-Z0-9._-], 3-512 characters).
"""

from __future__ import annotations

import hashlib
import re

from ctxwarden.policies.errors import MAX_TENANT_LENGTH, TenantError, check_tenant  # noqa: F401 (the proxy's entry point)

SLUG_LENGTH = 40  # the readable part of a storage name; the hash tells names apart
HASH_LENGTH = 16  # hex digits of sha256(tenant): 64 bits


def tenant_slug(tenant: str) -> str:
    """A storage-safe, injective form of a tenant name: `<readable slug>_<hash of the exact name>`."""
    slug = re.sub(r"[^a-zA-Z0-9]+", "-", tenant)[:SLUG_LENGTH].strip("-") or "t"
    return f"{slug}_{hashlib.sha256(tenant.encode('utf-8')).hexdigest()[:HASH_LENGTH]}"
