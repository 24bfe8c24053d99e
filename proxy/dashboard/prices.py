"""Input token prices (USD per token) from litellm's bundled model map, read offline like the
context windows (proxy/models.py): the same data as `litellm.model_cost` with
LITELLM_LOCAL_MODEL_COST_MAP=True, without importing litellm."""

from __future__ import annotations

from functools import lru_cache

from ..models import _litellm_model_map


@lru_cache(maxsize=256)
def input_price(model: str) -> float | None:
    """USD per input token of `model` (or of its name without a `provider/` prefix); None when unknown."""
    table = _litellm_model_map()
    for name in (model, model.split("/", 1)[1] if "/" in model else None):
        price = (table.get(name) or {}).get("input_cost_per_token") if name else None
        if isinstance(price, (int, float)) and not isinstance(price, bool) and price >= 0:
            return float(price)
    return None
