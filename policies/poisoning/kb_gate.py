"""The knowledge base as a gate other policies may ask: does the tenant's KB contradict this text?

Published in `Services.shared["kb_contradiction"]` by the poisoning policy (one line in its
__init__), so a policy that wants it (the memory policy's write gate, RF-005 "consistency with the
KB") looks it up by that key and imports nothing of this package:

    await services.shared["kb_contradiction"](exchange, text)
        → None, or {"claim", "evidence", "kind", "confidence", "checker"}

A text is judged as an incoming message is (assess.input_evidence: the pieces that share words with
the KB, their evidence, the configured checker); a contradiction counts when the checker is at least
`confidence_threshold` sure. An empty KB answers None without a check. Errors propagate: the caller
decides how to fail.
"""

from __future__ import annotations

import asyncio
from typing import Any

from ..base import Exchange
from .assess import input_evidence

KEY = "kb_contradiction"


def share(policy: Any) -> None:
    """Publish `policy`'s KB check under KEY in its services' shared dict."""

    async def contradiction(ex: Exchange, text: str) -> dict[str, Any] | None:
        kb = policy.kb(ex.tenant)
        pieces, claims = await asyncio.to_thread(input_evidence, text, kb, policy.config.input_max_claims,
                                                 policy.config.top_k)
        worst = (await policy._assess(ex, claims)).worst if claims else None
        if worst is None or worst.confidence < policy.config.confidence_threshold:
            return None
        return {"claim": worst.claim, "evidence": worst.evidence, "kind": worst.kind or "contradiction",
                "confidence": round(worst.confidence, 3), "checker": worst.checker}

    policy.services.shared[KEY] = contradiction
