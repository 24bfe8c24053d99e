"""The LLM judge (`checker: llm`): all claims of one answer, with their evidence, in ONE call.

The judge model sees the user's question, the evidence windows (deduplicated, numbered) and the
claims (numbered), and answers strict JSON (`response_format: json_schema`, validated here with
pydantic): one verdict per claim. A claim is read as an answer to the question, so "Delhi" to
"which city…?" is judged as "the city is Delhi".

The call goes through the proxy's upstream (`Services.complete_raw`, with the exchange's headers),
or, when `judge.base_url` is set, straight to that endpoint with the key from `judge.api_key_env`
(never the client's credentials). Verdicts are cached by hash of (claim, its context, question,
evidence windows), so a repeated answer costs no call. A timeout, a transport error, a non-2xx
answer or JSON that does not validate never fails the request: the fallback (local) checker
decides those claims, and a `judge_fallback` event says why.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import os
import time
from typing import Any, Sequence

import httpx
from pydantic import ValidationError

from ...cache import LRU, stable_hash
from ...errors import CtxwardenError
from .base import UNVERIFIABLE, CheckContext, Checker, ClaimToCheck, ClaimVerdict, unverifiable
from .llm_prompt import Prompt, build_prompt, parse_judgement

log = logging.getLogger("ctxwarden.poisoning")


class JudgeCallError(CtxwardenError):
    """The judge endpoint answered with an error status, or there is no way to call it."""

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


class LLMChecker:
    name = "llm"

    def __init__(self, judge_config: Any, services: Any, fallback: Checker | None = None) -> None:
        if not judge_config.model:
            raise ValueError("policies.poisoning.judge.model is required for checker llm or hybrid")
        self.config = judge_config
        self.services = services
        self.fallback = fallback
        self.calls = 0  # judge requests made (cache hits and claims without evidence make none)
        self._cache: LRU[str, ClaimVerdict] | None = LRU(judge_config.cache_size) if judge_config.cache_size else None
        self._http: httpx.AsyncClient | None = None

    async def check(self, claims: Sequence[ClaimToCheck], ctx: CheckContext) -> list[ClaimVerdict]:
        out: list[ClaimVerdict | None] = [None] * len(claims)
        pending: list[int] = []
        for i, claim in enumerate(claims):
            if not claim.evidence:
                out[i] = unverifiable(claim, self.name)  # nothing to judge against: no call
            elif (hit := self._cached(claim)) is not None:
                out[i] = hit
            else:
                pending.append(i)
        if pending:
            judged = await self._judge([claims[i] for i in pending], ctx)
            for i, verdict in zip(pending, judged):
                out[i] = verdict
        return out  # type: ignore[return-value]

    async def aclose(self) -> None:
        if self._http is not None:
            await self._http.aclose()
            self._http = None

    # ------------------------------------------------------------------ one call

    async def _judge(self, claims: Sequence[ClaimToCheck], ctx: CheckContext) -> list[ClaimVerdict]:
        prompt = build_prompt(claims)
        started = time.perf_counter()
        try:
            data = await asyncio.wait_for(self._call(prompt, ctx), self.config.timeout_s)
            verdicts = self._verdicts(claims, prompt, data)
        except (asyncio.TimeoutError, httpx.TimeoutException) as exc:
            return await self._fall_back(claims, ctx, "timeout", exc, started)
        except (ValidationError, ValueError) as exc:  # pydantic's ValidationError is a ValueError
            return await self._fall_back(claims, ctx, "bad_json", exc, started)
        except Exception as exc:  # transport errors, non-2xx: the answer must still be checked
            return await self._fall_back(claims, ctx, "error", exc, started)
        latency_ms = (time.perf_counter() - started) * 1000
        for verdict, share in zip(verdicts, _shares(_total_tokens(data), len(verdicts))):
            verdict.latency_ms, verdict.tokens = latency_ms, share
        for claim, verdict in zip(claims, verdicts):
            self._remember(claim, verdict)
        return verdicts

    def _verdicts(self, claims: Sequence[ClaimToCheck], prompt: Prompt, data: Any) -> list[ClaimVerdict]:
        judged = parse_judgement(_content(data), len(claims), len(prompt.windows))
        out = []
        for claim, j in zip(claims, judged):
            ev = prompt.evidence_for(claim, j.evidence)
            if ev is None and j.verdict != UNVERIFIABLE:
                ev = claim.evidence[0]  # a verdict without a citation: the claim's closest passage
            kind = (j.kind if j.kind != "none" else "contradicted") if j.verdict == "contradicted" else ""
            out.append(ClaimVerdict(claim.text, j.verdict, j.confidence, ev.window if ev else "",
                                    ev.id if ev else "", kind, checker=self.name))
        return out

    async def _call(self, prompt: Prompt, ctx: CheckContext) -> dict[str, Any]:
        """The judge's response JSON; raises on any failure."""
        self.calls += 1
        kwargs = {"temperature": 0, "response_format": prompt.response_format}
        if self.config.base_url:
            return await self._call_direct(prompt.messages, kwargs)
        services = self.services
        if getattr(services, "complete_raw", None) is not None:
            return await services.complete_raw(self.config.model, prompt.messages, exchange=ctx.exchange, **kwargs)
        if getattr(services, "complete", None) is not None:  # an older Services: text only, no usage
            text = await services.complete(self.config.model, prompt.messages, exchange=ctx.exchange, **kwargs)
            return {"choices": [{"message": {"content": text}}]}
        raise JudgeCallError("no completion service to call the judge through")

    async def _call_direct(self, messages: list[dict[str, Any]], kwargs: dict[str, Any]) -> dict[str, Any]:
        """Straight to `judge.base_url`, with the key of `judge.api_key_env` (never the client's)."""
        if self._http is None:
            self._http = httpx.AsyncClient(timeout=self.config.timeout_s)
        headers = {"content-type": "application/json"}
        key = os.environ.get(self.config.api_key_env) if self.config.api_key_env else None
        if key:
            headers["authorization"] = f"Bearer {key}"
        url = f"{self.config.base_url.rstrip('/')}/chat/completions"
        response = await self._http.post(url, json={"model": self.config.model, "messages": messages, **kwargs},
                                         headers=headers)
        if not response.is_success:
            raise JudgeCallError(f"the judge at {self.config.base_url} answered {response.status_code}", response.status_code)
        return response.json()

    async def _fall_back(self, claims: Sequence[ClaimToCheck], ctx: CheckContext, reason: str, exc: BaseException,
                         started: float) -> list[ClaimVerdict]:
        """The fallback checker's verdicts for `claims`, and an event saying why the judge was not used."""
        latency_ms = (time.perf_counter() - started) * 1000
        detail = str(exc)[:200] or type(exc).__name__
        event = {"event": "judge_fallback", "reason": reason, "model": self.config.model, "claims": len(claims),
                 "latency_ms": round(latency_ms, 1), "detail": detail}
        if getattr(exc, "status", None) is not None:
            event["status"] = exc.status  # type: ignore[attr-defined]
        ctx.events.append(event)
        log.warning("poisoning judge %s failed (%s: %s); the fallback checker decides %d claim(s)",
                    self.config.model, reason, detail, len(claims))
        if self.fallback is None:
            verdicts = [unverifiable(c, self.name) for c in claims]
        else:
            verdicts = await self.fallback.check(claims, ctx)
        return [dataclasses.replace(v, note=f"fallback: {_REASONS.get(reason, reason)}") for v in verdicts]

    # ------------------------------------------------------------------ cache

    def _key(self, claim: ClaimToCheck) -> str:
        # the context is part of the key: "It opened in 1889" means something else after another sentence
        return stable_hash([claim.text, claim.context, claim.question, [e.window for e in claim.evidence]])

    def _cached(self, claim: ClaimToCheck) -> ClaimVerdict | None:
        hit = self._cache.get(self._key(claim)) if self._cache is not None else None
        return dataclasses.replace(hit, latency_ms=0.0, tokens=0, note="cached") if hit is not None else None

    def _remember(self, claim: ClaimToCheck, verdict: ClaimVerdict) -> None:
        if self._cache is not None:
            self._cache.put(self._key(claim), dataclasses.replace(verdict))


_REASONS = {"timeout": "judge timed out", "bad_json": "judge answered invalid JSON", "error": "judge call failed"}


def _content(data: Any) -> str:
    try:
        message = data["choices"][0]["message"]
    except (KeyError, IndexError, TypeError) as exc:
        raise ValueError("the judge's response has no choices[0].message") from exc
    if message.get("refusal"):
        raise ValueError(f"the judge refused: {str(message['refusal'])[:200]}")
    return message.get("content") or ""


def _total_tokens(data: Any) -> int:
    usage = data.get("usage") if isinstance(data, dict) else None
    try:
        return max(0, int((usage or {}).get("total_tokens") or 0))
    except (TypeError, ValueError):
        return 0


def _shares(total: int, n: int) -> list[int]:
    """`total` split into n whole shares that add up to it (the first ones take the remainder)."""
    base, extra = divmod(total, n) if n else (0, 0)
    return [base + (1 if i < extra else 0) for i in range(n)]

