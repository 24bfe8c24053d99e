"""A client key's record: what it may do. The key itself is never stored, only its SHA-256.

A key is `cwk-` and 43 random URL-safe characters (256 bits): a fast hash is enough to store it,
since nothing about a random key of that length can be guessed from its hash (a slow KDF protects
passwords people choose, not random keys).
"""

from __future__ import annotations

import fnmatch
import hashlib
import secrets
import time
import uuid
from dataclasses import asdict, dataclass, field
from typing import Any

from ctxwarden.policies.errors import TenantError, check_tenant

PREFIX = "cwk-"
ANY_TENANT = "*"


def hash_key(secret: str) -> str:
    return hashlib.sha256(secret.encode("utf-8", "surrogatepass")).hexdigest()


def new_secret() -> str:
    return PREFIX + secrets.token_urlsafe(32)


@dataclass
class KeyRecord:
    id: str
    key_hash: str
    tenant: str  # the tenant its requests act as (unless it may act for others and names one)
    name: str = ""
    hint: str = ""  # the key's first characters and last four, to recognise it in a list
    tenants: list[str] = field(default_factory=list)  # other tenants it may name in x-ctxwarden-tenant ("*": any)
    user: str | None = None  # pins x-ctxwarden-user: memories of this user only
    models: list[str] = field(default_factory=list)  # glob patterns it may call ("gpt-4o*"); empty: any
    tokens_per_day: int | None = None  # prompt + completion tokens per UTC day
    requests_per_minute: int | None = None
    created_at: float = 0.0
    revoked_at: float | None = None

    @property
    def active(self) -> bool:
        return self.revoked_at is None

    def may_use_model(self, model: str) -> bool:
        return not self.models or any(fnmatch.fnmatchcase(model, pattern) for pattern in self.models)

    def may_act_for(self, tenant: str) -> bool:
        return tenant == self.tenant or ANY_TENANT in self.tenants or tenant in self.tenants

    def public(self) -> dict[str, Any]:
        """What a listing shows: everything but the hash."""
        out = asdict(self)
        out.pop("key_hash")
        return out

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> KeyRecord:
        known = {f for f in cls.__dataclass_fields__}
        return cls(**{k: v for k, v in data.items() if k in known})


def make_key(tenant: str, *, name: str = "", tenants: list[str] | None = None, user: str | None = None,
             models: list[str] | None = None, tokens_per_day: int | None = None,
             requests_per_minute: int | None = None) -> tuple[str, KeyRecord]:
    """A new key: (the secret, shown once; its record). ValueError for an invalid tenant or limit."""
    for name_ in [tenant, *(t for t in tenants or [] if t != ANY_TENANT)]:
        try:
            check_tenant(name_)
        except TenantError as exc:
            raise ValueError(str(exc)) from exc
    for label, limit in (("tokens_per_day", tokens_per_day), ("requests_per_minute", requests_per_minute)):
        if limit is not None and (not isinstance(limit, int) or isinstance(limit, bool) or limit < 1):
            raise ValueError(f"{label} must be a positive integer")
    secret = new_secret()
    record = KeyRecord(
        id="key_" + uuid.uuid4().hex[:12], key_hash=hash_key(secret), tenant=tenant, name=name,
        hint=f"{secret[:8]}…{secret[-4:]}", tenants=list(tenants or []), user=user, models=list(models or []),
        tokens_per_day=tokens_per_day, requests_per_minute=requests_per_minute, created_at=time.time())
    return secret, record
