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
from .owned import CREATES, READS_BATCH, BatchFiles, NewObject, body_references, owned_by, referenced_id
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
    owners: Any = None  # which tenant made each stored provider object (owned.py); None: nothing is anyone's
    stored: bool = True  # what this request makes is kept by the provider (False: the body says `store: false`)

    def check_model(self, model: str) -> None:
        if not self.record.may_use_model(model):
            raise ProxyError(403, "model_not_allowed", f"This key may not use the model {model!r}.", param="model")

    async def owns(self, object_id: str) -> bool:
        """A key for every tenant may refer to any stored object; a key for one, to those its tenant made."""
        if ANY_TENANT in self.record.tenants:
            return True
        return self.owners is not None and await owned_by(self.owners, object_id, self.tenant)

    async def check_request(self, model: str, body: Any) -> None:
        """The model, and each reference to what the provider stores under the proxy's one provider key
        (a stored Response to continue, a conversation, a code container): every tenant's objects are
        kept there together, so a key for one tenant may refer only to those its tenant made through
        the proxy (owned.py; containers are not followed, so never)."""
        self.check_model(model)
        if isinstance(body, dict) and body.get("store") is False:
            self.stored = False  # nothing to note: a later reference to it would find nothing at the provider
        if ANY_TENANT in self.record.tenants or not isinstance(body, dict):
            return
        for name in STORED_REFERENCES:
            if body.get(name) is None:
                continue
            object_id = referenced_id(body[name]) if name != "container" else None
            if object_id is None or not await self.owns(object_id):
                raise not_its_own(name)
        await self.check_references(body)

    async def check_references(self, body: Any) -> None:
        """Each stored file and vector store the body names (a content part's `file_id`, file_search's
        `vector_store_ids`, a batch's `input_file_id`, …) must be one this key's tenant made."""
        if ANY_TENANT in self.record.tenants or not isinstance(body, (dict, list)):
            return
        checked: set[str] = set()  # an id named twice (in two content parts) is looked up once
        for name, object_id in body_references(body):
            if object_id not in checked:
                checked.add(object_id)
                if not await self.owns(object_id):
                    raise not_its_own(name)

    @property
    def tokens(self) -> int:
        reported = self.usage.get("prompt_tokens", 0) + self.usage.get("completion_tokens", 0)
        return reported or self.usage.get(COUNTED_PROMPT, 0)  # the proxy's count of the prompt it forwarded


def not_its_own(name: str) -> ProxyError:
    return ProxyError(403, "shared_provider_state",
                      f"`{name}` refers to something the provider stores under the proxy's one provider key, which every "
                      "tenant shares, and this key's tenant did not make it through the proxy (send the whole conversation "
                      "or upload the file with this key, or use a key for every tenant).", param=name)


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


def makes_object(scope: Any) -> bool:
    """A POST whose answer names a new object the provider stores (a Response, a file, a batch, …)."""
    return scope.get("method") == "POST" and scope.get("path", "").removeprefix("/v1/").strip("/") in CREATES


def watcher(scope: Any, charge: Charge) -> NewObject | None:
    """What notes the stored objects this request's answer names for its tenant: a new object's id,
    or the result files of a batch read or cancelled (owned.py); None for every other request."""
    if charge.owners is None:
        return None
    if makes_object(scope):
        return NewObject(charge)
    path = scope.get("path", "").removeprefix("/v1/").strip("/")
    return BatchFiles(charge) if READS_BATCH.fullmatch(path) else None


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
        charge = Charge(record, tenant, owners=self.gate.owners)
        scope = {**scope, "headers": kept, "state": {**(scope.get("state") or {}), CHARGE: charge}}
        charged = False
        made = watcher(scope, charge)

        async def send_charged(message: Any) -> None:
            nonlocal charged
            if made is not None:
                await made.see(message)
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
