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
  or a token budget: the proxy could enforce neither on it.
"""

from __future__ import annotations

import json
import re
from typing import Any

from ..errors import ProxyError
from .middleware import Charge

BATCH_CREATES = ("batches", "messages/batches")  # POST here: requests whose cost is known later
_FORM_MODEL = re.compile(rb'name="model"\r?\n(?:[^\r\n]+\r?\n)*\r?\n([^\r\n]{1,200})\r?\n')


def requested_models(body: bytes | None, content_type: str) -> list[str]:
    """The models a relayed request names (none found: an empty list)."""
    if not body:
        return []
    if "multipart/form-data" in content_type:
        return [m.decode("utf-8", "replace") for m in _FORM_MODEL.findall(body[:1_000_000])]
    try:
        data = json.loads(body)
    except ValueError:
        return []
    if not isinstance(data, dict):
        return []
    models = [data["model"]] if isinstance(data.get("model"), str) else []
    for request in data.get("requests") or [] if isinstance(data.get("requests"), list) else []:
        params = request.get("params") if isinstance(request, dict) else None
        if isinstance(params, dict) and isinstance(params.get("model"), str):
            models.append(params["model"])
    return models


def check_relayed(charge: Charge | None, method: str, path: str, body: bytes | None, content_type: str) -> None:
    """ProxyError 403 when the key may not make this relayed request; nothing without a key."""
    if charge is None:
        return
    for model in requested_models(body, content_type):
        charge.check_model(model)
    bare = path.split("?", 1)[0].strip("/")
    limited = bool(charge.record.models) or charge.record.tokens_per_day is not None
    if method == "POST" and bare in BATCH_CREATES and limited:
        raise ProxyError(403, "batches_not_allowed",
                         "This key has a model list or a token budget, which the proxy cannot apply to a batch (its "
                         "requests are billed when they run); use a key without them for batches.")


def charge_relayed(charge: Charge | None, usage: Any) -> None:
    """The usage a relayed answer reports, added to what the key is charged for this request."""
    if charge is None or not isinstance(usage, dict):
        return
    for ours, theirs in (("prompt_tokens", "input_tokens"), ("completion_tokens", "output_tokens")):
        value = usage.get(ours, usage.get(theirs))
        if isinstance(value, int) and not isinstance(value, bool):
            charge.usage[ours] = charge.usage.get(ours, 0) + value
