"""A client key's limits on the routes the proxy relays without handling them itself (/v1/completions,
embeddings, images, audio, files, batches; Anthropic's count_tokens and message batches).

Chat completions, Responses and Messages check the key's models and charge the usage the upstream
reports in their handlers. The relayed routes did neither: a key allowed only `gpt-4o-mini*` got
`gpt-4o` through /v1/completions, and 5,010 tokens reported there were charged 0. Here:
- the model a relayed request names is checked: a JSON body's `model`, each `params.model` of an
  Anthropic message batch, a multipart form's `model` field (audio);
- the usage a relayed JSON answer reports is charged (prompt and completion tokens, or Anthropic's
  input and output tokens);
- a batch, whose cost is known only when its results are read, is refused to a key with a model list
  or a token budget: the proxy could enforce neither on it;
- what the provider stores (files, batches, stored responses and chat completions, vector stores,
  conversations, …) is kept under the proxy's one provider key, which every tenant shares: a key
  bound to one tenant read another tenant's stored Response, its files and every stored chat
  completion. Open to such a key: the routes that keep nothing at the provider, and the Responses,
  conversations, files, batches (and their result files) and vector stores it makes, then those its
  tenant made through the proxy (owned.py); a body naming a stored file or vector store (a batch's
  input file, a vector store's files) must name its tenant's own. Listings, uploads, stored chat
  completions and the rest are for a key that acts for every tenant (`tenants: ['*']`), or for
  passthrough mode, where each client's own provider key keeps its objects apart.
"""

from __future__ import annotations

import json
import re
from typing import Any

from ..errors import ProxyError
from .middleware import Charge
from .owned import CREATES, REFERS
from .records import ANY_TENANT

BATCH_CREATES = ("batches", "messages/batches")  # POST here: requests whose cost is known later
# Relayed routes that keep nothing at the provider (an allow-list: a route the provider adds later is
# closed to one-tenant keys until it is known to be stateless)
STATELESS = re.compile(r"(models(/[^/]+)?|embeddings|completions|moderations|images/(generations|edits|variations)"
                       r"|audio/(speech|transcriptions|translations)|messages/count_tokens)")
_FORM_MODEL = re.compile(rb'name="model"\r?\n(?:[^\r\n]+\r?\n)*\r?\n([^\r\n]{1,200})\r?\n')


def json_body(body: bytes | None, content_type: str) -> Any:
    """A relayed request's JSON body, parsed; None for a form, no body, or one that is not JSON."""
    if not body or "multipart/form-data" in content_type:
        return None
    try:
        return json.loads(body)
    except ValueError:
        return None


def requested_models(body: bytes | None, content_type: str, data: Any = None) -> list[str]:
    """The models a relayed request names (none found: an empty list); `data`: its JSON, parsed."""
    if body and "multipart/form-data" in content_type:
        return [m.decode("utf-8", "replace") for m in _FORM_MODEL.findall(body[:1_000_000])]
    data = json_body(body, content_type) if data is None else data
    if not isinstance(data, dict):
        return []
    models = [data["model"]] if isinstance(data.get("model"), str) else []
    for request in data.get("requests") or [] if isinstance(data.get("requests"), list) else []:
        params = request.get("params") if isinstance(request, dict) else None
        if isinstance(params, dict) and isinstance(params.get("model"), str):
            models.append(params["model"])
    return models


async def check_relayed(charge: Charge | None, method: str, path: str, body: bytes | None, content_type: str) -> None:
    """ProxyError 403 when the key may not make this relayed request; nothing without a key."""
    if charge is None:
        return
    bare = path.split("?", 1)[0].strip("/")
    if ANY_TENANT not in charge.record.tenants and not STATELESS.fullmatch(bare) and not await _its_own(charge, method, bare):
        raise ProxyError(403, "shared_provider_state",
                         f"/v1/{bare} reaches what the provider stores under the proxy's one provider key, which every "
                         "tenant shares; a key for one tenant may use only the Responses, conversations, files, batches "
                         "and vector stores its tenant made through the proxy, and no listing of them (a key for every "
                         "tenant may, or passthrough mode, with each client's own provider key).")
    data = json_body(body, content_type)
    await charge.check_references(data)  # a batch's input file, a vector store's files: its tenant's own
    for model in requested_models(body, content_type, data):
        charge.check_model(model)
    limited = bool(charge.record.models) or charge.record.tokens_per_day is not None
    if method == "POST" and bare in BATCH_CREATES and limited:
        raise ProxyError(403, "batches_not_allowed",
                         "This key has a model list or a token budget, which the proxy cannot apply to a batch (its "
                         "requests are billed when they run); use a key without them for batches.")


async def _its_own(charge: Charge, method: str, bare: str) -> bool:
    """A new stored object (noted for the key's tenant as it is answered: owned.py), or one the key's
    tenant made, and what hangs off it (a Response's input items, a file's content, a batch's cancel, …)."""
    if method == "POST" and bare in CREATES:
        return True
    referred = REFERS.fullmatch(bare)
    return referred is not None and await charge.owns(referred.group(1))


def charge_relayed(charge: Charge | None, usage: Any) -> None:
    """The usage a relayed answer reports, added to what the key is charged for this request."""
    if charge is None or not isinstance(usage, dict):
        return
    for ours, theirs in (("prompt_tokens", "input_tokens"), ("completion_tokens", "output_tokens")):
        value = usage.get(ours, usage.get(theirs))
        if isinstance(value, int) and not isinstance(value, bool):
            charge.usage[ours] = charge.usage.get(ours, 0) + value
