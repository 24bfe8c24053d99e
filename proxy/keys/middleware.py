"""ASGI layer in `keys` mode: every guarded route (/v1/*, /chat/completions) needs a client key.

It answers 401/403/429 itself, in the shape of the API the route speaks (Anthropic's on
/v1/messages*, OpenAI's elsewhere), before any handler, policy, state or upstream is reached.
A request it admits goes on with the client's credentials removed (the proxy sends its own
provider key; the client key never leaves the proxy) and with `x-ctxwarden-tenant` (and a pinned
`x-ctxwarden-user`) rewritten to what the key allows, so every handler, policy and relay scopes
its state by the key's tenant whatever the client sent. The handler reads the `Charge` it leaves
in the scope: the key's model check, and the usage the upstream reports, charged when the
response is over.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from starlette.responses import JSONResponse

from ..answers import COUNTED_PROMPT
from ..errors import ProxyError
from ..wire.anthropic import error_body as anthropic_error_body
from .gate import KeyGate, guarded
from .records import ANY_TENANT, KeyRecord

CHARGE = "ctxwarden.client_key"  # the scope["state"] entry handlers read
CREDENTIALS = {b"authorization", b"x-api-key", b"api-key", b"x-goog-api-key"}
REWRITTEN = {b"x-ctxwarden-tenant", b"x-ctxwarden-user"}
STORED_REFERENCES = ("previous_response_id", "conversation", "container")  # fields naming provider-stored state


@dataclass
class Charge:
    record: KeyRecord
    tenant: str
    usage: dict[str, int] = field(default_factory=dict)  # the exchange's RequestNotes.usage (prompt/completion tokens)

    def check_model(self, model: str) -> None:
        if not self.record.may_use_model(model):
            raise ProxyError(403, "model_not_allowed", f"This key may not use the model {model!r}.", param="model")

    def check_request(self, model: str, body: Any) -> None:
        """The model, and no reference to what the provider stores under the proxy's one provider key
        (a stored Response to continue, a conversation, a code container): every tenant's objects are
        kept there together, so a key for one tenant could continue another's (keys/relayed.py)."""
        self.check_model(model)
        if ANY_TENANT in self.record.tenants or not isinstance(body, dict):
            return
        for field in STORED_REFERENCES:
            if body.get(field) is not None:
                raise ProxyError(403, "shared_provider_state",
                                 f"`{field}` refers to what the provider stores under the proxy's one provider key, "
                                 "which every tenant shares; a key for one tenant may not use it (send the whole "
                                 "conversation instead, or use a key for every tenant).", param=field)

    @property
    def tokens(self) -> int:
        reported = self.usage.get("prompt_tokens", 0) + self.usage.get("completion_tokens", 0)
        return reported or self.usage.get(COUNTED_PROMPT, 0)  # the proxy's count of the prompt it forwarded


def charge_of(scope: Any) -> Charge | None:
    state = scope.get("state")
    return state.get(CHARGE) if isinstance(state, dict) else None


def prompt_estimate(headers: dict[bytes, bytes]) -> int:
    """Tokens a request is held for until its answer is charged (usage.py): a quarter of its body's
    bytes, about a token's length in English text and JSON (0 when the length is not sent)."""
    try:
        return max(0, int(headers.get(b"content-length", b"0"))) // 4
    except ValueError:
        return 0


def _secret(headers: dict[bytes, bytes]) -> str | None:
    auth = headers.get(b"authorization", b"").decode("latin-1").strip()
    if auth[:7].lower() == "bearer ":
        return auth[7:].strip() or None
    for name in (b"x-api-key", b"api-key"):
        if headers.get(name):
            return headers[name].decode("latin-1").strip() or None
    return None


class ClientKeys:
    def __init__(self, app: Any, gate: KeyGate) -> None:
        self.app = app
        self.gate = gate

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http" or not guarded(scope.get("path", "")):
            await self.app(scope, receive, send)
            return
        headers = dict(scope.get("headers") or [])
        try:
            record = await self.gate.authenticate(_secret(headers))
            asked = headers.get(b"x-ctxwarden-tenant", b"").decode("utf-8", "replace") or None
            tenant = self.gate.tenant_for(record, asked)
            hold = await self.gate.admit(record, prompt_estimate(headers))
        except ProxyError as exc:
            await self._refuse(scope, receive, send, exc)
            return
        kept = [(k, v) for k, v in scope.get("headers") or [] if k.lower() not in CREDENTIALS | REWRITTEN]
        kept.append((b"x-ctxwarden-tenant", tenant.encode("utf-8")))
        user = record.user if record.user is not None else headers.get(b"x-ctxwarden-user", b"").decode("utf-8", "replace")
        if user:
            kept.append((b"x-ctxwarden-user", user.encode("utf-8")))
        charge = Charge(record, tenant)
        scope = {**scope, "headers": kept, "state": {**(scope.get("state") or {}), CHARGE: charge}}
        charged = False

        async def send_charged(message: Any) -> None:
            nonlocal charged
            # Charged before the last byte goes out, so the client's next request sees this one's tokens.
            if message["type"] == "http.response.body" and not message.get("more_body", False) and not charged:
                charged = True
                await self.gate.charge(record, charge.tokens, hold)
            await send(message)

        try:
            await self.app(scope, receive, send_charged)
        finally:
            if not charged:  # the client left mid-answer, or the app failed: what was used is still charged
                await self.gate.charge(record, charge.tokens, hold)

    @staticmethod
    async def _refuse(scope: Any, receive: Any, send: Any, exc: ProxyError) -> None:
        if scope.get("path", "").startswith("/v1/messages"):
            response = JSONResponse(anthropic_error_body(exc.status, None, exc.message), status_code=exc.status,
                                    headers=exc.headers)
        else:
            response = exc.response()
        await response(scope, receive, send)
