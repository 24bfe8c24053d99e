"""The gate: which mode the proxy runs in, whether it may listen where it was asked to, and who a
request's client key says it is.

Modes (`auth.mode`):
- `keys`: every /v1/* request needs a client key (`Authorization: Bearer cwk-…`, or `x-api-key`
  on the Messages API); the key names its tenant, and the proxy sends its own provider key.
- `passthrough`: the client's own provider key goes upstream (the provider judges it); the proxy
  must hold no provider key of its own, or it would spend its key on anyone's behalf.
- `open`: the proxy's provider key, no client key asked. Explicit only, logged loudly at start.
- unset: `passthrough` when the proxy holds no provider key; with one, `open` on a loopback address
  (with a warning) and a refusal to start anywhere else (an open relay of the operator's key).
"""

from __future__ import annotations

import asyncio
import ipaddress
import logging
import os
import time
from typing import Any

from ..config import ConfigError, Settings
from ..errors import ProxyError
from .owned import open_owners
from .records import KeyRecord, hash_key
from .store import KeyStore, open_store
from .usage import NO_HOLD, Hold, RedisUsage
from .usage_file import FileUsage

log = logging.getLogger("ctxwarden.keys")

REFRESH_S = 0.5  # a key created or revoked anywhere is seen here within this (plus one store read)
UNKNOWN_REFRESH_S = 0.1  # an unknown key re-reads the store at most this often (a new key, just made)


def provider_keys(settings: Settings) -> list[str]:
    """The variables holding a provider key this proxy sends (set and non-empty)."""
    names = [settings.upstream.api_key_env, settings.upstream.anthropic.api_key_env]
    return [n for n in names if n and os.environ.get(n)]


def is_loopback(host: str) -> bool:
    if host in ("localhost", "localhost.localdomain"):
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def resolve_mode(settings: Settings) -> str:
    """The mode the proxy runs in; ConfigError when it must not start as configured."""
    mode, host, keys = settings.auth.mode, settings.server.host, provider_keys(settings)
    if mode == "passthrough" and keys:
        raise ConfigError(settings.source, [f"auth.mode passthrough sends the client's own provider key, but {', '.join(keys)} is set: "
                          "unset it, or use auth.mode: keys (client keys) or open"])
    if mode is not None:
        if mode == "open" and keys:
            log.warning("auth.mode is open: anyone who reaches %s:%s spends %s and may name any tenant",
                        host, settings.server.port, ", ".join(keys))
        return mode
    if not keys:
        return "passthrough"
    if not is_loopback(host):
        raise ConfigError(settings.source, [
            f"the proxy holds a provider key ({', '.join(keys)}) and would listen on {host}, beyond this machine: "
            "anyone reaching the port could spend it. Set auth.mode: keys and create client keys "
            "(`ctxwarden keys create --tenant NAME`), or set auth.mode: open to accept that explicitly"])
    log.warning("no client keys (auth.mode unset): every local client spends %s. Set auth.mode: keys to require them",
                ", ".join(keys))
    return "open"


def open_usage(settings: Settings) -> Any:
    """Where key usage is counted: Redis when replicas share it, else a file beside the keys."""
    if settings.state.redis_url:
        return RedisUsage(settings.state.redis_url, settings.state.timeout_s)
    return FileUsage(settings.storage.path)


def guarded(path: str) -> bool:
    """The routes a client key is asked for: the model APIs and their relays."""
    return path.startswith("/v1/") or path == "/chat/completions"


class KeyGate:
    def __init__(self, mode: str, store: KeyStore | None, usage: Any, owners: Any = None) -> None:
        self.mode = mode
        self.store = store
        self.usage = usage
        self.owners = owners  # which tenant made each stored provider object (owned.py); keys mode only
        self.records: dict[str, KeyRecord] = {}
        self.read_at = float("-inf")
        self.forced_at = float("-inf")
        self._lock = asyncio.Lock()

    @classmethod
    def from_settings(cls, settings: Settings) -> KeyGate:
        mode = resolve_mode(settings)
        store = open_store(settings.storage.path, settings.state.redis_url)
        usage = open_usage(settings)
        owners = open_owners(settings.storage.path, settings.state.redis_url, settings.state.timeout_s) if mode == "keys" else None
        gate = cls(mode, store, usage, owners)
        if mode == "keys":
            gate._refresh()
            if not any(r.active for r in gate.records.values()):
                log.warning("auth.mode is keys and there are no client keys yet (%s): every request gets 401 until "
                            "`ctxwarden keys create --tenant NAME` makes one", store.where)
        return gate

    def _refresh(self) -> None:
        try:
            if self.store is not None and (self.store.changed() or not self.records):
                self.records = self.store.snapshot()
        except Exception as exc:  # keep the last snapshot: known keys go on, unknown ones stay unknown
            log.warning("client keys: could not read %s (%s: %s)", getattr(self.store, "where", "?"), type(exc).__name__, exc)
        self.read_at = time.monotonic()

    async def _fresh(self, force: bool = False) -> None:
        now = time.monotonic()
        if now - self.read_at < REFRESH_S and not force:
            return
        async with self._lock:
            if time.monotonic() - self.read_at >= REFRESH_S or force:
                await asyncio.to_thread(self._refresh)

    async def reload(self) -> None:
        """Read the store now: a key made or revoked through this process counts from its next request
        (not only once the periodic or the unknown-key re-read comes round)."""
        await self._fresh(force=True)

    async def authenticate(self, secret: str | None) -> KeyRecord:
        """The active record of `secret`; ProxyError 401 for a missing, unknown or revoked key."""
        if not secret:
            raise ProxyError(401, "invalid_api_key", "A client key is required: send 'Authorization: Bearer <key>' "
                             "(or x-api-key on the Messages API).", type="invalid_request_error")
        await self._fresh()
        digest = hash_key(secret)
        record = self.records.get(digest)
        if record is None and time.monotonic() - self.forced_at >= UNKNOWN_REFRESH_S:
            self.forced_at = time.monotonic()  # perhaps made a moment ago, elsewhere: read once more
            await self._fresh(force=True)
            record = self.records.get(digest)
        if record is None:
            raise ProxyError(401, "invalid_api_key", "The client key is not valid.", type="invalid_request_error")
        if not record.active:
            raise ProxyError(401, "invalid_api_key", "The client key was revoked.", type="invalid_request_error")
        return record

    @staticmethod
    def tenant_for(record: KeyRecord, asked: str | None) -> str:
        """The tenant a request acts as: its key's, or the one it names when the key may act for it."""
        if not asked or asked == record.tenant:
            return record.tenant
        if record.may_act_for(asked):
            return asked
        raise ProxyError(403, "tenant_not_allowed", f"This key may not act for the tenant {asked!r}.",
                         param="x-ctxwarden-tenant")

    async def admit(self, record: KeyRecord, estimate: int = 0) -> Hold:
        """ProxyError 429 (with retry-after) past the key's rate or daily token budget; else what the
        request holds of the budget (its `estimate` of prompt tokens) until it is charged."""
        refused, hold = await self.usage.admit(record, estimate)
        if refused:
            code, message, retry_after = refused
            raise ProxyError(429, code, message, headers={"retry-after": str(retry_after)})
        return hold

    async def charge(self, record: KeyRecord, tokens: int, hold: Hold = NO_HOLD) -> None:
        try:
            await self.usage.charge(record, tokens, hold)
        except Exception:
            log.exception("client key usage not recorded")

    async def listing(self) -> list[dict[str, Any]]:
        """Every key (no hashes), with its usage, newest first."""
        await self._fresh(force=True)
        records = sorted(self.records.values(), key=lambda r: r.created_at, reverse=True)
        used = await self.usage.report([r.id for r in records])
        return [{**r.public(), "usage": used.get(r.id, {"requests": 0, "tokens": 0, "last_used": None})} for r in records]
